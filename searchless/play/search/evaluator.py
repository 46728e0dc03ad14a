"""What a search reads from a model for one board: move priors, each move's value, the board's value.

Values here are in [-1, 1] from the side to move (1: a sure win, 0: even),
AlphaZero's convention; a model's win probability p reads as 2p - 1.

* action-value and state-value checkpoints (packed or not): the model's win
  probability after each legal move gives `move_values`; the priors are their
  softmax at `prior_temperature` (``softmax(p / T)``); the board's value is the
  best move's value (action-value) or the state-value head's own;
* behavioral cloning: the priors are the model's move probabilities; there is no
  value head, so the board's value comes from a second, value checkpoint
  (`value_policy`) or is 0 (a draw) without one: the search then only sees
  checkmates and draws it reaches.

>>> from searchless.play import player
>>> evaluator = Evaluator(player.load_policy('pretrained-transformer', compute_dtype='float32'))
>>> [e] = evaluator.evaluate([chess.Board()])
>>> len(e.moves), round(float(e.priors.sum()), 6), e.moves[int(np.argmax(e.priors))] in chess.Board().legal_moves
(20, 1.0, True)
"""

import collections
import contextlib
import dataclasses
import time
from collections.abc import Callable, Sequence

import chess
import numpy as np

from searchless.play import background_compile
from searchless.play import policy as policy_lib
from searchless.plumbing import errors

DEFAULT_PRIOR_TEMPERATURE = 0.1  # Softmax temperature of win probabilities into priors (value policies).
TIMED_CALLS = 4  # `Evaluator.boards_within` predicts from this many of the latest calls.


@dataclasses.dataclass(frozen=True)
class Evaluation:
  """The model's view of one board, for a search; arrays follow `moves` (the reference order)."""

  moves: tuple[chess.Move, ...]
  priors: np.ndarray  # [M] float64, sums to 1.
  move_values: np.ndarray | None  # [M] the mover's value after each move, in [-1, 1]; None: BC.
  value: float  # The board's value for the side to move, in [-1, 1].


class Evaluator:
  """Turns a `Policy`'s analyses into `Evaluation`s; counts the boards it evaluates and times its calls
  (`clock`; not a call that compiled a shape, counted in `compile_seconds`), so that a timed search sizes its
  model calls to the time it has left (`boards_within`)."""

  def __init__(
    self,
    policy: policy_lib.Policy,
    *,
    prior_temperature: float = DEFAULT_PRIOR_TEMPERATURE,
    value_policy: policy_lib.Policy | None = None,
    clock: Callable[[], float] = time.perf_counter,
  ):
    if prior_temperature <= 0:
      raise errors.BadInput(f'prior_temperature must be > 0, got {prior_temperature}')
    if value_policy is not None and value_policy.kind == policy_lib.BEHAVIORAL_CLONING:
      raise errors.BadInput('the value checkpoint must be an action-value or state-value one, not behavioral cloning')
    self.policy = policy
    self.value_policy = value_policy
    self.prior_temperature = prior_temperature
    self.boards_evaluated = 0
    self.compile_seconds = 0.0  # The time of the calls that compiled a shape (a search leaves its root's out).
    self._clock = clock
    self._calls: collections.deque[tuple[int, float]] = collections.deque(maxlen=TIMED_CALLS)  # (boards, seconds).

  def boards_within(self, seconds: float, wanted: int) -> int:
    """How many of `wanted` boards one call evaluates within `seconds`, by the latest calls (0: not even one).

    A call of k boards is predicted to take k times the most any recent call took per board, and no less
    than the quickest recent call (its fixed cost); before any call, `wanted` when there is time left at all.
    """
    if seconds <= 0:
      return 0
    if not self._calls:
      return wanted
    per_board = max(t / k for k, t in self._calls)
    fixed = min(t for _, t in self._calls)
    if fixed > seconds:
      return 0
    return max(0, min(wanted, int(seconds / per_board)))

  @property
  def has_values(self) -> bool:
    """Whether boards get a model value (else every non-terminal board reads as a draw)."""
    return self.policy.kind != policy_lib.BEHAVIORAL_CLONING or self.value_policy is not None

  def warm_up(self, max_boards: int = 16, *, background: bool = False) -> None:
    """Compiles the shapes of calls of up to `max_boards` boards (a search's batch size) before the first move
    (`background`: one now, the others on a worker thread)."""
    self.policy.warm_up(max_boards, background=background)
    if self.value_policy is not None:
      self.value_policy.warm_up(max_boards, background=background)

  def evaluate(
    self, boards: Sequence[chess.Board], *, compiled_only: bool = False, seconds_left: float | None = None
  ) -> list[Evaluation]:
    """One `Evaluation` per board (each must have a legal move), in shared model calls. `compiled_only` (a timed
    search, `seconds_left` before its end): calls run on compiled shapes only, but for a shape whose measured
    compile cost fits in `seconds_left` (it compiles now); one that would compile otherwise raises
    `background_compile.NotCompiled` (the search ends with what it has; the worker compiles that shape next)."""
    if not boards:
      return []
    start, compiled = self._clock(), self._compiled()
    deadline = None if seconds_left is None else time.monotonic() + seconds_left
    with background_compile.compiled_only(deadline) if compiled_only else contextlib.nullcontext():
      analyses = self.policy.analyse_many(boards)
      own_values: list[float | None] = [a.value for a in analyses]
      if self.value_policy is not None:
        own_values = [a.value for a in self.value_policy.analyse_many(boards)]
    self.boards_evaluated += len(boards)
    results = []
    for analysis, own in zip(analyses, own_values):
      if analysis.win_probs is None:  # Behavioral cloning: its probabilities are the priors.
        priors = np.exp(np.asarray(analysis.log_probs, np.float64))
        move_values = None
      else:
        win_probs = np.asarray(analysis.win_probs, np.float64)
        logits = win_probs / self.prior_temperature
        priors = np.exp(logits - logits.max())
        move_values = 2 * win_probs - 1
      results.append(
        Evaluation(analysis.moves, priors / priors.sum(), move_values, 0.0 if own is None else 2 * float(own) - 1)
      )
    if self._compiled() == compiled:  # A call that compiled a shape says nothing of the next ones' time.
      self._calls.append((len(boards), self._clock() - start))
    else:
      self.compile_seconds += self._clock() - start
    return results

  def _compiled(self) -> int:
    """How many input shapes the policies' predictors have compiled (`searchless.play.background_compile`)."""
    shapes = [getattr(getattr(p, 'predictor', None), 'shapes', None) for p in (self.policy, self.value_policy)]
    return sum(len(s.ready) for s in shapes if s is not None)


def terminal_value(board: chess.Board, *, at_root: bool = False) -> float | None:
  """The value of a finished game for the side to move (-1: checkmated, 0: drawn), else None.

  A draw is a stalemate, insufficient material, the fifty-move rule, or (below
  the root) a position that occurred before: returning to it is a draw the
  opponent can claim or repeat, so searches treat it as one.

  >>> terminal_value(chess.Board('7k/6Q1/6K1/8/8/8/8/8 b - - 0 1'))
  -1.0
  >>> terminal_value(chess.Board()) is None
  True
  """
  if board.is_checkmate():
    return -1.0
  if (
    board.is_stalemate()
    or board.is_insufficient_material()
    or board.halfmove_clock >= 100
    or (not at_root and board.is_repetition(2))
  ):
    return 0.0
  return None


def mating_moves(board: chess.Board, moves: Sequence[chess.Move]) -> list[int]:
  """The indices of the `moves` that checkmate (a model can be blind to a mate in one).

  >>> board = chess.Board('6k1/5ppp/8/8/8/8/5PPP/3R2K1 w - - 0 1')
  >>> moves = list(board.legal_moves)
  >>> [moves[i].uci() for i in mating_moves(board, moves)]
  ['d1d8']
  """
  found = []
  for i, move in enumerate(moves):
    if board.gives_check(move):
      board.push(move)
      if board.is_checkmate():
        found.append(i)
      board.pop()
  return found
