"""The dynamic batcher: positions of concurrent requests go into one model call, as Triton's or lc0's batchers do.

A request puts its positions in a bounded queue (`Batcher.submit`; past `max_queue` it is
refused whole, `QueueFull`, and the server answers 503; one that could never fit, `TooLarge`, 413).
A request cancelled (its client left) takes its positions still queued out of the queue. One worker
task takes what is queued, up to `max_batch` positions, and runs the model on them in one call on a
thread of its own (the event loop stays free to read requests meanwhile); each position's future
gets its answer, or its own fault (an `Exception` that `run` answers in its place: the others are
answered). A worker that dies (a fault outside `run`) fails its batch's requests and is replaced.
With `max_wait_ms` 0 (the default) nothing waits: an idle server runs a lone position at once, and
under load the positions that arrived during one call form the next (lc0's multiplexing). A
positive `max_wait_ms` holds a batch that is not full that long for more. A request of at most
`inline_max` items runs on the event loop itself, straight from `submit` (no queue, no worker), when
the worker is idle, nothing is queued and `alone()` says no other request is in flight once the
requests read with it have started (the server's lone client); a batch of so few that the worker
forms runs there too: the hop to the thread and back costs such a position a third of what it adds
to the model's time. With other requests in flight, the loop stays free to read them while the model
runs, so that they form the next batch.
Padding to the compiled shapes is the predictor's (`searchless.play.predictor`).

>>> import asyncio, concurrent.futures
>>> calls = []
>>> def run(items):
...   calls.append(len(items))
...   return [2 * x for x in items]
>>> async def main():
...   batcher = Batcher(run, concurrent.futures.ThreadPoolExecutor(1), max_batch=8, max_queue=16)
...   batcher.start()
...   answers = await asyncio.gather(batcher.submit([1, 2]), batcher.submit([3]))
...   await batcher.stop()
...   return answers
>>> asyncio.run(main()), calls
([[2, 4], [6]], [3])
"""

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
import concurrent.futures
import dataclasses
import logging
from typing import Any, Generic, TypeVar

Item = TypeVar('Item')
Result = TypeVar('Result')
_LOG = logging.getLogger(__name__)


class QueueFull(Exception):
  """The queue has no room for a request's positions now."""


class TooLarge(Exception):
  """A request of more positions than the queue can ever hold."""


class Stopped(Exception):
  """The server stopped before the position was run."""


class WorkerDied(Exception):
  """The batch worker died (a fault of the server) while the position was in its batch."""


@dataclasses.dataclass
class _Entry:
  item: Any
  future: asyncio.Future
  queued: float  # The event loop's clock when it was queued.


class Batcher(Generic[Item, Result]):
  """Runs `run(items) -> results` (one result per item, in order; an `Exception` in place of a result is that
  item's fault) on `executor` for batches of queued items, or on the event loop for a batch of at most
  `inline_max` items (0: never) when no other item is queued and `alone()`.

  `observe(batch_size, waits, seconds)`, if given, is told of every call: its size, each item's
  wait in the queue and the call's duration (the server's metrics).
  """

  def __init__(
    self,
    run: Callable[[list[Item]], Sequence[Result | Exception]],
    executor: concurrent.futures.Executor,
    *,
    max_batch: int,
    max_queue: int,
    max_wait_ms: float = 0.0,
    inline_max: int = 0,
    alone: Callable[[], bool] = lambda: True,
    observe: Callable[[int, list[float], float], None] | None = None,
  ):
    if max_batch < 1 or max_queue < 1 or max_wait_ms < 0:
      raise ValueError(f'bad batcher limits: max_batch {max_batch}, max_queue {max_queue}, max_wait_ms {max_wait_ms}')
    self._run = run
    self._executor = executor
    self.max_batch = max_batch
    self.max_queue = max_queue
    self._max_wait = max_wait_ms / 1000
    self._inline_max = inline_max
    self._alone = alone
    self._observe = observe
    self._queue: deque[_Entry] = deque()
    self._arrived = asyncio.Event()
    self._task: asyncio.Task | None = None
    self._batch_in_flight: list[_Entry] = []  # Taken from the queue by the worker, not answered yet.
    self._idle = False  # The worker waits for the queue's next item (no batch formed or running).
    self._stopping = False

  def queued(self) -> int:
    """Items waiting for a model call."""
    return len(self._queue)

  def start(self) -> None:
    """Starts the worker task (in the running event loop)."""
    self._task = asyncio.get_running_loop().create_task(self._work(), name='batcher')
    self._task.add_done_callback(self._ended)

  def _ended(self, task: asyncio.Task) -> None:
    """The worker's end: at `stop`, nothing; else a fault of the server: its batch fails, a new worker starts."""
    if self._stopping or task.cancelled():  # Stopped, or its loop ended.
      return
    error = task.exception()
    _LOG.error('the batch worker died; starting another', exc_info=error)
    for entry in self._batch_in_flight:
      if not entry.future.done():
        entry.future.set_exception(WorkerDied(f'the batch worker died: {error!r}'))
    self._batch_in_flight = []
    self._idle = False
    self.start()

  async def stop(self) -> None:
    """Ends the worker after its call in flight; items still queued fail with `Stopped`."""
    self._stopping = True
    if self._task is not None:
      self._task.cancel()
      try:
        await self._task
      except asyncio.CancelledError:
        pass
    while self._queue:
      entry = self._queue.popleft()
      if not entry.future.done():
        entry.future.set_exception(Stopped('the server is stopping'))

  async def submit(self, items: Sequence[Item]) -> list[Result | Exception]:
    """The results of `items` (or each one's fault), run in the batches the worker forms; `TooLarge` for more
    items than `max_queue`, `QueueFull` when the queue has no room for all of them now (none is queued then).
    Cancelled, it takes its items still queued out of the queue."""
    if len(items) > self.max_queue:
      raise TooLarge(f'{len(items)} positions, more than the {self.max_queue} the queue holds (--max_queue)')
    if len(self._queue) + len(items) > self.max_queue:
      raise QueueFull(f'{len(self._queue)} positions queued; {len(items)} more exceed the limit of {self.max_queue}')
    loop = asyncio.get_running_loop()
    if 0 < len(items) <= self._inline_max and self._idle and not self._queue:
      await asyncio.sleep(0)  # Requests read with this one start first (and count themselves in flight).
      if self._idle and not self._queue and self._alone():
        return self._inline(list(items))  # Alone: no hop through the queue and the worker.
    entries = [_Entry(item, loop.create_future(), loop.time()) for item in items]
    self._queue.extend(entries)
    self._arrived.set()
    try:
      return list(await asyncio.gather(*(entry.future for entry in entries)))
    except asyncio.CancelledError:  # The client went away: its positions leave the queue.
      for entry in entries:
        entry.future.cancel()
      self._queue = deque(entry for entry in self._queue if not entry.future.done())
      raise

  def _inline(self, items: list[Item]) -> list[Result | Exception]:
    """`run(items)` on the event loop, now."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    results = list(self._run(items))
    if self._observe is not None:
      self._observe(len(items), [0.0] * len(items), loop.time() - start)
    return results

  async def _batch(self) -> list[_Entry]:
    """The next batch: what is queued, up to `max_batch`, after waiting up to `max_wait` for more when short."""
    loop = asyncio.get_running_loop()
    self._idle = True
    try:
      while not self._queue:
        self._arrived.clear()
        await self._arrived.wait()
    finally:
      self._idle = False
    batch = [self._queue.popleft()]
    deadline = loop.time() + self._max_wait
    while len(batch) < self.max_batch:
      queue = self._queue
      if queue:
        batch.append(queue.popleft())
        continue
      left = deadline - loop.time()
      if left <= 0:
        break
      self._arrived.clear()
      try:
        await asyncio.wait_for(self._arrived.wait(), left)
      except TimeoutError:
        break
    return [entry for entry in batch if not entry.future.done()]

  async def _work(self) -> None:
    loop = asyncio.get_running_loop()
    while True:
      batch = self._batch_in_flight = await self._batch()
      if not batch:
        continue
      start = loop.time()
      try:
        items = [entry.item for entry in batch]
        if len(batch) <= self._inline_max and not self._queue and self._alone():  # Nothing else waits.
          results = self._run(items)
        else:
          results = await loop.run_in_executor(self._executor, self._run, items)
      except Exception as error:  # pylint: disable=broad-except  # Each request answers it (500); the worker goes on.
        for entry in batch:
          if not entry.future.done():
            entry.future.set_exception(error)
        continue
      if self._observe is not None:
        self._observe(len(batch), [start - entry.queued for entry in batch], loop.time() - start)
      for entry, result in zip(batch, results):
        if not entry.future.done():
          entry.future.set_result(result)
      self._batch_in_flight = []
