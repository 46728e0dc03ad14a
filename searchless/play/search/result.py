"""`SearchResult`: what a search (MCTS or alpha-beta) found at the root of one board."""

import dataclasses

import chess
import numpy as np

MATE = 2.0  # |value| of a proven mate at the root; minus MATE_STEP per ply to it (alpha-beta).
MATE_STEP = 1e-3


@dataclasses.dataclass(frozen=True)
class SearchResult:
  """One search's outcome at the root; arrays follow `moves` (the reference order)."""

  move: chess.Move | None  # The chosen move: MCTS' most visited, alpha-beta's best (None: the game is over).
  moves: tuple[chess.Move, ...]
  visits: np.ndarray  # [M] MCTS: visits of each root move (reused ones included); alpha-beta: 1 for the chosen.
  q: np.ndarray  # [M] each move's value for the side to move (MCTS: mean; alpha-beta: exact for the chosen
  # move, an upper bound for the others).
  priors: np.ndarray  # [M] the model's priors (before root noise).
  value: float  # The root's value for the side to move: the chosen move's; beyond +-1: a proven mate.
  simulations: int  # MCTS: simulations run by this search; alpha-beta: nodes visited.
  evaluations: int  # Boards the model evaluated in this search.
  depth: int  # MCTS: the longest path walked; alpha-beta: the last depth completed.
  pv: tuple[chess.Move, ...]  # The principal line (MCTS: the most visited).
  seconds: float

  @property
  def win_probability(self) -> float:
    """The chosen move's value as a win probability (a proven mate: 1 or 0)."""
    return float(np.clip((self.value + 1) / 2, 0.0, 1.0))

  def visit_distribution(self) -> np.ndarray:
    """[M] the visits as probabilities (AlphaZero's policy target)."""
    total = self.visits.sum()
    return self.visits / total if total else np.full(len(self.moves), 1 / max(len(self.moves), 1))

  def sample(self, temperature: float, rng: np.random.Generator) -> chess.Move | None:
    """A move drawn with probability proportional to visits^(1/temperature) (0: the chosen move)."""
    if not temperature or self.move is None or not self.visits.sum():
      return self.move
    logits = np.log(np.maximum(self.visits, 1e-12)) / temperature
    probs = np.exp(logits - logits.max())
    return self.moves[int(rng.choice(len(probs), p=probs / probs.sum()))]

  def mate_in(self) -> int | None:
    """Full moves to a mate the search proved (negative: the side to move is mated), else None."""
    return mate_in(self.value)


def mate_in(value: float) -> int | None:
  """Full moves to the mate a value beyond +-1 stands for (negative: the side to move is mated), else None.

  >>> mate_in(MATE - 3 * MATE_STEP), mate_in(-(MATE - 2 * MATE_STEP)), mate_in(0.99)
  (2, -1, None)
  """
  if abs(value) <= 1:
    return None
  plies = round((MATE - abs(value)) / MATE_STEP)
  return (plies + 1) // 2 if value > 0 else -((plies + 1) // 2)
