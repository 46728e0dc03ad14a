"""Progress bars that suit where they are written: redrawn on a terminal, periodic lines in a log.

`bar(...)` takes tqdm's arguments. On a terminal it is tqdm as usual. Written to
a file or a pipe (a job's log), tqdm would add a ``\\r``-separated redraw ten
times a second; there it writes one whole line every `LOG_INTERVAL` seconds (and
the last state at the end) instead.

>>> import io
>>> log = io.StringIO()
>>> with bar(range(3), desc='demo', file=log) as items:
...   total = sum(items)
>>> log.getvalue().count('\\r'), log.getvalue().splitlines()[-1].startswith('demo: 100%|')
(0, True)
"""

from collections.abc import Iterable
import io
import sys
from typing import Any, TextIO

import tqdm

LOG_INTERVAL = 30.0  # Seconds between progress lines in a log (not a terminal).


class _Lines(io.TextIOBase):
  """A text stream that writes each of tqdm's redraws as one plain line."""

  def __init__(self, stream: TextIO):
    super().__init__()
    self._stream = stream

  def write(self, text: str) -> int:
    line = text.replace('\r', '').replace('\x1b[A', '').rstrip()
    if line.strip():
      self._stream.write(line + '\n')
    return len(text)

  def flush(self) -> None:
    self._stream.flush()


def bar(iterable: Iterable | None = None, *, file: TextIO | None = None, **kwargs: Any) -> tqdm.tqdm:
  """`tqdm.tqdm(iterable, file=file, **kwargs)`, as lines every `LOG_INTERVAL` s when `file` is no terminal."""
  file = sys.stderr if file is None else file
  isatty = getattr(file, 'isatty', None)
  if isatty is not None and isatty():
    return tqdm.tqdm(iterable, file=file, **kwargs)
  kwargs.pop('dynamic_ncols', None)
  kwargs['mininterval'] = max(kwargs.get('mininterval', 0.0), LOG_INTERVAL)
  return tqdm.tqdm(iterable, file=_Lines(file), ncols=100, ascii=True, **kwargs)
