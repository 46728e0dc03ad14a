"""Which input shapes of a jitted model call are compiled, and a worker that compiles more in the background.

A predictor calls its model on a few fixed shapes (batch buckets). Compiling
them all before the first move costs seconds per shape on a CPU; an engine that
must answer soon compiles one now (`compile`), queues the rest
(`compile_later`) and meanwhile runs its calls on the shapes already `ready`
(padding a little more). One shape is traced and compiled at a time (`guard`:
tracing the same model from two threads at once can mix the two traces up).
The worker runs on a daemon thread; `close` stops it
after the shape it is compiling, and so does the end of the process (a compile
cut off by the interpreter's exit would abort it). A search on a clock holds
every worker of the process (`held`): none starts a shape until the search is
over and `QUIET_SECONDS` have passed (a compile shares the cores and the
interpreter's lock, and would slow the model calls the search has timed).

>>> done = []
>>> shapes = Shapes(done.append)
>>> shapes.compile([(1, 48)])
>>> shapes.compile_later([(1, 32), (1, 48), (4, 48)])
>>> shapes.wait(), sorted(shapes.ready), done
(True, [(1, 32), (1, 48), (4, 48)], [(1, 48), (1, 32), (4, 48)])
>>> shapes.close()
"""

from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
import atexit
import collections
import contextlib
import logging
import threading
import time
import weakref

Shape = tuple[int, ...]

_LOG = logging.getLogger(__name__)

_OPEN: 'weakref.WeakSet[Shapes]' = weakref.WeakSet()  # Every Shapes, closed at exit.

QUIET_SECONDS = 0.05  # After a search, the workers wait this long (the next command may be another search).
_HOLD = threading.Condition()
_holds = 0  # Searches in flight (`held`).
_released = 0.0  # When the last one ended (time.monotonic()).


@contextlib.contextmanager
def held() -> Iterator[None]:
  """Within it (a search in flight), no worker of this process starts compiling a shape; one already started
  finishes. The workers go on `QUIET_SECONDS` after the last hold ends."""
  global _holds, _released
  with _HOLD:
    _holds += 1
  try:
    yield
  finally:
    with _HOLD:
      _holds -= 1
      _released = time.monotonic()
      _HOLD.notify_all()


def _wait_unheld(stop: threading.Event) -> None:
  """Returns once no search holds the workers and none has for `QUIET_SECONDS` (or when `stop` is set)."""
  with _HOLD:
    while not stop.is_set():
      if _holds:
        _HOLD.wait(0.1)
        continue
      quiet = _released + QUIET_SECONDS - time.monotonic()
      if quiet <= 0:
        return
      _HOLD.wait(quiet)


@atexit.register
def _close_all() -> None:
  for shapes in list(_OPEN):
    shapes.close()


class Shapes:
  """The compiled shapes of one jitted call; `run(shape)` compiles one (a blocking call on zeros of that shape)."""

  def __init__(self, run: Callable[[Shape], object]):
    self._run = run
    self._ready: set[Shape] = set()  # Compiled: a call of this shape runs without compiling.
    self._queue: collections.deque[Shape] = collections.deque()
    self._lock = threading.Lock()
    self._compiling = threading.Lock()  # Held while a shape is traced and compiled (`guard`).
    self._stop = threading.Event()
    self._thread: threading.Thread | None = None
    _OPEN.add(self)

  @property
  def ready(self) -> frozenset[Shape]:
    """The shapes compiled so far (a snapshot: the worker may add more meanwhile)."""
    return frozenset(self._ready)

  def mark(self, shape: Shape) -> None:
    """Records that a call of `shape` has run (so it is compiled)."""
    self._ready.add(shape)

  def guard(self, shape: Shape) -> contextlib.AbstractContextManager:
    """Hold it around a call of `shape`: a shape not compiled yet is traced and compiled under the lock the
    worker compiles under (a compiled one needs no lock)."""
    return contextlib.nullcontext() if shape in self._ready else self._compiling

  def compile(self, shapes: Iterable[Shape]) -> None:
    """Compiles each of `shapes` not compiled yet, now."""
    for shape in shapes:
      if shape not in self._ready:
        with self._compiling:
          self._run(shape)
        self._ready.add(shape)

  def compile_later(self, shapes: Iterable[Shape]) -> None:
    """Queues each of `shapes` not compiled yet for the background worker (in order), starting it if idle."""
    with self._lock:
      if self._stop.is_set():
        return
      self._queue.extend(s for s in shapes if s not in self._ready and s not in self._queue)
      if self._queue and self._thread is None:
        self._thread = threading.Thread(target=self._work, name='compile-shapes', daemon=True)
        self._thread.start()

  def _work(self) -> None:
    while not self._stop.is_set():
      _wait_unheld(self._stop)
      with self._lock:
        if not self._queue:
          self._thread = None
          return
        shape = self._queue.popleft()
      if shape in self._ready:
        continue
      try:
        with self._compiling:
          self._run(shape)
      except Exception:  # pylint: disable=broad-except  # A call of this shape compiles (and fails) in the foreground.
        _LOG.exception('compiling shape %s in the background failed', shape)
        continue
      self._ready.add(shape)
    with self._lock:
      self._thread = None

  def wait(self, timeout: float | None = None) -> bool:
    """Waits for the worker to finish the queue; True when nothing is left to compile."""
    thread = self._thread
    if thread is not None:
      thread.join(timeout)
    return self._thread is None and not self._queue

  def close(self, timeout: float | None = None) -> None:
    """Stops the worker after the shape it is compiling (waits for it at most `timeout` seconds)."""
    self._stop.set()
    with self._lock:
      self._queue.clear()
    thread = self._thread
    if thread is not None:
      thread.join(timeout)
