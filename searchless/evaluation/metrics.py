"""Board-level metrics of a policy against Stockfish, as the paper defines them.

Action-value test records (fen, move, win_prob) are grouped into boards by FEN;
a board whose stored moves are not exactly its legal moves is dropped and
counted (a partial board would bias every metric). Moves are put in the
reference order (by action index), so per-board arrays line up with a policy's
`Analysis`.

Per board (`board_metrics`), for the action-value (AV), state-value (SV) and
behavioral-cloning (BC) policies, following the reference evaluator:

* ``action_accuracy``: the policy's best move is one of Stockfish's best moves;
* ``kendall_tau``: Kendall's tau-b between the policy's move values (AV, SV:
  win probabilities; BC: move probabilities) and Stockfish's, computed on the
  VALUES with ties handled. Undefined (left out of the mean) when a board has
  one move or either side is constant;
* ``kendall_tau_reference_argsort``: what the reference computed instead -
  tau between ``argsort`` of the two value vectors (1.0 for one-move boards);
  reported only to compare with the paper's numbers, it is not a rank
  correlation of the values;
* ``log_loss`` (bits): AV/SV: mean over moves of -log2 p(Stockfish's bucket);
  BC: -log2 p(Stockfish's best move);
* ``l2_win_prob``: AV/SV: mean over moves of (predicted - Stockfish win prob)^2;
* ``entropy`` (bits): AV/SV: mean over moves of the bucket distribution's
  entropy; BC: the entropy of the move distribution;
* ``consistency`` (SV): (board value - best next-board value)^2.

>>> boards, dropped = group_boards([('7k/8/8/8/8/8/8/K7 w - - 0 1', m, 0.5) for m in ('a1a2', 'a1b1', 'a1b2')])
>>> len(boards), dropped
(1, 0)
>>> action_accuracy([np.array([0.1, 0.9, 0.2])], [np.array([0.4, 0.6, 0.6])])
1.0
>>> round(kendall_tau_b(np.array([0.1, 0.2, 0.3]), np.array([0.5, 0.5, 0.9])), 4)
0.8165
"""

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from scipy import stats

from searchless.data import boards as boards_lib
from searchless.core import moves as moves_lib
from searchless.core import values

AV, SV, BC = 'action_value', 'state_value', 'behavioral_cloning'
METRICS = (
  'action_accuracy',
  'kendall_tau',
  'kendall_tau_reference_argsort',
  'log_loss',
  'l2_win_prob',
  'entropy',
  'consistency',
)


class Board(NamedTuple):
  fen: str
  moves: tuple[str, ...]  # UCI, in the reference order (by action index).
  win_probs: np.ndarray  # [M] Stockfish's win probability of each move.
  records: np.ndarray  # [M] index of each move's record in the input.


def group_boards(records: Sequence[tuple]) -> tuple[list[Board], int]:
  """(fen, move, win_prob) records -> complete boards (first-seen order), and the dropped count.

  A board is dropped when its moves are not exactly its legal moves (missing,
  extra or repeated moves; or an illegal FEN).
  """
  by_fen: dict[str, list[int]] = {}
  for i, record in enumerate(records):
    by_fen.setdefault(record[0], []).append(i)
  boards, dropped = [], 0
  for fen, indices in by_fen.items():
    moves = [records[i][1] for i in indices]
    if boards_lib.mismatch(fen, moves) is not None:
      dropped += 1
      continue
    order = sorted(range(len(indices)), key=lambda k: moves_lib.MOVE_TO_ACTION[moves[k]])
    boards.append(
      Board(
        fen,
        tuple(moves[k] for k in order),
        np.array([records[indices[k]][2] for k in order], np.float64),
        np.array([indices[k] for k in order], np.int64),
      )
    )
  return boards, dropped


def action_accuracy(predicted: Sequence[np.ndarray], stockfish: Sequence[np.ndarray]) -> float:
  """Fraction of boards whose predicted best move is one of Stockfish's best moves."""
  hits = [target[np.argmax(pred)] == target.max() for pred, target in zip(predicted, stockfish)]
  return float(np.mean(hits)) if hits else float('nan')


def kendall_tau_b(predicted: np.ndarray, stockfish: np.ndarray) -> float:
  """Tau-b between two value vectors of one board; nan if undefined."""
  if len(predicted) < 2 or np.ptp(predicted) == 0 or np.ptp(stockfish) == 0:
    return float('nan')
  return float(stats.kendalltau(predicted, stockfish, variant='b').statistic)


def kendall_tau(predicted: Sequence[np.ndarray], stockfish: Sequence[np.ndarray]) -> float:
  """Mean over boards of `kendall_tau_b` (on the values), boards where it is defined."""
  taus = [kendall_tau_b(p, s) for p, s in zip(predicted, stockfish)]
  taus = [t for t in taus if not math.isnan(t)]
  return float(np.mean(taus)) if taus else float('nan')


def kendall_tau_reference_argsort(predicted: np.ndarray, stockfish: np.ndarray) -> float:
  """The reference's per-board number: tau of argsort permutations (1.0 for one move)."""
  if len(predicted) == 1:
    return 1.0
  return float(stats.kendalltau(np.argsort(predicted), np.argsort(stockfish)).statistic)


def board_metrics(
  kind: str, log_probs: np.ndarray, stockfish: np.ndarray, *, value: float | None = None
) -> dict[str, float]:
  """The metrics of one board.

  Args:
    kind: AV, SV or BC.
    log_probs: AV/SV: [M, K] bucket log-probs of each move's value from the
      mover's view; BC: [M] log-probs of the legal moves. Moves in the
      reference order, as `stockfish`.
    stockfish: [M] Stockfish's win probability of each move.
    value: SV only, the board's own predicted win probability.
  """
  log_probs = np.asarray(log_probs, np.float64)
  probs = np.exp(log_probs)
  if kind == BC:
    predicted = probs  # [M]
    result = {
      'log_loss': float(-log_probs[np.argmax(stockfish)] / math.log(2)),
      'entropy': float(-(probs * log_probs).sum() / math.log(2)),
    }
  elif kind in (AV, SV):
    num_buckets = log_probs.shape[-1]
    edges, centres = values.uniform_buckets(num_buckets)
    predicted = probs @ centres  # [M]
    buckets = values.win_probabilities_to_buckets(stockfish, edges)  # [M]
    result = {
      'log_loss': float(-np.take_along_axis(log_probs, buckets[:, None], -1).mean() / math.log(2)),
      'l2_win_prob': float(((predicted - stockfish) ** 2).mean()),
      'entropy': float(-(probs * log_probs).sum(-1).mean() / math.log(2)),
    }
    if kind == SV:
      if value is None:
        raise ValueError('state-value metrics need the board value')
      result['consistency'] = float((value - predicted.max()) ** 2)
  else:
    raise ValueError(f'unknown policy kind {kind!r}')
  result['action_accuracy'] = float(stockfish[np.argmax(predicted)] == stockfish.max())
  result['kendall_tau'] = kendall_tau_b(predicted, stockfish)
  result['kendall_tau_reference_argsort'] = kendall_tau_reference_argsort(predicted, stockfish)
  return result


def summarise(per_board: Sequence[dict[str, float]]) -> dict[str, float]:
  """Means over boards (nan entries left out); `kendall_tau_boards` counts tau's boards."""
  summary = {}
  for name in METRICS:
    column = [m[name] for m in per_board if name in m and not math.isnan(m[name])]
    if column:
      summary[name] = float(np.mean(column))
  summary['boards'] = len(per_board)
  summary['kendall_tau_boards'] = sum(1 for m in per_board if not math.isnan(m.get('kendall_tau', math.nan)))
  return summary


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
  """95% Wilson interval of a proportion k/n.

  >>> [round(x, 4) for x in wilson(12, 1500)]
  [0.0046, 0.0139]
  """
  p = k / n
  centre, half = (
    (p + z * z / (2 * n)) / (1 + z * z / n),
    z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n),
  )
  return centre - half, centre + half
