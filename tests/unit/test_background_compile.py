"""Compiling a predictor's batch shapes in the background: calls meanwhile use the compiled ones, same outputs."""

import doctest
import threading
import time

import chess
import numpy as np
import pytest

from searchless.core import tokenizer
from searchless.model import loading
from searchless.play import background_compile
from searchless.play import policy as policy_lib
from searchless.play import predictor as predictor_lib


BUSY = chess.Board('r3k2r/pppq1ppp/2npbn2/2b1p3/2B1P3/2NPBN2/PPPQ1PPP/R3K2R w KQkq - 0 1')  # 43 moves.
OPEN = chess.Board('4k3/8/8/8/8/8/8/R3K2R w KQ - 0 1')  # 26 moves, with castling.
QUEENS = chess.Board('k7/8/8/8/3Q4/8/2Q5/7K w - - 0 1')  # 53 moves: more than FIRST_MOVE_SLOTS.


def test_docstring_examples():
  assert doctest.testmod(background_compile).failed == 0


def test_boards_used_here_have_the_move_counts_they_claim():
  assert [b.legal_moves.count() for b in (chess.Board(), OPEN, BUSY, QUEENS)] == [20, 26, 43, 53]


def test_the_worker_compiles_in_order_and_stops_when_closed():
  started, release, done = threading.Event(), threading.Event(), []

  def run(shape):
    started.set()
    release.wait(5)
    done.append(shape)

  shapes = background_compile.Shapes(run)
  shapes.compile_later([(1, 1), (2, 1), (3, 1)])
  assert started.wait(5)
  closer = threading.Thread(target=shapes.close)
  closer.start()  # Stops after the shape being compiled.
  release.set()
  closer.join(5)
  assert done == [(1, 1)] and shapes.ready == {(1, 1)}
  shapes.compile_later([(4, 1)])  # Closed: nothing more is queued.
  assert shapes.wait(1) and shapes.ready == {(1, 1)}


def test_a_failing_background_compile_is_logged_and_skipped(caplog):
  def run(shape):
    if shape == (2, 1):
      raise RuntimeError('no memory')

  shapes = background_compile.Shapes(run)
  shapes.compile_later([(1, 1), (2, 1), (3, 1)])
  assert shapes.wait(5)
  assert shapes.ready == {(1, 1), (3, 1)}
  assert 'compiling shape (2, 1) in the background failed' in caplog.text


def test_a_search_in_flight_holds_every_worker_until_it_is_over_and_quiet():
  started = []
  shapes = background_compile.Shapes(lambda shape: started.append((shape, time.monotonic())))
  with background_compile.held():
    shapes.compile_later([(1, 1), (2, 1)])
    time.sleep(0.3)
    assert started == [] and not shapes.wait(0)  # Queued, not started.
    released = time.monotonic()
  assert shapes.wait(5) and [shape for shape, _ in started] == [(1, 1), (2, 1)]
  assert started[0][1] - released >= background_compile.QUIET_SECONDS  # The next command may be another search.
  shapes.close()


def test_within_compiled_only_a_shape_not_compiled_raises_and_goes_first_in_the_queue():
  compiled = []
  shapes = background_compile.Shapes(compiled.append, {(1, 48)})
  with background_compile.held():  # Keeps the worker from starting, to see its queue.
    shapes.compile_later([(1, 32), (1, 96)])
    with background_compile.compiled_only():
      with shapes.guard((1, 48)):  # Compiled: runs.
        pass
      with pytest.raises(background_compile.NotCompiled):
        shapes.guard((1, 64))
    assert shapes.guard((1, 64)) is not None and compiled == []  # Outside the block, a call compiles (traced).
  assert shapes.wait(5) and compiled == [(1, 64), (1, 32), (1, 96)]
  shapes.close()


def test_each_compile_is_timed_and_the_slowest_is_what_one_more_is_expected_to_cost():
  shapes = background_compile.Shapes(lambda shape: time.sleep(shape[0] / 10))
  assert shapes.seconds == {} and shapes.compile_cost() == background_compile.DEFAULT_COMPILE_SECONDS
  shapes.compile([(2, 1), (1, 1)])
  with shapes.guard((3, 1)):  # A call that compiles in the foreground.
    time.sleep(0.3)
  shapes.mark((3, 1))
  seconds = shapes.seconds
  assert sorted(seconds) == [(1, 1), (2, 1), (3, 1)]
  assert all(shape[0] / 10 <= took < shape[0] / 10 + QUIET for shape, took in seconds.items())
  assert shapes.compile_cost() == max(seconds.values())
  shapes.compile_later([(4, 1)])  # The worker's compiles are timed as well.
  assert shapes.wait(5) and 0.4 <= shapes.seconds[(4, 1)] < 0.4 + QUIET
  assert shapes.compile_cost() == max(shapes.seconds.values())
  shapes.close()


def test_within_compiled_only_a_shape_compiles_now_when_its_cost_ends_before_the_deadline():
  """`compiled_only(deadline)`: a shape not compiled compiles in the foreground when now plus the measured cost
  is before the deadline, else raises `NotCompiled` and goes first in the worker's queue; no deadline: never."""
  compiled = []

  def run(shape):
    time.sleep(0.2)
    compiled.append(shape)

  shapes = background_compile.Shapes(run)
  with background_compile.held():  # Keeps the worker from starting, to see its queue.
    with background_compile.compiled_only(time.monotonic() + background_compile.DEFAULT_COMPILE_SECONDS - 0.5):
      with pytest.raises(background_compile.NotCompiled):  # Nothing measured yet: the default cost.
        shapes.guard((1, 1))
    with background_compile.compiled_only(time.monotonic() + background_compile.DEFAULT_COMPILE_SECONDS + 1):
      with shapes.guard((1, 1)):  # Compiles now, in this thread.
        run((1, 1))
      shapes.mark((1, 1))
    cost = shapes.compile_cost()
    assert compiled == [(1, 1)] and cost == shapes.seconds[(1, 1)] and 0.2 <= cost < 1
    with background_compile.compiled_only(time.monotonic() + cost + 1):
      with background_compile.compiled_only(time.monotonic() + cost / 2):  # The innermost deadline decides.
        with pytest.raises(background_compile.NotCompiled):
          shapes.guard((2, 1))
      with shapes.guard((3, 1)):
        run((3, 1))
      shapes.mark((3, 1))
      with background_compile.compiled_only():
        with pytest.raises(background_compile.NotCompiled):
          shapes.guard((4, 1))
    assert compiled == [(1, 1), (3, 1)] and shapes.ready == {(1, 1), (3, 1)}
  assert shapes.wait(5) and compiled == [(1, 1), (3, 1), (4, 1), (2, 1)]  # The latest refused goes first.
  shapes.close()


def test_per_move_background_warm_up_uses_the_compiled_batch_of_32(model_checkpoint):
  model_config, params, _ = loading.load_model(str(model_checkpoint))
  predictor = predictor_lib.Predictor(model_config, params, share=False)
  predictor.shapes.close()
  policy = policy_lib.make_policy('action_value', predictor)
  policy.warm_up(background=True)
  length = policy_lib.ActionValuePolicy.sequence_length
  assert predictor.shapes.ready == {(32, length)}
  full = policy_lib.make_policy('action_value', predictor_lib.Predictor(model_config, params, share=False))
  for board, calls in ((chess.Board(), 1), (BUSY, 2)):  # 20 moves: one call of 32; 43 moves: two.
    before = predictor.rows_run
    got, want = policy.analyse(board), full.analyse(board)
    assert predictor.rows_run - before == 32 * calls
    np.testing.assert_allclose(got.win_probs, want.win_probs, atol=1e-5)
  assert predictor.shapes.ready == {(32, length)}


def test_a_per_move_predictors_probe_is_the_models_in_a_call_of_one_sequence(model_checkpoint):
  from searchless.model import network

  model_config, params, _ = loading.load_model(str(model_checkpoint))
  predictor = predictor_lib.Predictor(model_config, params, share=False)
  assert network.probe_distance(network.probe(model_config, params), predictor.probe()) < 1e-5
  assert predictor.shapes.ready == {(1, tokenizer.SEQUENCE_LENGTH + 1)}
  predictor.close()


def test_a_worker_that_waits_for_a_trace_starts_nothing_once_a_search_holds_it():
  """The hold is checked when a worker claims its turn, not before it waits for one: a search that begins while
  another thread traces finds no shape started under it."""
  started = []
  shapes = background_compile.Shapes(lambda shape: started.append(shape))
  with background_compile.tracing():  # A foreground trace: the worker waits for its turn.
    shapes.compile_later([(1, 1)])
    time.sleep(QUIET)
    hold = background_compile.held()
    hold.__enter__()  # A go begins before the trace ends.
  time.sleep(QUIET)
  assert started == []
  hold.__exit__(None, None, None)
  assert shapes.wait(5) and started == [(1, 1)]
  shapes.close()


QUIET = 0.3  # Long beside QUIET_SECONDS and a thread's start on a loaded machine.


def test_traces_and_compiles_take_turns_across_workers_and_a_waiting_trace_goes_first():
  """Every worker of the process and every foreground trace run one at a time; a foreground trace waits for the
  shape being compiled, never for a worker's next one."""
  intervals, lock = [], threading.Lock()

  def run(shape):
    begin = time.monotonic()
    time.sleep(0.05)
    with lock:
      intervals.append((begin, time.monotonic(), shape))

  workers = [background_compile.Shapes(run) for _ in range(3)]
  for i, shapes in enumerate(workers):
    shapes.compile_later([(i, size) for size in range(8)])
  time.sleep(QUIET)
  waits = []
  for _ in range(3):
    asked = time.monotonic()
    with background_compile.tracing():
      waits.append(time.monotonic() - asked)
      run(('foreground',))
  assert all(shapes.wait(30) for shapes in workers)
  intervals.sort()
  assert len(intervals) == 3 * 8 + 3
  assert all(end <= begin for (_, end, _), (begin, _, _) in zip(intervals, intervals[1:]))  # One at a time.
  assert max(waits) < 0.05 + QUIET  # At most the shape being compiled (on a loaded machine, some more).
  for shapes in workers:
    shapes.close()


def test_predictors_of_one_model_share_its_compiled_shapes(model_checkpoint):
  """A second predictor of the same architecture and parameter shapes (another agent of the model) compiles
  nothing: its calls hit the first one's compiles, with its own parameters."""
  model_config, params, _ = loading.load_model(str(model_checkpoint))
  first = predictor_lib.Predictor(model_config, params)
  first.shapes.compile([(4, 79)])
  compiles = first._apply._cache_size()
  doubled = {module: {name: 2 * value for name, value in weights.items()} for module, weights in params.items()}
  second = predictor_lib.Predictor(model_config, doubled)
  assert (4, 79) in second.shapes.ready
  sequences = np.zeros((4, 79), np.int32)
  want = predictor_lib.Predictor(model_config, doubled, share=False)(sequences)
  np.testing.assert_allclose(second(sequences), want, atol=1e-5)
  assert not np.allclose(first(sequences), want, atol=1e-3)  # Its own parameters, not the first one's.
  assert second._apply is first._apply and first._apply._cache_size() == compiles
  for predictor in (first, second):
    predictor.close()
