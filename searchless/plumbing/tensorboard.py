"""A run's scalars as TensorBoard event files (tensorboardX), beside the JSON it also writes.

Training writes ``WORKDIR/tensorboard/`` (every ``metrics.jsonl`` line, at its
step); ``searchless-evaluate`` writes ``OUT/tensorboard/`` (the means of
``metrics.json``, at the checkpoint's step). Then::

    tensorboard --logdir WORKDIR

>>> import tempfile
>>> logdir = tempfile.mkdtemp()
>>> with ScalarWriter(logdir) as writer:
...   writer.write(10, {'step': 10, 'loss': 2.5, 'policy': 'action_value', 'complete': True})
>>> [name for name in sorted(os.listdir(logdir)) if name.startswith('events.out.tfevents.')] != []
True
"""

from collections.abc import Mapping
import math
import os
from typing import Any

import tensorboardX

DIR = 'tensorboard'  # The event files' folder, under a workdir or an evaluation's output.


class ScalarWriter:
  """Writes the numbers of records (dicts) as scalars named by their keys.

  `purge_step`: a resumed run's first step; TensorBoard then hides events a
  killed run wrote at or after it, as ``metrics.jsonl`` keeps one line per step.
  """

  def __init__(self, logdir: str | os.PathLike, *, purge_step: int | None = None):
    self._writer = tensorboardX.SummaryWriter(str(logdir), purge_step=purge_step, flush_secs=30)

  def write(self, step: int, record: Mapping[str, Any]) -> None:
    """Adds every finite int or float of `record` (not `step`, not booleans) at `step`."""
    for name, value in record.items():
      if name != 'step' and isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        self._writer.add_scalar(name, value, step)

  def close(self) -> None:
    self._writer.close()

  def __enter__(self) -> 'ScalarWriter':
    return self

  def __exit__(self, *exc) -> None:
    self.close()
