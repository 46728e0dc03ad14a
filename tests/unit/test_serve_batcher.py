"""The dynamic batcher of `searchless-serve` (`searchless.play.serve.batcher`), on a model that is a function."""

import asyncio
import concurrent.futures
import threading

import pytest

from searchless.play.serve.batcher import Batcher, QueueFull, Stopped, TooLarge, WorkerDied


class Model:
  """Doubles its items; records each call's items; each call waits for `gate` (set: runs at once)."""

  def __init__(self):
    self.calls: list[list[int]] = []
    self.gate = threading.Event()
    self.gate.set()
    self.started = threading.Event()

  def __call__(self, items):
    self.calls.append(list(items))
    self.started.set()
    self.gate.wait(10)
    if -1 in items:
      raise RuntimeError('a fault of the model')
    return [2 * x for x in items]


def run(test, **limits):
  """Runs `test(batcher, model)` (a coroutine function) with a started batcher; returns its result."""
  model = Model()

  async def main():
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
      observed = []
      batcher = Batcher(model, pool, observe=lambda size, waits, seconds: observed.append((size, len(waits))), **limits)
      batcher.start()
      try:
        return await test(batcher, model), observed
      finally:
        model.gate.set()
        await batcher.stop()

  return asyncio.run(main())


def test_what_waits_during_a_call_goes_into_the_next_up_to_max_batch():
  async def test(batcher, model):
    model.gate.clear()
    first = asyncio.ensure_future(batcher.submit([1]))
    await asyncio.to_thread(model.started.wait, 10)  # The first call runs (alone: nothing waits when idle).
    rest = [asyncio.ensure_future(batcher.submit([i, i + 100])) for i in range(2, 7)]  # 10 positions.
    await asyncio.sleep(0.05)
    assert batcher.queued() == 10
    model.gate.set()
    return await first, [await r for r in rest]

  (first, rest), observed = run(test, max_batch=4, max_queue=64)
  assert first == [2] and rest == [[2 * i, 2 * i + 200] for i in range(2, 7)]
  assert observed == [(1, 1), (4, 4), (4, 4), (2, 2)]


def test_max_wait_holds_a_short_batch_for_more():
  async def test(batcher, model):
    first = asyncio.ensure_future(batcher.submit([1]))
    await asyncio.sleep(0.02)  # Within the 300 ms wait: both in one call.
    second = asyncio.ensure_future(batcher.submit([2]))
    return await first, await second

  answers, observed = run(test, max_batch=8, max_queue=64, max_wait_ms=300)
  assert answers == ([2], [4]) and observed == [(2, 2)]


def test_a_full_queue_refuses_a_request_whole():
  async def test(batcher, model):
    model.gate.clear()
    running = asyncio.ensure_future(batcher.submit([1]))
    await asyncio.to_thread(model.started.wait, 10)
    waiting = asyncio.ensure_future(batcher.submit([2, 3, 4]))
    await asyncio.sleep(0)
    with pytest.raises(QueueFull, match='3 positions queued; 2 more exceed the limit of 4'):
      await batcher.submit([5, 6])
    assert batcher.queued() == 3  # Nothing of the refused request was queued.
    model.gate.set()
    return await running, await waiting

  answers, _ = run(test, max_batch=8, max_queue=4)
  assert answers == ([2], [4, 6, 8])


def test_a_fault_of_the_model_fails_its_calls_requests_and_the_worker_goes_on():
  async def test(batcher, model):
    with pytest.raises(RuntimeError, match='a fault of the model'):
      await batcher.submit([-1])
    return await batcher.submit([3])

  answer, observed = run(test, max_batch=8, max_queue=8)
  assert answer == [6] and observed == [(1, 1)]  # The failed call is not observed.


def test_a_request_gone_is_skipped_and_stop_fails_what_waits():
  async def test(batcher, model):
    model.gate.clear()
    running = asyncio.ensure_future(batcher.submit([1]))
    await asyncio.to_thread(model.started.wait, 10)
    gone = asyncio.ensure_future(batcher.submit([2, 3]))
    kept = asyncio.ensure_future(batcher.submit([4]))
    await asyncio.sleep(0)
    gone.cancel()  # Its client went away.
    model.gate.set()
    await running
    return await kept

  answer, observed = run(test, max_batch=8, max_queue=8)
  assert answer == [8] and observed == [(1, 1), (1, 1)]  # Only the kept position was run.

  async def stopped():
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
      batcher = Batcher(lambda items: items, pool, max_batch=1, max_queue=8)  # Never started: nothing runs.
      waiting = asyncio.ensure_future(batcher.submit([1, 2]))
      await asyncio.sleep(0)
      await batcher.stop()
      with pytest.raises(Stopped):
        await waiting

  asyncio.run(stopped())


def test_limits_are_checked():
  with pytest.raises(ValueError, match='bad batcher limits: max_batch 0, max_queue 8, max_wait_ms 0'):
    Batcher(lambda items: items, concurrent.futures.ThreadPoolExecutor(1), max_batch=0, max_queue=8)


def test_a_lone_position_of_the_only_request_runs_on_the_event_loop_and_others_on_the_thread():
  threads: list[tuple[str, list[int]]] = []
  in_flight = [0]  # Requests started and not answered, as the server counts them.

  def model(items):
    threads.append((threading.current_thread().name, list(items)))
    return [2 * x for x in items]

  async def main():
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix='model') as pool:
      batcher = Batcher(model, pool, max_batch=8, max_queue=16, inline_max=1, alone=lambda: in_flight[0] <= 1)
      batcher.start()

      async def request(items):
        in_flight[0] += 1
        try:
          return await batcher.submit(items)
        finally:
          in_flight[0] -= 1

      answers = [await request([1])]  # Alone: on the loop.
      answers.append(await request([2, 3]))  # Two positions: on the thread.
      in_flight[0] += 1
      answers.append(await request([4]))  # Another request in flight: on the thread.
      in_flight[0] -= 1
      answers.append(await asyncio.gather(request([5]), request([6])))  # Started together: one batch of two.
      await batcher.stop()
      return answers

  assert asyncio.run(main()) == [[2], [4, 6], [8], [[10], [12]]]
  assert threads == [('MainThread', [1]), ('model_0', [2, 3]), ('model_0', [4]), ('model_0', [5, 6])]


def test_a_request_of_no_positions_makes_no_model_call():
  async def test(batcher, model):
    return await batcher.submit([])

  assert run(test, max_batch=8, max_queue=16, inline_max=1) == ([], [])


def test_a_request_cancelled_takes_its_positions_out_of_the_queue():
  async def test(batcher, model):
    model.gate.clear()
    running = asyncio.ensure_future(batcher.submit([1]))
    await asyncio.to_thread(model.started.wait, 10)
    gone = [asyncio.ensure_future(batcher.submit([i, i, i])) for i in range(2, 6)]
    kept = asyncio.ensure_future(batcher.submit([9]))
    await asyncio.sleep(0)
    assert batcher.queued() == 13
    for request in gone:  # Their clients went away.
      request.cancel()
    await asyncio.gather(*gone, return_exceptions=True)
    queued = batcher.queued()
    model.gate.set()
    return queued, await running, await kept

  (queued, running, kept), observed = run(test, max_batch=8, max_queue=16)
  assert (queued, running, kept) == (1, [2], [18]) and observed == [(1, 1), (1, 1)]


def test_a_request_larger_than_the_queue_is_too_large_not_full():
  async def test(batcher, model):
    with pytest.raises(TooLarge, match=r'9 positions, more than the 8 the queue holds \(--max_queue\)'):
      await batcher.submit(list(range(9)))
    return await batcher.submit(list(range(8)))

  answer, _ = run(test, max_batch=8, max_queue=8)
  assert answer == [2 * i for i in range(8)]


def test_a_fault_of_one_item_fails_that_item_only():
  def model(items):
    return [ValueError(f'no value for {x}') if x < 0 else 2 * x for x in items]

  async def main():
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
      batcher = Batcher(model, pool, max_batch=8, max_queue=8)
      batcher.start()
      answers = await asyncio.gather(batcher.submit([1, -2]), batcher.submit([3]))
      await batcher.stop()
      return answers

  (first, second) = asyncio.run(main())
  assert first[0] == 2 and isinstance(first[1], ValueError) and str(first[1]) == 'no value for -2'
  assert second == [6]


def test_a_worker_that_dies_fails_its_batch_and_is_replaced():
  """A fault outside the model call (here the metrics' observer, on its first call) kills the worker task."""
  calls = []

  def observe(size, waits, seconds):
    calls.append(size)
    if len(calls) == 1:
      raise KeyError('a fault of the server')

  async def main():
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
      batcher = Batcher(lambda items: [2 * x for x in items], pool, max_batch=8, max_queue=8, observe=observe)
      batcher.start()
      first = await asyncio.wait_for(asyncio.gather(batcher.submit([1, 2]), return_exceptions=True), 10)
      second = await asyncio.wait_for(batcher.submit([3]), 10)
      await batcher.stop()
      return first[0], second

  failed, second = asyncio.run(main())
  assert isinstance(failed, WorkerDied) and "KeyError('a fault of the server')" in str(failed)
  assert second == [6] and calls == [2, 1]
