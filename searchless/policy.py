"""Searchless play from an action-value model: score every legal move, pick the best.

The minimal policy over a checkpoint (ours or a published one); the engines and
the UCI front end build on it.

>>> import chess
>>> from searchless import checkpoint
>>> model_config, params, _ = checkpoint.load_model(PATH)  # doctest: +SKIP
>>> ActionValuePolicy(model_config, params).best_move(chess.Board())  # doctest: +SKIP
'e2e4'
"""

import chess
import jax
import numpy as np

from searchless import model
from searchless import moves
from searchless import tokenizer
from searchless import values


class ActionValuePolicy:
  """Win probability of every legal move in one forward pass; argmax plays."""

  def __init__(self, model_config: model.ModelConfig, params):
    self._params = params
    self._apply = jax.jit(model.build(model_config).apply)
    _, self._centres = values.uniform_buckets(model_config.output_size)

  def action_values(self, board: chess.Board) -> dict[str, float]:
    """{UCI move: expected win probability for the mover} over the legal moves."""
    legal = [m.uci() for m in board.legal_moves]
    if not legal:
      return {}
    state = tokenizer.tokenize(board.fen()).astype(np.int32)  # [77]
    sequences = np.zeros((len(legal), tokenizer.SEQUENCE_LENGTH + 2), np.int32)  # [M, 79]; bucket slot 0.
    sequences[:, :tokenizer.SEQUENCE_LENGTH] = state
    sequences[:, tokenizer.SEQUENCE_LENGTH] = [moves.MOVE_TO_ACTION[m] for m in legal]
    log_probs = np.asarray(self._apply(self._params, None, sequences))[:, -1]  # [M, buckets]
    return dict(zip(legal, np.exp(log_probs) @ self._centres))

  def best_move(self, board: chess.Board) -> str | None:
    scored = self.action_values(board)
    return max(scored, key=scored.get) if scored else None
