"""Which input shapes of a jitted model call are compiled, and a worker that compiles more in the background.

A predictor calls its model on a few fixed shapes (batch buckets). Compiling
them all before the first move costs seconds per shape on a CPU; an engine that
must answer soon compiles one now (`compile`), queues the rest
(`compile_later`) and meanwhile runs its calls on the shapes already `ready`
(padding a little more). One trace or compile runs at a time in the whole
process (`tracing`: JAX traces of two threads at once can mix, and compiles
side by side only share the cores): a predictor's call of a shape not compiled
yet (`guard`), `compile` and the workers of every predictor take turns, and a
thread waiting to trace goes before any worker's next shape. The worker runs on
a daemon thread; `close` stops it after the shape it is compiling, and so does
the end of the process (a compile cut off by the interpreter's exit would abort
it). A search on a clock holds every worker of the process (`held`): none
starts a shape until the search is over and `QUIET_SECONDS` have passed (a
compile shares the cores and the interpreter's lock, and would slow the model
calls the search has timed); a worker checks the holds and claims its turn
under one lock, so a shape is started either before a search begins or after
it ends. Within `compiled_only` (a timed search's model calls, after its root), a call of a shape not compiled
compiles it now when the time left before the search's `deadline` exceeds what a compile of that model costs
(`Shapes.compile_cost`: the slowest compile of it measured in this process, `DEFAULT_COMPILE_SECONDS` before any),
and the search goes on; otherwise it raises `NotCompiled` instead, and the shape goes first in the worker's queue:
the search ends with what it has, in its time, where the compile would have taken longer than it has left.

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
DEFAULT_COMPILE_SECONDS = 3.0  # A shape's compile cost before one is measured (a cold compile on a CPU: 2-4 s).
_STATE = threading.Condition()  # Guards the four below; notified whenever one changes.
_holds = 0  # Searches in flight (`held`).
_released = 0.0  # When the last one ended (time.monotonic()).
_tracer: int | None = None  # The thread that traces or compiles now (`tracing`, or a worker's claim), if any.
_depth = 0  # How many `tracing` blocks that thread is in.
_wanted = 0  # Threads waiting in `tracing`: a worker claims no shape while one waits.
_local = threading.local()  # `compiled_only`'s deadlines in this thread (`deadlines`: innermost last).


class NotCompiled(Exception):
  """A call of a shape not compiled yet, within `compiled_only`."""


@contextlib.contextmanager
def compiled_only(deadline: float | None = None) -> Iterator[None]:
  """Within it, this thread's model calls run on compiled shapes only, but for one whose compile (its
  `Shapes.compile_cost`) ends before `deadline` (a `time.monotonic()`; None: never): that one compiles now. Any
  other that would compile raises `NotCompiled` (its shape is queued first for the worker)."""
  deadlines = _local.__dict__.setdefault('deadlines', [])
  deadlines.append(deadline)
  try:
    yield
  finally:
    deadlines.pop()


@contextlib.contextmanager
def held() -> Iterator[None]:
  """Within it (a search in flight), no worker of this process starts compiling a shape; one already started
  finishes. The workers go on `QUIET_SECONDS` after the last hold ends."""
  global _holds, _released
  with _STATE:
    _holds += 1
  try:
    yield
  finally:
    with _STATE:
      _holds -= 1
      _released = time.monotonic()
      _STATE.notify_all()


@contextlib.contextmanager
def tracing() -> Iterator[None]:
  """Within it, this thread is the only one of the process that traces or compiles (any jitted model call):
  JAX traces of two threads at once can mix. It waits for a worker's shape to finish, never for a worker's
  next shape (a thread waiting here goes first); re-entrant."""
  global _tracer, _depth, _wanted
  me = threading.get_ident()
  with _STATE:
    if _tracer != me:
      _wanted += 1
      try:
        while _tracer is not None:
          _STATE.wait()
      finally:
        _wanted -= 1
      _tracer = me
    _depth += 1
  try:
    yield
  finally:
    with _STATE:
      _depth -= 1
      if not _depth:
        _tracer = None
        _STATE.notify_all()


def _claim(stop: threading.Event) -> bool:
  """A worker's turn to compile, taken when no search holds the workers and none has for `QUIET_SECONDS`, and
  no thread traces or waits to (checked and taken under one lock: a search that starts later finds the compile
  claimed, one that started before is seen); False when `stop` is set first. `_unclaim` gives it back."""
  global _tracer, _depth
  with _STATE:
    while not stop.is_set():
      if _holds or _tracer is not None or _wanted:
        _STATE.wait(0.1)
        continue
      quiet = _released + QUIET_SECONDS - time.monotonic()
      if quiet > 0:
        _STATE.wait(quiet)
        continue
      _tracer, _depth = threading.get_ident(), 1
      return True
  return False


def _unclaim() -> None:
  global _tracer, _depth
  with _STATE:
    _tracer, _depth = None, 0
    _STATE.notify_all()


@atexit.register
def _close_all() -> None:
  for shapes in list(_OPEN):
    shapes.close()


class Shapes:
  """The compiled shapes of one jitted call; `run(shape)` compiles one (a blocking call on zeros of that shape);
  `ready`: the set of compiled shapes, when other `Shapes` of the same jitted call share it."""

  def __init__(self, run: Callable[[Shape], object], ready: set[Shape] | None = None):
    self._run = run
    self._ready: set[Shape] = set() if ready is None else ready  # Compiled: a call of this shape runs at once.
    self._seconds: dict[Shape, float] = {}  # How long each compile of this process took (`compile_cost`).
    self._queue: collections.deque[Shape] = collections.deque()
    self._lock = threading.Lock()
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

  @property
  def seconds(self) -> dict[Shape, float]:
    """How long each shape compiled in this process by these `Shapes` took (a snapshot)."""
    return dict(self._seconds)

  def compile_cost(self) -> float:
    """What compiling one more shape is expected to cost, in seconds: the slowest compile measured here
    (`seconds`; one found in JAX's persistent cache takes a fraction of a cold one), else
    `DEFAULT_COMPILE_SECONDS`."""
    return max(self.seconds.values(), default=DEFAULT_COMPILE_SECONDS)  # A copy: the worker may add one.

  def guard(self, shape: Shape) -> contextlib.AbstractContextManager:
    """Hold it around a call of `shape`: a shape not compiled yet is traced and compiled in `tracing` (a compiled
    one needs nothing), and its time measured; within `compiled_only`, unless the compile ends before its
    deadline (`compile_cost`), it raises `NotCompiled` and queues the shape first."""
    if shape in self._ready:
      return contextlib.nullcontext()
    deadlines = getattr(_local, 'deadlines', None)
    if deadlines:
      deadline = deadlines[-1]
      if deadline is None or time.monotonic() + self.compile_cost() >= deadline:
        self.compile_later([shape], first=True)
        raise NotCompiled(shape)
    return self._compiling(shape)

  @contextlib.contextmanager
  def _compiling(self, shape: Shape) -> Iterator[None]:
    """Within it, this thread compiles `shape` in its turn (`tracing`); the time it took, once its turn came, is
    recorded (`seconds`)."""
    with tracing(), self._timing(shape):
      yield

  @contextlib.contextmanager
  def _timing(self, shape: Shape) -> Iterator[None]:
    """Records in `seconds` how long the compile of `shape` within it took."""
    begin = time.monotonic()
    yield
    self._seconds[shape] = time.monotonic() - begin

  def compile(self, shapes: Iterable[Shape]) -> None:
    """Compiles each of `shapes` not compiled yet, now."""
    for shape in shapes:
      if shape not in self._ready:
        with self._compiling(shape):
          self._run(shape)
        self._ready.add(shape)

  def compile_later(self, shapes: Iterable[Shape], *, first: bool = False) -> None:
    """Queues each of `shapes` not compiled yet for the background worker (in order; `first`: before those
    queued), starting it if idle."""
    with self._lock:
      if self._stop.is_set():
        return
      new = [s for s in shapes if s not in self._ready and (first or s not in self._queue)]
      if first:
        self._queue = collections.deque([*new, *(s for s in self._queue if s not in new)])
      else:
        self._queue.extend(new)
      if self._queue and self._thread is None:
        self._thread = threading.Thread(target=self._work, name='compile-shapes', daemon=True)
        self._thread.start()

  def _work(self) -> None:
    while _claim(self._stop):
      try:
        with self._lock:
          if not self._queue or self._stop.is_set():
            self._thread = None
            return
          shape = self._queue.popleft()
        if shape not in self._ready:
          with self._timing(shape):  # Its turn is claimed already (`_claim`).
            self._run(shape)
          self._ready.add(shape)
      except Exception:  # pylint: disable=broad-except  # A call of this shape compiles (and fails) in the foreground.
        _LOG.exception('compiling shape %s in the background failed', shape)
      finally:
        _unclaim()
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
    with _STATE:
      _STATE.notify_all()  # A worker waiting for its turn sees the stop now.
    thread = self._thread
    if thread is not None:
      thread.join(timeout)
