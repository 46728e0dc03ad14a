"""The campaign's labels step: each chunk of games labelled by ``searchless-annotate`` with the shipped recipe.

The recipe (`ANNOTATE_RECIPE`): one MultiPV search of 20k nodes per board scores every legal move, the most
labels and the best move ranking per engine core-hour (benchmarks/RESULTS.md, "The label-cost frontier").

A label job runs in its own process group, and its wall-clock and CPU (annotate, its workers and their engines)
go into WORKDIR/runs.jsonl. A SIGTERM or Ctrl-C to the campaign stops the whole group, so no job outlives it.
"""

from collections.abc import Iterator, Sequence
import dataclasses
import os
import pathlib
import signal
import subprocess
import sys
import time

from campaign import log as campaign_log
from searchless.core import artefacts


@dataclasses.dataclass(frozen=True)
class AnnotateRecipe:
  """searchless-annotate's flags of the labels, in flag order."""

  mode: str
  limit: str
  state_value: str
  records: str
  test_fraction: float

  def flags(self) -> list[str]:
    """The recipe as searchless-annotate arguments.

    >>> AnnotateRecipe('multipv', 'nodes=1', 'best_move', 'board', 0.5).flags()[:4]
    ['--mode', 'multipv', '--limit', 'nodes=1']
    """
    return [arg for key, value in dataclasses.asdict(self).items() for arg in (f'--{key}', str(value))]


ANNOTATE_RECIPE = AnnotateRecipe(
  mode='multipv', limit='nodes=20000', state_value='best_move', records='board', test_fraction=0.05
)


class _Stopped(Exception):
  """A SIGTERM or SIGINT came while a label job ran."""


def _run_group(argv: list[str], log_path: pathlib.Path) -> tuple[int, str | None]:
  """Runs a label job in its own process group, its output in `log_path`: (exit code, the signal that stopped us).

  A SIGTERM or SIGINT to the campaign stops the whole group (annotate, its workers, their engines) before the
  campaign exits, so no orphan goes on labelling (its cost unlogged) beside whatever runs next.
  """

  def stop(signum, frame):
    raise _Stopped(signal.Signals(signum).name)

  with open(log_path, 'w') as log:
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
  previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
  stopped_by = None
  try:
    proc.wait()
  except _Stopped as e:
    stopped_by = str(e)
  finally:
    for sig, handler in previous.items():
      signal.signal(sig, handler)
    if proc.poll() is None:
      os.killpg(proc.pid, signal.SIGTERM)
      try:
        proc.wait(timeout=30)
      except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
  return proc.returncode, stopped_by


def label_chunks(
  chunks: Sequence[pathlib.Path],
  labels_dir: pathlib.Path,
  workdir: pathlib.Path,
  *,
  workers: int = 2,
  max_chunks: int | None = None,
) -> Iterator[pathlib.Path]:
  """Labels each chunk without a finished label folder (searchless-annotate, the shipped recipe); yields each."""
  labels_dir.mkdir(parents=True, exist_ok=True)
  todo = [c for c in chunks if not (labels_dir / c.stem / artefacts.AnnotationManifest.FILE).exists()]
  for n, chunk in enumerate(todo[:max_chunks]):
    out = labels_dir / chunk.stem
    argv = [
      sys.executable,
      '-m',
      'searchless.pipelines.annotate',
      '--input',
      str(chunk),
      '--out',
      str(out),
      *ANNOTATE_RECIPE.flags(),
      '--compress',
      f'--direct_num_workers={workers}',
      '--no_progress',
      '--overwrite',
    ]
    print(f'[labels {n + 1}/{len(todo)}] {chunk.stem}', flush=True)
    start, cpu = time.time(), campaign_log.children_cpu_seconds()
    log_path = workdir / 'logs' / f'labels_{chunk.stem}.log'
    code, stopped_by = _run_group(argv, log_path)
    finished = (out / artefacts.AnnotationManifest.FILE).exists()
    if stopped_by and not finished:
      raise SystemExit(f'stopped by {stopped_by}: {out} is unfinished and is labelled again by the next run')
    if code and not stopped_by:
      raise ChildProcessError(f'labelling {chunk} failed (exit {code}): its output is in {log_path}')
    manifest = artefacts.AnnotationManifest.read(out / artefacts.AnnotationManifest.FILE)
    wall, cpu = time.time() - start, campaign_log.children_cpu_seconds() - cpu
    train = manifest.splits['train']
    record = {
      'step': 'labels',
      'chunk': chunk.stem,
      'games': manifest.games['kept'],
      'train_boards': train['boards'],
      'test_boards': manifest.splits['test']['boards'],
      'action_values': train['action_values'],
      'wall_seconds': round(wall, 1),
      'core_hours': round(cpu / 3600, 6),
      'workers': workers,
    }
    campaign_log.log_run(workdir, record)
    print(
      f'[labels {n + 1}/{len(todo)}] {chunk.stem}: {train["boards"]} train boards in {wall:.0f} s, '
      f'{cpu / 3600:.3f} core-hours',
      flush=True,
    )
    if stopped_by:  # The signal came as the job finished: its labels are kept and logged.
      raise SystemExit(f'stopped by {stopped_by} after {chunk.stem} was labelled')
    yield out
