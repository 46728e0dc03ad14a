"""What the server computes: the model's analysis of positions (batched), a search's move, Stockfish's view.

`Service` holds the policy of the served checkpoint, its `batcher.Batcher` and, where
the server was given them, a search agent (``/v1/play``) and a Stockfish
(``/v1/stockfish``). `Service.warm_up` compiles every batch shape that a model call
can use (a call of up to `max_batch` positions; the search's calls); the server is
ready after it, and the shapes compiled later are counted
(``searchless_serve_compiled_after_ready_total``: none is expected). The answers are
JSON-ready dicts (`describe`): every legal move with its UCI, SAN and the model's win
probability for the side to move, best first. A finished game is answered with its
result, without the model.
"""

import asyncio
from collections.abc import Callable, Sequence
import concurrent.futures
import dataclasses
import logging
import threading
import time
from typing import Any

import chess
import chess.engine
import numpy as np

from searchless.core import notation
from searchless.core import values
from searchless.engines import launch
from searchless.play import policy as policy_lib
from searchless.play.search import agent as search_agent
from searchless.play.search import alphabeta
from searchless.play.search import mcts
from searchless.play.serve import batcher as batcher_lib
from searchless.play.serve import inputs
from searchless.play.serve import metrics as metrics_lib

_LOG = logging.getLogger(__name__)
DIGITS = 6  # Probabilities are rounded to this many decimals.
# A model call of this many positions or fewer, for the only request in flight, runs on the event loop
# (`batcher.Batcher`'s `inline_max`): for a lone position, the hop to the model's thread and back was a third of
# the 1 ms an answer took beyond the model.
INLINE_POSITIONS = 1


def outcome(board: chess.Board) -> dict[str, Any] | None:
  """The game's result when `board` ends it (mate, stalemate, insufficient material, 75 moves, fivefold), else None.

  >>> outcome(chess.Board('7k/6Q1/6K1/8/8/8/8/8 b - - 0 1'))
  {'result': '1-0', 'winner': 'white', 'termination': 'checkmate'}
  """
  done = board.outcome()
  if done is None:
    return None
  winner = None if done.winner is None else chess.COLOR_NAMES[done.winner]
  return {'result': done.result(), 'winner': winner, 'termination': done.termination.name.lower()}


def describe(board: chess.Board, analysis: policy_lib.Analysis | None) -> dict[str, Any]:
  """A position's answer: FEN, side to move, check, outcome, the mover's value, and every legal move, best first,
  each with ``uci``, ``san`` and ``win`` (the mover's win probability after it; ``probability`` for a
  behavioral-cloning policy, which predicts moves, not values). `analysis` None: a position without legal moves.

  >>> answer = describe(chess.Board('7k/6Q1/6K1/8/8/8/8/8 b - - 0 1'), None)
  >>> answer['side_to_move'], answer['check'], answer['value'], answer['moves']
  ('black', True, 0.0, [])
  """
  return Described(board).answer(analysis)


class Described:
  """What a position's answer holds besides the model's view and the FEN (side to move, check, outcome, each legal
  move's UCI and SAN), worked out apart so that it can be while the model runs; `answer` adds the FEN (the
  analysis has it) and the model's view."""

  def __init__(self, board: chess.Board, legal: Sequence[chess.Move] | None = None):
    self.board = board
    self.head: dict[str, Any] = {
      'side_to_move': chess.COLOR_NAMES[board.turn],
      'check': board.is_check(),
      'outcome': outcome(board),
    }
    self.names = {move: (move.uci(), san) for move, san in notation.all_san(board, legal).items()}

  def answer(self, analysis: policy_lib.Analysis | None) -> dict[str, Any]:
    """The answer (`describe`) with `analysis`, the model's view of the board (None: no legal moves)."""
    answer = {'fen': self.board.fen() if analysis is None else analysis.fen, **self.head}  # The analysis has it.
    if analysis is None:
      answer.update(value=0.0 if self.board.is_checkmate() else 0.5, best=None, moves=[])
      return answer
    finite = np.isfinite(analysis.scores).all() and (analysis.value is None or np.isfinite(analysis.value))
    if not finite:  # orjson would write null: a fault of the model, the position's own (`Service._answers`).
      raise ModelFault(f'the model gave non-finite values on {analysis.fen}: {analysis.scores.tolist()}')
    key = 'probability' if analysis.win_probs is None else 'win'
    scores = analysis.scores.tolist()  # Python floats: `ranked`'s order and values, without its pairs.
    names, moves_of = self.names, analysis.moves
    moves = []
    for i in np.argsort(-analysis.scores, kind='stable').tolist():
      uci, san = names[moves_of[i]]
      moves.append({'uci': uci, 'san': san, key: round(scores[i], DIGITS)})
    value = None if analysis.value is None else round(float(analysis.value), DIGITS)
    answer.update(value=value, best=moves[0] if moves else None, moves=moves)
    return answer


class ModelFault(ValueError):
  """The model's answer for one position cannot be sent (non-finite values): that position's fault alone."""


class Service:
  """The served model and its batcher; the search agent and Stockfish when given (each runs on its own thread)."""

  def __init__(
    self,
    policy: policy_lib.Policy,
    *,
    name: str,
    metrics: metrics_lib.Metrics,
    max_batch: int = 64,
    max_queue: int = 1024,
    max_wait_ms: float = 0.0,
    agent: search_agent.SearchAgent | None = None,
    stockfish: chess.engine.SimpleEngine | None = None,
    stockfish_limit: launch.SearchLimit | None = None,
  ):
    self.policy = policy
    self.name = name
    self.metrics = metrics
    self.max_batch, self.max_queue, self.max_wait_ms = max_batch, max_queue, max_wait_ms
    self.agent = agent
    self.stockfish = stockfish
    self.stockfish_limit = stockfish_limit or launch.SearchLimit.parse('time=0.2')
    self.ready = False
    self.stopping = threading.Event()  # Set at SIGTERM: /health/ready says so, a search ends at its next batch.
    self.requests = 0  # API requests read and not yet answered (`counted`): the batcher's `alone`.
    self._model_thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix='model')
    self._search_thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix='search')
    self._stockfish_thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix='stockfish')
    self._compiled: set[tuple] = set()
    self._ready_counts = 0
    self.batcher: batcher_lib.Batcher[tuple[chess.Board, list[chess.Move]], dict[str, Any]] | None = None
    self._waiting = {'search': 0, 'stockfish': 0}  # Requests waiting for the search or Stockfish.

  @property
  def compiled_shapes(self) -> int:
    """The batch shapes compiled (those of the served policy and the search's)."""
    return len(self._compiled)

  def _predictors(self) -> list:
    """The predictors of the served policy and of the search's."""
    policies = [self.policy]
    if self.agent is not None:
      evaluator = self.agent.evaluator
      policies += [p for p in (evaluator.policy, evaluator.value_policy) if p is not None]
    return [predictor for p in policies if (predictor := getattr(p, 'predictor', None)) is not None]

  def _shapes(self) -> set[tuple]:
    """Every batch shape compiled so far, of the served policy and the search's, by model (predictors of one model
    share their compiled shapes: `searchless.play.predictor`)."""
    return {(predictor.model_config, shape) for predictor in self._predictors() for shape in predictor.shapes.ready}

  def warm_up(self) -> float:
    """Compiles every batch shape a model call can use, now (blocking); returns the seconds it took."""
    start = time.perf_counter()
    self.policy.warm_up(self.max_batch)
    self.policy.analyse(chess.Board())
    if self.agent is not None:
      self.agent.searcher.warm_up()
    self._compiled = self._shapes()
    self._ready_counts = sum(len(p.shapes.ready) for p in self._predictors())  # Changes when a shape compiles.
    self.metrics.compiled_shapes.set(len(self._compiled))
    self.ready = True
    self.metrics.ready.set(1)
    return time.perf_counter() - start

  def _answers(self, items: list[tuple[chess.Board, list[chess.Move]]]) -> list[dict[str, Any] | ModelFault]:
    """The answers (`describe`) to boards, each with its legal moves (not none), from one model call (on the
    model's thread), or a position's `ModelFault` in place of its answer (logged; the others are answered)."""
    analyses = self._analyse_many([board for board, _ in items], [legal for _, legal in items])
    answers: list[dict[str, Any] | ModelFault] = []
    for (board, legal), analysis in zip(items, analyses):
      try:
        answers.append(Described(board, legal).answer(analysis))
      except ModelFault as fault:
        _LOG.error('%s', fault)
        answers.append(fault)
    return answers

  def _analyse_many(self, boards: list[chess.Board], legal: list[list[chess.Move]]) -> list[policy_lib.Analysis]:
    """The model on `boards`, each with its `legal` moves, in one call (on the model's thread); shapes compiled
    by it are counted."""
    analyses = self.policy.analyse_many(boards, legal)
    if self.ready and sum(len(p.shapes.ready) for p in self._predictors()) != self._ready_counts:
      new = self._shapes() - self._compiled
      if new:
        _LOG.warning('compiled %d batch shape(s) after ready: %s', len(new), sorted(s for _, s in new))
        self.metrics.compiled_after_ready.inc(len(new))
        self.metrics.compiled_shapes.inc(len(new))
        self._compiled |= new
      self._ready_counts = sum(len(p.shapes.ready) for p in self._predictors())
    return analyses

  def start(self) -> None:
    """Starts the batcher (in the running event loop)."""
    self.batcher = batcher_lib.Batcher(
      self._answers,
      self._model_thread,
      max_batch=self.max_batch,
      max_queue=self.max_queue,
      max_wait_ms=self.max_wait_ms,
      inline_max=INLINE_POSITIONS,
      alone=lambda: self.requests <= 1,
      observe=self.metrics.observe_batch,
    )
    self.metrics.watch_queue(self.batcher.queued)
    self.batcher.start()

  async def stop(self) -> None:
    """Ends the batcher and any search, quits Stockfish; the threads finish what they run."""
    self.stopping.set()
    if self.batcher is not None:
      await self.batcher.stop()
    for pool in (self._model_thread, self._search_thread, self._stockfish_thread):
      pool.shutdown(wait=False, cancel_futures=True)
    if self.stockfish is not None:
      await asyncio.to_thread(launch.close_engine, self.stockfish)
    if self.agent is not None:
      self.agent.close()
    close = getattr(self.policy, 'close', None)
    if close is not None:
      close()

  def begin_stopping(self) -> None:
    """SIGTERM's first step (any thread): ``/health/ready`` answers 503 ``stopping``, new API requests 503, and
    a search in flight stops at its next batch with its move so far."""
    self.stopping.set()
    self.metrics.ready.set(0)

  async def analyse(self, boards: list[chess.Board]) -> list[dict[str, Any] | Exception]:
    """Each board's answer (`describe`) or its `ModelFault`; the boards with legal moves go through the batcher
    in one submission."""
    assert self.batcher is not None, 'start() first'
    legal = [list(b.legal_moves) for b in boards]  # Made once: the policy and the moves' SAN read them.
    live = [(b, moves) for b, moves in zip(boards, legal) if moves]
    answers = iter(await self.batcher.submit(live) if live else [])
    return [next(answers) if moves else describe(b, None) for b, moves in zip(boards, legal)]

  def _admit(self, kind: str) -> None:
    if self._waiting[kind] >= self.max_queue:
      raise batcher_lib.QueueFull(f'{self._waiting[kind]} {kind} requests wait already')

  async def _on(self, kind: str, pool: concurrent.futures.Executor, function, *args):
    """`function(*args, gone)` on `pool` (one at a time), counted against `max_queue` while it waits or runs;
    cancelled (its client left), it never starts, or `gone()` turns true for it to stop."""
    self._admit(kind)
    self._waiting[kind] += 1
    left = threading.Event()
    try:
      return await asyncio.get_running_loop().run_in_executor(pool, function, *args, left.is_set)
    except asyncio.CancelledError:
      left.set()
      raise
    finally:
      self._waiting[kind] -= 1

  def _search(self, board: chess.Board, movetime_ms: int | None, gone: Callable[[], bool]) -> dict[str, Any]:
    agent = self.agent
    assert agent is not None
    searcher = agent.searcher
    config = searcher.config
    if movetime_ms is not None:  # As UCI's go movetime: that much time, whatever the spec's simulations or depth.
      seconds = movetime_ms / 1000
      if isinstance(config, mcts.MctsConfig):
        searcher.config = dataclasses.replace(config, seconds=seconds, simulations=10**9, depth=None)
      else:
        searcher.config = dataclasses.replace(config, seconds=seconds, depth=alphabeta.MAX_DEPTH, nodes=None)
    searcher.reset()  # A request's search starts afresh: its answer and its memory owe nothing to other clients'.
    try:
      result = agent.search(board, stop=lambda: self.stopping.is_set() or gone())
    finally:
      searcher.config = config
    answer: dict[str, Any] = {'agent': agent.name, 'fen': board.fen(), 'outcome': outcome(board)}
    if result.move is None:
      return {**answer, 'move': None, 'san': None, 'win': 0.0 if board.is_checkmate() else 0.5}
    mcts_search = isinstance(searcher, mcts.Mcts)
    return {
      **answer,
      'move': result.move.uci(),
      'san': board.san(result.move),
      'win': round(result.win_probability, DIGITS),
      'mate_in': result.mate_in(),
      'depth': result.depth,
      **({'visits': int(np.sum(result.visits))} if mcts_search else {'nodes': result.simulations}),
      'evaluations': result.evaluations,
      'pv': [m.uci() for m in result.pv],
      'pv_san': board.variation_san(result.pv),  # The line in SAN, numbered: '1. e4 e5 2. Nf3'.
      'seconds': round(result.seconds, 4),
    }

  async def play(self, request: inputs.PlayRequest) -> dict[str, Any]:
    """The search agent's move on the request's board (its depth, visits or nodes, principal line)."""
    return await self._on('search', self._search_thread, self._search, request.board, request.movetime_ms)

  def _stockfish(self, board: chess.Board, gone: Callable[[], bool]) -> dict[str, Any]:
    assert self.stockfish is not None
    answer: dict[str, Any] = {'engine': self.stockfish.id.get('name', 'stockfish'), 'fen': board.fen()}
    if not any(True for _ in board.legal_moves):
      return {
        **answer,
        'move': None,
        'san': None,
        'win': 0.0 if board.is_checkmate() else 0.5,
        'outcome': outcome(board),
      }
    info = self.stockfish.analyse(board, self.stockfish_limit.to_chess(launch.HANG_SECONDS))
    pv = info.get('pv') or []
    score = info['score'].relative
    move = pv[0] if pv else None
    return {
      **answer,
      'move': None if move is None else move.uci(),
      'san': None if move is None else board.san(move),
      'win': round(values.score_to_win_probability(score), DIGITS),
      'score': {'mate': score.mate()} if score.is_mate() else {'cp': score.score()},
      'depth': info.get('depth'),
      'pv': [m.uci() for m in pv],
      'limit': str(self.stockfish_limit),
    }

  async def engine(self, board: chess.Board) -> dict[str, Any]:
    """Stockfish's move, score and win probability (`values.score_to_win_probability`) on `board`."""
    return await self._on('stockfish', self._stockfish_thread, self._stockfish, board)
