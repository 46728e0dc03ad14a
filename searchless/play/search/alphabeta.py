"""Alpha-beta over a learned model, as KnightCap: a fixed-depth negamax with the model's values at the leaves.

Why alpha-beta rather than Giraffe's probability-limited search: an
action-value model already scores every move of a board in one evaluation, so
the last ply of a depth-d search is free (a frontier board's value is its best
move's value, or a mate when one of its moves mates) and depth d costs one
evaluation per board at depth d - 1; the children of a frontier's parent go to
the model in one batch. The search is
exact within its horizon: it proves mates (a mate in n is found at depth 2n - 1
whatever the model thinks) and repetition draws, where a learned model is
weakest. It maps onto UCI's ``go depth N``, and TDLeaf(lambda) (KnightCap) can
learn from its principal leaves. The same move values order the moves (best
first), which is what makes alpha-beta prune.

* ``depth=1`` plays the model's own best move; every further ply costs about
  one model call per board of the previous ply (~35 boards at depth 2, ~1,000
  at depth 3 after pruning).
* Values are in [-1, 1] from the side to move; a mate the search proves is
  worth ``MATE - plies * MATE_STEP`` (beyond 1, sooner is better), a draw 0.
* With `seconds` (or a `stop()` callback) the search deepens one ply at a time
  and plays the deepest depth it completed (depth 1, the model's own move, always
  completes). The clock is read before each model call, and a call evaluates
  only as many boards as the time left allows (`Evaluator.boards_within`); one
  that needs a shape not compiled yet compiles it when the time left exceeds
  the compile's measured cost, else ends the search as the clock does
  (`background_compile.compiled_only`). The root's own compile is not counted.

>>> from searchless.play import player
>>> from searchless.play.search import evaluator
>>> search = AlphaBeta(evaluator.Evaluator(player.load_policy('pretrained-transformer', compute_dtype='float32')),
...                    AlphaBetaConfig(depth=3))
>>> result = search.search(chess.Board('6k1/5ppp/8/8/8/8/5PPP/3R2K1 w - - 0 1'))
>>> result.move.uci(), result.mate_in(), [m.uci() for m in result.pv]
('d1d8', 1, ['d1d8'])
"""

import dataclasses
import time
from collections.abc import Callable, Sequence

import chess
import chess.polyglot
import numpy as np

from searchless.play import background_compile
from searchless.play import predictor as predictor_lib
from searchless.play.search import evaluator as evaluator_lib
from searchless.plumbing import errors
from searchless.play.search.result import MATE, MATE_STEP, SearchResult


MAX_DEPTH = 64  # The depth a time-limited search may reach.


@dataclasses.dataclass(frozen=True)
class AlphaBetaConfig:
  """The search's depth and time."""

  depth: int = 2  # Plies searched; the last one is read from the model's move values (1: the model's move).
  seconds: float | None = None  # Time limit per move (None: none); plays the deepest completed depth.
  nodes: int | None = None  # Nodes visited per move, at most (None: no limit), kept as `seconds` is.

  def __post_init__(self):
    if not 1 <= self.depth <= MAX_DEPTH:
      raise errors.BadInput(f'depth must be in [1, {MAX_DEPTH}], got {self.depth}')
    if self.seconds is not None and self.seconds <= 0:
      raise errors.BadInput(f'seconds must be > 0, got {self.seconds}')
    if self.nodes is not None and self.nodes < 1:
      raise errors.BadInput(f'nodes must be >= 1, got {self.nodes}')


class _OutOfTime(Exception):
  pass


class AlphaBeta:
  """Iterative-deepening negamax with alpha-beta pruning over an `Evaluator`."""

  def __init__(
    self,
    evaluator: evaluator_lib.Evaluator,
    config: AlphaBetaConfig = AlphaBetaConfig(),
    clock: Callable[[], float] = time.perf_counter,
  ):
    self.evaluator = evaluator
    self.config = config
    self._clock = clock
    self._cache: dict[int, evaluator_lib.Evaluation] = {}
    self._nodes = 0
    self._deadline: float | None = None
    self._stop: Callable[[], bool] | None = None
    self._strict = False  # Model calls on compiled shapes only (`_evaluate`).

  def warm_up(self, *, background: bool = False) -> None:
    """Compiles the model calls this search makes (before the first move; `background`: one now, the rest later)."""
    self.evaluator.warm_up(max(predictor_lib.BOARD_BUCKETS), background=background)

  def reset(self) -> None:
    """Nothing is kept between searches; here for the agents' common interface."""

  def search(
    self, board: chess.Board, *, stop: Callable[[], bool] | None = None, root_moves: Sequence[chess.Move] | None = None
  ) -> SearchResult:
    """Searches `board` (left unchanged) to the configured depth or time, among `root_moves` if given."""
    start = self._clock()
    evaluations_before = self.evaluator.boards_evaluated
    if not any(True for _ in board.legal_moves):
      value = evaluator_lib.terminal_value(board, at_root=True)
      return SearchResult(
        None, (), np.zeros(0), np.zeros(0), np.zeros(0), -MATE if value == -1 else 0.0, 0, 0, 0, (), 0.0
      )
    self._cache, self._nodes = {}, 0
    self._deadline, self._stop = None, None  # The root is always evaluated: depth 1 is the model's move.
    self._strict = False  # From depth 2 on a clock.
    work = board.copy()
    compiling = self.evaluator.compile_seconds
    root = self._evaluation(work)
    start += self.evaluator.compile_seconds - compiling  # The root's compile is not the search's time.
    self._deadline = None if self.config.seconds is None else start + self.config.seconds
    self._stop = stop
    allowed = [i for i, m in enumerate(root.moves) if not root_moves or m in root_moves] or list(range(len(root.moves)))
    completed: tuple[int, np.ndarray, list[chess.Move]] | None = None
    first: int | None = None
    for depth in range(1, self.config.depth + 1):
      q = np.full(len(root.moves), -np.inf)
      try:
        _, pv = self._negamax(work, depth, -np.inf, np.inf, 0, root_values=q, first=first, allowed=allowed)
      except _OutOfTime:
        break
      completed = (depth, q, pv)
      self._strict = self._deadline is not None
      first = root.moves.index(pv[0])
      if abs(q[first]) > 1:  # A proven mate: deeper only finds the same.
        break
    assert completed is not None  # Depth 1 never runs out of time.
    depth, q, pv = completed
    best = root.moves.index(pv[0])
    visits = np.zeros(len(root.moves))
    visits[best] = 1
    return SearchResult(
      pv[0],
      root.moves,
      visits,
      q,
      root.priors,
      float(q[best]),
      self._nodes,
      self.evaluator.boards_evaluated - evaluations_before,
      depth,
      tuple(pv),
      self._clock() - start,
    )

  def _key(self, board: chess.Board) -> int:
    return chess.polyglot.zobrist_hash(board)

  def _evaluation(self, board: chess.Board) -> evaluator_lib.Evaluation:
    key = self._key(board)
    if key not in self._cache:
      self._fit(1)
      self._cache[key] = self._evaluate([board])[0]
    return self._cache[key]

  def _evaluate(self, boards: list[chess.Board]) -> list[evaluator_lib.Evaluation]:
    """The model's evaluations; on a clock past depth 1, on compiled shapes only but for a compile that fits in
    the time left (one that would not ends the search as the clock does: `_OutOfTime`)."""
    left = None if self._deadline is None else self._deadline - self._clock()
    try:
      return self.evaluator.evaluate(boards, compiled_only=self._strict, seconds_left=left)
    except background_compile.NotCompiled:
      raise _OutOfTime from None

  def _evaluate_many(self, boards: list[chess.Board]) -> None:
    """Evaluates the `boards` not in the cache, in calls sized to the time left (`_fit`)."""
    missing = {self._key(b): b for b in boards}
    pending = [(k, b) for k, b in missing.items() if k not in self._cache]
    while pending:
      size = self._fit(len(pending))
      chunk, pending = pending[:size], pending[size:]
      for (key, _), evaluation in zip(chunk, self._evaluate([b for _, b in chunk])):
        self._cache[key] = evaluation

  def _fit(self, wanted: int) -> int:
    """How many of `wanted` boards the next model call may evaluate: all without a deadline, else as many as
    the time left allows; out of time (or stopped): `_OutOfTime`."""
    if self._stop is not None and self._stop():
      raise _OutOfTime
    if self._deadline is None:
      return wanted
    fits = self.evaluator.boards_within(self._deadline - self._clock(), wanted)
    if fits < 1:
      raise _OutOfTime
    return fits

  def _check_time(self, depth: int) -> None:
    """Out of time, stopped or past the node limit (`_OutOfTime`), but never in the iteration of `depth` 1."""
    if depth == 1:
      return
    if (
      (self._deadline is not None and self._clock() >= self._deadline)
      or (self._stop is not None and self._stop())
      or (self.config.nodes is not None and self._nodes >= self.config.nodes)
    ):
      raise _OutOfTime

  def _negamax(
    self,
    work: chess.Board,
    remaining: int,
    alpha: float,
    beta: float,
    ply: int,
    *,
    root_values: np.ndarray | None = None,
    first: int | None = None,
    allowed: list[int] | None = None,
  ) -> tuple[float, list[chess.Move]]:
    """(value for the side to move, principal line) of `work` searched `remaining` plies."""
    self._check_time(remaining + ply)
    self._nodes += 1
    if ply:
      terminal = evaluator_lib.terminal_value(work)
      if terminal is not None:
        return (-(MATE - ply * MATE_STEP) if terminal == -1 else terminal), []
    evaluation = self._evaluation(work)
    scores = evaluation.move_values if evaluation.move_values is not None else evaluation.priors
    order = [int(i) for i in np.argsort(-scores, kind='stable') if allowed is None or i in allowed]
    if remaining == 1:
      mates = [i for i in evaluator_lib.mating_moves(work, evaluation.moves) if i in order]
      if mates:  # The model may not see a mate in one; the search does.
        if root_values is not None:
          root_values[order] = evaluation.move_values[order] if evaluation.move_values is not None else 0.0
          root_values[mates] = MATE - (ply + 1) * MATE_STEP
        return MATE - (ply + 1) * MATE_STEP, [evaluation.moves[mates[0]]]
      best = order[0]
      if root_values is not None:
        root_values[order] = evaluation.move_values[order] if evaluation.move_values is not None else evaluation.value
        return float(root_values[best]), [evaluation.moves[best]]
      return evaluation.value, [evaluation.moves[best]]
    if first is not None:
      order = [first] + [i for i in order if i != first]
    if remaining == 2:  # The children are frontier boards: one model call for all of them.
      children = []
      for move in evaluation.moves:
        work.push(move)
        if evaluator_lib.terminal_value(work) is None:
          children.append(work.copy(stack=False))
        work.pop()
      self._check_time(remaining + ply)
      self._evaluate_many(children)
    best_value, best_line = -np.inf, [evaluation.moves[order[0]]]
    for i in order:
      move = evaluation.moves[i]
      work.push(move)
      try:
        value, line = self._negamax(work, remaining - 1, -beta, -alpha, ply + 1)
      finally:
        work.pop()
      value = -value
      if root_values is not None:
        root_values[i] = value  # Exact when above alpha, else an upper bound.
      if value > best_value:
        best_value, best_line = value, [move] + line
      alpha = max(alpha, value)
      if alpha >= beta:
        break
    return best_value, best_line
