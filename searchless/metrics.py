"""Board-level metrics of value predictions against Stockfish's.

Action-value records of one board (the same FEN) come in a run; `group_boards`
turns decoded records into boards and drops, counting them, boards whose stored
moves are not exactly the legal moves (a partial board would bias every metric).

>>> boards, dropped = group_boards([('7k/8/8/8/8/8/8/K7 w - - 0 1', m, 0.5) for m in ('a1a2', 'a1b1', 'a1b2')])
>>> len(boards), dropped
(1, 0)
>>> action_accuracy([np.array([0.1, 0.9, 0.2])], [np.array([0.4, 0.6, 0.6])])
1.0
"""

from collections.abc import Sequence
from typing import NamedTuple

import chess
import numpy as np
from scipy import stats


class Board(NamedTuple):
  fen: str
  moves: tuple[str, ...]  # UCI, in record order.
  win_probs: np.ndarray  # [M] Stockfish's win probability of each move.
  first_record: int  # Index of the board's first record in the input.


def group_boards(records: Sequence[tuple]) -> tuple[list[Board], int]:
  """(fen, move, win_prob) records -> boards with all their legal moves; and the dropped count."""
  boards, dropped, start = [], 0, 0
  for end in range(1, len(records) + 1):
    if end < len(records) and records[end][0] == records[start][0]:
      continue
    run = records[start:end]
    fen = run[0][0]
    moves = tuple(r[1] for r in run)
    legal = {m.uci() for m in chess.Board(fen).legal_moves}
    if len(set(moves)) == len(moves) and set(moves) == legal:
      boards.append(Board(fen, moves, np.array([r[2] for r in run], np.float64), start))
    else:
      dropped += 1
    start = end
  return boards, dropped


def action_accuracy(predicted: Sequence[np.ndarray], stockfish: Sequence[np.ndarray]) -> float:
  """Fraction of boards whose predicted best move is one of Stockfish's best moves."""
  hits = [target[np.argmax(pred)] == target.max() for pred, target in zip(predicted, stockfish)]
  return float(np.mean(hits)) if hits else float('nan')


def kendall_tau(predicted: Sequence[np.ndarray], stockfish: Sequence[np.ndarray]) -> float:
  """Mean over boards of Kendall's tau-b between predicted and Stockfish values.

  Computed on the values themselves (ties handled by tau-b), not on argsort
  permutations as the reference did. Boards with fewer than two moves, or
  where either side is constant, have no tau and are left out.
  """
  taus = []
  for pred, target in zip(predicted, stockfish):
    if len(pred) > 1 and np.ptp(pred) > 0 and np.ptp(target) > 0:
      taus.append(stats.kendalltau(pred, target, variant='b').statistic)
  return float(np.mean(taus)) if taus else float('nan')
