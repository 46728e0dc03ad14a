"""A game's review by the model, as Lichess's analysis board gives it: each move's win% before and after, the
model's best move, the mark (``?!`` ``?`` ``??``), and each player's accuracy by Lichess's published formula.

This is the one implementation: the serve page (``POST /v1/review``), ``searchless-review`` and its Beam job all
call `review`. What it needs of the model is, for each position of the game, a `PositionView`: the mover's win
probability, the model's best move and the mover's win probability after the move the game played there
(`view_of` makes one from a policy's `Analysis`, `view_of_answer` from the server's JSON answer).

Accuracy (lichess.org/page/accuracy; lila's ``AccuracyPercent.scala``), on the model's win% (0-100):

* per move, ``103.1668100711649 * exp(-0.04354415386753951 * (before - after)) - 3.166924740191411``, plus 1
  (Lichess's "uncertainty bonus"), within [0, 100]; 100 when ``after >= before``;
* per player, the mean of a volatility-weighted mean and the harmonic mean of their moves' accuracies. The weight
  of move k is the standard deviation (population) of White's win% over a window of positions, clamped to
  [0.5, 12]; windows are ``clamp(moves / 10, 2, 8)`` positions long, sliding one position a move, the first ones
  repeating the first window (as lila does); the harmonic mean counts an accuracy under 1 as 1.

The one adaptation: Lichess takes a move's ``before`` and ``after`` from the evaluations of the positions before
and after it. Here both come from the model's analysis of the position before it (``before``: the position's value;
``after``: the played move's win probability there): a move's loss is then what the model thinks of that move,
never a disagreement of the model with itself between two positions, and the model's best move is never marked
(an action-value model's value is its best move's win probability). The volatility windows read the positions'
values, as Lichess reads its evaluations.

Marks are the page's: the mover's win probability drops by 0.05 (inaccuracy), 0.10 (mistake), 0.15 (blunder):
Lichess's 0.1, 0.2, 0.3 on winning chances (-1..1). Win probabilities are rounded to `DIGITS` decimals first, so a
record's numbers give its marks again.

>>> import chess
>>> views = [PositionView(0.6, 'e2e4', 0.6), PositionView(0.45, 'e7e5', 0.3), PositionView(0.7, 'g1f3', None)]
>>> game = review(chess.STARTING_FEN, ['e2e4', 'd7d5'], views)
>>> [(m['san'], m['drop'], m['mark'], m['accuracy']) for m in game['moves']]
[('e4', 0.0, None, 100.0), ('d5', 0.15, 'blunder', 51.52)]
>>> game['players']['black']['blunder'], game['players']['white']['accuracy']
(1, 100.0)
"""

from collections.abc import Sequence
import dataclasses
import math
from typing import Any

import chess

from searchless.play import policy as policy_lib

DIGITS = 6  # Win probabilities are rounded to this many decimals (as the server's answers).
# (name, sign, drop of the mover's win probability from which a move gets it), worst first.
MARKS = (('blunder', '??', 0.15), ('mistake', '?', 0.10), ('inaccuracy', '?!', 0.05))
MARK_NAMES = tuple(name for name, _, _ in MARKS)
# Lichess's fit of accuracy to the win% lost (lila's AccuracyPercent.fromWinPercents).
_A, _K, _B, _BONUS = 103.1668100711649, 0.04354415386753951, -3.166924740191411, 1.0


@dataclasses.dataclass(frozen=True)
class PositionView:
  """What the review needs of the model's analysis of one position of a game."""

  value: float  # The mover's win probability (0..1).
  best: str | None  # The model's best move (UCI); None where the game is over.
  played: float | None  # The mover's win probability after the move the game played here; None after the last.


def terminal_view(board: chess.Board) -> PositionView:
  """The view of a position without legal moves: lost when mated, else drawn (as the server answers it)."""
  return PositionView(0.0 if board.is_checkmate() else 0.5, None, None)


def view_of(analysis: policy_lib.Analysis, played: chess.Move | None) -> PositionView:
  """The view of a position from a policy's analysis of it; `played`: the game's move from it (None: none)."""
  if analysis.win_probs is None or analysis.value is None:
    raise ValueError('a review needs win probabilities: a behavioral-cloning policy predicts moves, not values')
  index = analysis.moves.index(played) if played is not None else None
  best = analysis.best_move()
  return PositionView(
    float(analysis.value),
    None if best is None else best.uci(),
    None if index is None else float(analysis.win_probs[index]),
  )


def views(
  policy: policy_lib.Policy, boards: Sequence[chess.Board], played: Sequence[chess.Move | None]
) -> list[PositionView]:
  """The views of `boards` (`played[k]`: the game's move from board k, or None) from one `analyse_many` call of
  `policy`; a board without legal moves gets `terminal_view`."""
  legal = [list(board.legal_moves) for board in boards]
  live = [i for i, moves in enumerate(legal) if moves]
  analyses = iter(policy.analyse_many([boards[i] for i in live], [legal[i] for i in live]) if live else [])
  return [
    view_of(next(analyses), move) if moves else terminal_view(board)
    for board, moves, move in zip(boards, legal, played)
  ]


def replay(board: chess.Board) -> tuple[list[chess.Board], list[str]]:
  """The positions of the game that led to `board` (its root first, `board` last) and its moves in standard UCI
  (castling given as king-takes-rook, ``e1h1``, is ``e1g1``).

  >>> board = chess.Board('r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1')
  >>> board.push(chess.Move.from_uci('e1h1'))
  >>> [b.fen().split()[0] for b in replay(board)[0]], replay(board)[1]
  (['r3k2r/8/8/8/8/8/8/R3K2R', 'r3k2r/8/8/8/8/8/8/R4RK1'], ['e1g1'])
  """
  position = board.root()
  boards, moves = [position.copy(stack=False)], []
  for move in board.move_stack:
    moves.append(position.parse_san(position.san(move)).uci())
    position.push(move)
    boards.append(position.copy(stack=False))
  return boards, moves


def view_of_answer(answer: dict[str, Any], played: str | None) -> PositionView:
  """The view of a position from the server's answer (`searchless.play.serve.service.describe`)."""
  if answer['value'] is None:
    raise ValueError('a review needs win probabilities: a behavioral-cloning policy predicts moves, not values')
  win = None if played is None else next(m['win'] for m in answer['moves'] if m['uci'] == played)
  best = answer['best']
  return PositionView(answer['value'], None if best is None else best['uci'], win)


def _round(p: float) -> float:
  return round(float(p), DIGITS)


def mark(drop: float) -> str | None:
  """The mark of a move whose mover's win probability drops by `drop` (rounded), or None.

  >>> [mark(d) for d in (0.049999, 0.05, 0.1, 0.149999, 0.15, 1.0)]
  [None, 'inaccuracy', 'mistake', 'mistake', 'blunder', 'blunder']
  """
  return next((name for name, _, threshold in MARKS if drop >= threshold), None)


def move_accuracy(before: float, after: float) -> float:
  """Lichess's accuracy (0-100) of a move that takes the mover's win% (0-100) from `before` to `after`.

  >>> move_accuracy(50, 50), round(move_accuracy(50, 40), 4), move_accuracy(100, 0)
  (100.0, 64.5798, 0.0)
  """
  if after >= before:
    return 100.0
  return min(100.0, max(0.0, _A * math.exp(-_K * (before - after)) + _B + _BONUS))


def _std(values: Sequence[float]) -> float:
  mean = sum(values) / len(values)
  return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def volatility_weights(white_win_percents: Sequence[float]) -> list[float]:
  """Each move's weight (lila's gameAccuracy): the clamped standard deviation of White's win% (0-100) over the
  window of positions it falls in; `white_win_percents` has one value per position, the start's first.

  >>> volatility_weights([50, 50, 50])
  [0.5, 0.5]
  """
  moves = len(white_win_percents) - 1
  size = min(8, max(2, moves // 10))
  values = list(white_win_percents)
  first = [values[:size]] * max(0, min(size, len(values)) - 2)
  sliding = [values[i : i + size] for i in range(max(1, len(values) - size + 1))]
  return [min(12.0, max(0.5, _std(w))) for w in first + sliding][:moves]


def player_accuracy(accuracies: Sequence[float], weights: Sequence[float]) -> float | None:
  """A player's game accuracy (0-100): the mean of the weighted mean and the harmonic mean; None without moves."""
  if not accuracies:
    return None
  weighted = sum(a * w for a, w in zip(accuracies, weights)) / sum(weights)
  harmonic = len(accuracies) / sum(1 / max(1.0, a) for a in accuracies)
  return (weighted + harmonic) / 2


def review(start_fen: str, moves: Sequence[str], views: Sequence[PositionView]) -> dict[str, Any]:
  """The review of the game played from `start_fen` with `moves` (UCI); `views[k]`: the model's view of the
  position after k moves (``len(moves) + 1`` of them). Returns ``{'moves': [...], 'players': {'white': ...,
  'black': ...}}``: per move its ply, colour, UCI, SAN, the mover's win probability before and after, the drop,
  the model's best move (UCI, SAN), Lichess's accuracy and the mark; per player the accuracy (two decimals; None
  without moves), the moves and the count of each mark."""
  if len(views) != len(moves) + 1:
    raise ValueError(f'review: {len(views)} position views for {len(moves)} moves (expected {len(moves) + 1})')
  board = chess.Board(start_fen)
  white_percents: list[float] = []
  reviewed: list[dict[str, Any]] = []
  exact: list[float] = []  # Each move's accuracy, unrounded.
  for ply, (uci, view) in enumerate(zip([*moves, None], views)):
    value = _round(view.value)
    white_percents.append(100 * (value if board.turn == chess.WHITE else 1 - value))
    if uci is None:
      break
    if view.played is None:
      raise ValueError(f'review: no win probability for the played move {uci} at ply {ply}')
    move = chess.Move.from_uci(uci)
    after = _round(view.played)
    drop = _round(max(0.0, value - after))
    accuracy = move_accuracy(100 * value, 100 * after)
    exact.append(accuracy)
    best = None
    if view.best is not None:
      best = {'uci': view.best, 'san': board.san(chess.Move.from_uci(view.best))}
    reviewed.append(
      {
        'ply': ply + 1,
        'color': chess.COLOR_NAMES[board.turn],
        'uci': uci,
        'san': board.san(move),
        'win_before': value,
        'win_after': after,
        'drop': drop,
        'best': best,
        'accuracy': round(accuracy, 2),
        'mark': mark(drop),
      }
    )
    board.push(move)
  weights = volatility_weights(white_percents)
  players = {}
  for color in chess.COLOR_NAMES[::-1]:  # white, black
    own = [(i, m) for i, m in enumerate(reviewed) if m['color'] == color]
    overall = player_accuracy([exact[i] for i, _ in own], [weights[i] for i, _ in own])
    players[color] = {
      'accuracy': None if overall is None else round(overall, 2),
      'moves': len(own),
      **{name: sum(m['mark'] == name for _, m in own) for name in MARK_NAMES},
    }
  return {'moves': reviewed, 'players': players}
