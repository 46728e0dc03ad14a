"""The UCI engine's process: its CPUs, and its protocol stdout.

XLA sizes its CPU thread pools from the CPUs the process may use when its
backend starts, so `limit_cpu_threads` narrows the process' CPU affinity for
the first load (the ``Threads`` option); `uci_stdout` keeps the protocol's
stdout clean of whatever else prints. (Where compiled batch shapes are kept
between starts: `searchless.play.compilation_cache`.)

>>> available_cpus() >= 1
True
"""

from collections.abc import Callable
import os
import sys
from typing import TextIO

from searchless.plumbing import cores


def available_cpus() -> int:
  """The CPUs this process may run on."""
  return len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count() or 1


def limit_cpu_threads(threads: int) -> Callable[[], None] | None:
  """Restricts this process to `threads` CPUs until the returned restore function is called.

  Meant to be held while JAX's backend starts and compiles (XLA sizes its CPU
  thread pools from the CPUs it may use). None where infeasible: no
  `os.sched_setaffinity`, or JAX's backend already started.
  """
  if not hasattr(os, 'sched_setaffinity'):
    return None
  try:
    from jax._src import xla_bridge  # pylint: disable=import-outside-toplevel

    if xla_bridge.backends_are_initialized():
      return None
  except (ImportError, AttributeError):
    return None
  allowed = os.sched_getaffinity(0)
  if threads >= len(allowed):
    return lambda: None
  cores.pin(set(sorted(allowed)[:threads]))
  return lambda: cores.pin(allowed)


def uci_stdout() -> TextIO:
  """A line-buffered writer on the real stdout; fd 1 itself then points at stderr.

  So whatever else writes to stdout (JAX, absl, a C library, print) cannot
  corrupt the protocol.
  """
  try:
    sys.stdout.flush()
    fd = os.dup(sys.stdout.fileno())
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
  except (AttributeError, OSError, ValueError):  # No real file descriptors (embedded, captured).
    return sys.stdout
  sys.stdout = sys.stderr
  return os.fdopen(fd, 'w', buffering=1, encoding='utf-8', newline='\n')
