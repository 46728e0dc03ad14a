"""Engine scores -> win probabilities -> value buckets, as in ChessBench.

Win probabilities are from the point of view of the side to move. Centipawns use
Lichess' logistic fit; a forced mate maps to 1.0 (the mover mates) or 0.0.

>>> centipawns_to_win_probability(0)
0.5
>>> round(centipawns_to_win_probability(100), 6)
0.591026
>>> edges, values = uniform_buckets(4)
>>> edges.tolist(), values.tolist()
([0.25, 0.5, 0.75], [0.125, 0.375, 0.625, 0.875])
>>> win_probabilities_to_buckets([0.0, 0.25, 0.26, 1.0], edges).tolist()
[0, 0, 1, 3]
"""

import math

from collections.abc import Sequence

import chess.engine
import numpy as np

# Lichess' fit of win probability against centipawns (lichess.org/page/accuracy).
_LOGISTIC_SCALE = 0.00368208


def centipawns_to_win_probability(centipawns: float) -> float:
  """Returns the win probability in [0, 1] of a centipawn score (reference formula)."""
  return 0.5 + 0.5 * (2 / (1 + math.exp(-_LOGISTIC_SCALE * centipawns)) - 1)


def score_to_win_probability(score: chess.engine.Score) -> float:
  """Returns the win probability of an engine score from the mover's view.

  >>> score_to_win_probability(chess.engine.Mate(1))
  1.0
  >>> score_to_win_probability(chess.engine.Mate(-3))
  0.0
  >>> score_to_win_probability(chess.engine.MateGiven)
  1.0
  """
  centipawns = score.score()  # None exactly for mate scores.
  if centipawns is None:
    return 1.0 if score > chess.engine.Cp(0) else 0.0
  return centipawns_to_win_probability(centipawns)


def win_probability_to_centipawns(win_prob: float, clip: int = 10_000) -> int:
  """Inverts `centipawns_to_win_probability` (clipped), e.g. for UCI `info score cp`.

  >>> win_probability_to_centipawns(0.5910258971916128)
  100
  """
  if win_prob >= 1.0:
    return clip
  if win_prob <= 0.0:
    return -clip
  centipawns = -math.log(1 / win_prob - 1) / _LOGISTIC_SCALE
  return int(round(min(max(centipawns, -clip), clip)))


def uniform_buckets(num_buckets: int) -> tuple[np.ndarray, np.ndarray]:
  """Returns (edges [num_buckets-1], centre values [num_buckets]) of [0, 1].

  `num_buckets` is a model's (its config's ``num_return_buckets``; the paper: 128).

  >>> edges, centres = uniform_buckets(4)
  >>> edges.tolist(), centres.tolist()
  ([0.25, 0.5, 0.75], [0.125, 0.375, 0.625, 0.875])
  """
  if num_buckets < 2:
    raise ValueError(f'num_buckets must be at least 2, got {num_buckets}')
  full = np.linspace(0.0, 1.0, num_buckets + 1)
  return full[1:-1], (full[:-1] + full[1:]) / 2


def win_probabilities_to_buckets(win_probs: Sequence[float] | np.ndarray, edges: np.ndarray) -> np.ndarray:
  """Returns the bucket index of each win probability; ties go to the lower bucket."""
  return np.searchsorted(edges, np.asarray(win_probs), side='left')
