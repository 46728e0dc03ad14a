"""The progress of a local (DirectRunner) job, annotation or review, on the one progress bar (`plumbing.progress_bars`).

Workers write running totals to small JSON files (`WorkerProgress`), the job writes the number of boards to
``total.json`` (`write_total`); `ProgressThread` sums them every second and moves the bar: boards done of the
total, with boards/s, the ETA and (an annotation's) action-values/s and failures. `shown` shows it while a job runs.
"""

from collections.abc import Iterator
import contextlib
import glob
import json
import os
import shutil
import sys
import threading
from typing import Any, TextIO
import time

from searchless.plumbing import atomic
from searchless.plumbing import progress_bars


def summarize(directory: str) -> dict:
  """Sums the workers' files; ``total.json`` (written once the boards are counted) gives the total."""
  totals: dict[str, Any] = {'boards': 0, 'action_values': 0, 'failures': 0, 'total': None, 'workers': 0}
  for path in glob.glob(os.path.join(directory, '*.json')):
    try:
      with open(path) as f:
        data = json.load(f)
    except (OSError, ValueError):
      continue  # Being replaced right now.
    if os.path.basename(path) == 'total.json':
      totals['total'] = data['total']
      continue
    totals['workers'] += 1
    for key in ('boards', 'action_values', 'failures'):
      totals[key] += data.get(key, 0)
  return totals


class ProgressThread(threading.Thread):
  """Moves the job's bar every `interval` seconds until stopped; nothing shows before a worker starts. `desc` and
  `unit` name the job and what it counts; `detail`: the action-values/s and failures after the bar (annotation)."""

  def __init__(
    self,
    directory: str,
    interval: float = 1.0,
    stream: TextIO | None = None,
    *,
    desc: str = 'annotate',
    unit: str = 'board',
    detail: bool = True,
  ):
    super().__init__(daemon=True)
    self._desc, self._unit, self._detail = desc, unit, detail
    # sys.stderr when the bar starts (a command may point it away from fd 2: `errors.child_stderr_to`).
    self._directory, self._interval, self._stream = directory, interval, stream or sys.stderr
    self._halt = threading.Event()
    self._bar: Any = None
    self._start = 0.0

  def _draw(self, refresh: bool = True) -> None:
    totals = summarize(self._directory)
    if self._bar is None:
      if not totals['workers']:
        return  # Annotation has not started yet.
      self._bar = progress_bars.bar(desc=self._desc, unit=self._unit, file=self._stream, dynamic_ncols=True)
      self._start = time.monotonic()
    elapsed = max(time.monotonic() - self._start, 1e-9)
    self._bar.total = totals['total']
    self._bar.n = totals['boards'] + totals['failures']
    if self._detail:
      self._bar.set_postfix_str(
        f'{totals["action_values"] / elapsed:.1f} action-values/s, failures {totals["failures"]}', refresh=False
      )
    if refresh:
      self._bar.refresh()

  def run(self) -> None:
    while not self._halt.wait(self._interval):
      self._draw()

  def stop(self) -> None:
    self._halt.set()
    self.join()
    self._draw(refresh=False)
    if self._bar is not None:
      self._bar.close()  # Shows the last state.


@contextlib.contextmanager
def shown(directory: str | None, **bar: Any) -> Iterator[None]:
  """A progress line (`ProgressThread`, with `bar`'s options) while the block runs, if `directory`; the folder
  goes after."""
  if directory is None:
    yield
    return
  thread = ProgressThread(directory, **bar)
  thread.start()
  try:
    yield
  finally:
    thread.stop()
    shutil.rmtree(directory, ignore_errors=True)


class WorkerProgress:
  """Writes this worker's running totals to a file the local driver polls."""

  def __init__(self, directory: str | None):
    self._path = os.path.join(directory, f'{os.getpid()}-{id(self)}.json') if directory else None
    self.boards = self.action_values = self.failures = 0
    self._last = 0.0

  def update(self, boards: int = 0, action_values: int = 0, failures: int = 0, force: bool = False) -> None:
    self.boards += boards
    self.action_values += action_values
    self.failures += failures
    now = time.monotonic()
    if self._path and (force or now - self._last > 0.5):
      self._last = now
      # A live-progress snapshot (every 0.5 s, in a temporary folder): atomic for the reader, never synced.
      atomic.write_text(
        self._path,
        json.dumps({'boards': self.boards, 'action_values': self.action_values, 'failures': self.failures}),
        durable=False,
      )


def write_total(total: int, directory: str) -> None:
  """Tells the local progress display how many boards the job has."""
  atomic.write_text(os.path.join(directory, 'total.json'), json.dumps({'total': total}), durable=False)
