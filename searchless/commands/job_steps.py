"""A job of numbered steps, each one of the project's commands: announced, recorded, skipped when done, timed.

The demo (`make run`) is such a job: a table of `Step`s that `Steps.run` goes through. Each step prints its
command before it runs (so any step can be rerun alone), keeps it in RUN_DIR/commands.json (the report shows
them), and is skipped when its output exists and is newer than what it was made from.
"""

from collections.abc import Sequence
import dataclasses
import importlib
import importlib.util
import json
import pathlib
import shlex
import time


@dataclasses.dataclass(frozen=True)
class Step:
  """One row of a job: a console command (``searchless-<module>``, run in this process by the `main` of
  ``searchless.pipelines.<module>`` for a data pipeline, else ``searchless.commands.<module>``), its arguments, and
  the file that says it is done."""

  number: int  # Its place in the job (the steps of one kind share it: a model's and the pretrained one's).
  name: str  # Its name in --steps.
  module: str  # The module of searchless.pipelines or searchless.commands whose main(argv) runs it: 'mine_puzzles'.
  argv: tuple[str, ...]  # The script's arguments.
  done: pathlib.Path | None  # The output that says the step is complete (None: always run).
  after: tuple[pathlib.Path, ...] = ()  # What it was made from: newer ones make it run again.
  record_as: str | None = None  # Its name in commands.json and the timings, when not `name`.
  skipped: str | None = None  # Why it does not run at all (printed), if it does not.

  @property
  def command(self) -> list[str]:
    """The console command, as a user types it: ``searchless-mine-puzzles ...``."""
    return [f'searchless-{self.module.replace("_", "-")}', *self.argv]


class Steps:
  """The steps of a job in `run_dir`; only those named in `selected` run."""

  def __init__(self, run_dir: pathlib.Path, selected: Sequence[str], total: int):
    self.run_dir, self.selected, self.total = run_dir, tuple(selected), total
    self.timings: dict[str, float] = {}

  def record(self, step: str, command: list[str]) -> None:
    """Keeps the step's command in RUN_DIR/commands.json."""
    path = self.run_dir / 'commands.json'
    recorded = json.loads(path.read_text()) if path.exists() else {}
    recorded[step] = shlex.join(command)
    self.run_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(recorded, indent=2) + '\n')

  def is_done(self, step: Step) -> bool:
    """Whether the step's output exists and is newer than every input it was made `after`."""
    done = step.done
    return (
      done is not None
      and done.exists()
      and all(not d.exists() or d.stat().st_mtime <= done.stat().st_mtime for d in step.after)
    )

  def run(self, step: Step) -> None:
    """Runs `step` (its command's ``main(argv)``) unless it is not selected, skipped, or done."""
    if step.name not in self.selected:
      return
    if step.skipped:
      print(f'\n[{step.number}/{self.total}] {step.name}: skipped, {step.skipped}', flush=True)
      return
    print(f'\n[{step.number}/{self.total}] {step.name}: {shlex.join(step.command)}', flush=True)
    name = step.record_as or step.name
    self.record(name, step.command)
    if self.is_done(step):
      assert step.done is not None
      shown = step.done.relative_to(self.run_dir) if step.done.is_relative_to(self.run_dir) else step.done
      print(f'  done already ({shown} exists): skipped', flush=True)
      return
    start = time.perf_counter()
    package = 'pipelines' if importlib.util.find_spec(f'searchless.pipelines.{step.module}') else 'commands'
    importlib.import_module(f'searchless.{package}.{step.module}').main(list(step.argv))
    self.timings[name] = round(time.perf_counter() - start, 1)
    print(f'  {name} took {self.timings[name]:.0f} s', flush=True)
