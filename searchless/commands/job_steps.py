"""A job of numbered steps, each one of the project's commands: announced, recorded, skipped when done, timed.

The demo (`make run`) is such a job: each step prints its command before it runs (so any step can be
rerun alone), keeps it in RUN_DIR/commands.json (the report shows them), and is skipped when its
output exists and is newer than what it was made from.
"""

from collections.abc import Callable, Sequence
import json
import pathlib
import shlex
import time


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

  def run(
    self,
    number: int,
    name: str,
    command: list[str],
    done: pathlib.Path | None,
    call: Callable[[list[str]], object],
    after: tuple[pathlib.Path, ...] = (),
    record_as: str | None = None,
  ) -> None:
    """Runs step `number` (`call` with the command's arguments) unless `done` exists and is newer than the outputs
    it was made `after`."""
    if name not in self.selected:
      return
    print(f'\n[{number}/{self.total}] {name}: {shlex.join(command)}', flush=True)
    name = record_as or name
    self.record(name, command)
    if (
      done is not None
      and done.exists()
      and all(not d.exists() or d.stat().st_mtime <= done.stat().st_mtime for d in after)
    ):
      shown = done.relative_to(self.run_dir) if done.is_relative_to(self.run_dir) else done
      print(f'  done already ({shown} exists): skipped', flush=True)
      return
    start = time.perf_counter()
    call(command[1:])
    self.timings[name] = round(time.perf_counter() - start, 1)
    print(f'  {name} took {self.timings[name]:.0f} s', flush=True)
