"""Stopping a training run early: SIGTERM or Ctrl-C, and `train.max_seconds`, at a step every process agrees on.

The loop checks once per step, at most one step behind the device (`train.train` waits for the step before
the last it dispatched), so a signal stops the run at the step it reached, within a step's time: the step is
saved and the run ends.
"""

import signal

import jax
from jax.experimental import multihost_utils
import numpy as np


class Stop:
  """SIGTERM / SIGINT set a flag; the loop checkpoints and exits cleanly (`interrupted`: whether by SIGINT)."""

  def __init__(self):
    self.requested = False
    self.interrupted = False
    self._previous = {}

  def __enter__(self):
    for sig in (signal.SIGTERM, signal.SIGINT):
      try:
        self._previous[sig] = signal.signal(sig, self._handle)
      except ValueError:  # Not the main thread.
        pass
    return self

  def _handle(self, signum, frame):
    self.requested = True
    self.interrupted = self.interrupted or signum == signal.SIGINT

  def __exit__(self, *exc):
    for sig, handler in self._previous.items():
      signal.signal(sig, handler)


def agreed(out_of_time: bool, signalled: bool) -> tuple[bool, bool]:
  """(out of time, signalled) as every process will act on them: true where any process's is.

  Each process reads its own clock and gets its own signals, but all must stop at the same step, or one
  waits forever in a collective or a checkpoint save the others left: one host all-gather per step
  decides (on more than one process only), so every process saves the same step.
  """
  if jax.process_count() == 1:
    return out_of_time, signalled
  flags = np.asarray(multihost_utils.process_allgather(np.array([out_of_time, signalled], np.int32)))  # [P, 2]
  agreed = flags.reshape(-1, 2).max(axis=0)  # [2]
  return bool(agreed[0]), bool(agreed[1])
