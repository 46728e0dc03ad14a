"""A one-line progress display for local (DirectRunner) annotation jobs.

Workers write running totals to small JSON files (`WorkerProgress`), the
job writes the number of boards to ``total.json`` (`write_total`); `ProgressThread` sums them and
redraws one line: boards done / total, boards/s, action-values/s and the ETA.
"""

import glob
import json
import os
import sys
import threading
from typing import Any, TextIO
import time

from searchless.core import atomic


def _duration(seconds: float) -> str:
  seconds = int(seconds)
  return f'{seconds // 3600}h{seconds // 60 % 60:02d}m' if seconds >= 3600 else f'{seconds // 60}m{seconds % 60:02d}s'


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


def line(totals: dict, elapsed: float) -> str:
  done, total = totals['boards'] + totals['failures'], totals['total']
  rate = totals['boards'] / elapsed if elapsed > 0 else 0.0
  av_rate = totals['action_values'] / elapsed if elapsed > 0 else 0.0
  text = f'annotate: {done}' + (f'/{total} boards ({100 * done / max(total, 1):.0f}%)' if total else ' boards')
  text += f' | {rate:.2f} boards/s | {av_rate:.1f} action-values/s | failures {totals["failures"]}'
  if total and rate > 0:
    text += f' | ETA {_duration((total - done) / rate)}'
  return text + f' | {_duration(elapsed)} elapsed'


class ProgressThread(threading.Thread):
  """Redraws the progress line every `interval` seconds until stopped."""

  def __init__(self, directory: str, interval: float = 1.0, stream: TextIO | None = None):
    super().__init__(daemon=True)
    # sys.stderr when the line starts (a command may point it away from fd 2: `errors.child_stderr_to`).
    self._directory, self._interval, self._stream = directory, interval, stream or sys.stderr
    self._halt = threading.Event()
    self._start_time = None
    self.last = ''

  def _draw(self, final=False):
    totals = summarize(self._directory)
    if self._start_time is None:
      if not totals['workers'] and not final:
        return  # Annotation has not started yet.
      self._start_time = time.monotonic()
    self.last = line(totals, time.monotonic() - self._start_time)
    end = '\n' if final else ''
    if self._stream.isatty():
      self._stream.write('\r\x1b[K' + self.last + end)
    elif final or int(time.monotonic()) % 10 == 0:
      self._stream.write(self.last + '\n')
    self._stream.flush()

  def run(self) -> None:
    while not self._halt.wait(self._interval):
      self._draw()

  def stop(self) -> None:
    self._halt.set()
    self.join()
    self._draw(final=True)


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
