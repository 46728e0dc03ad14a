"""Board packing: one board_value record -> one int32 row holding every move of the board.

For ``model.packing='board'`` (`packed`) the training records are
``board_value`` records (`searchless.data.boards`) and a board becomes one row
of ``77 + 2M`` int32 (``M = data.max_moves``): its 77 FEN tokens, M move slots
(the actions of its legal moves in the reference order, -1 in unused slots)
and M targets (each move's return bucket, -1 in unused slots). A board with
more than M legal moves keeps M of them, drawn per board and epoch
(`packed_rows`); every move is scored at evaluation, where M covers the
largest board.

>>> board = records.BoardValue('7k/8/8/8/8/8/8/K7 w - - 0 1', ('a1b1', 'a1a2'), (0.5, 0.2), 0.5)
>>> packed_rows([board], 3, values.uniform_buckets(4)[0]).shape  # 77 + 2 * 3
(1, 83)
"""

from collections.abc import Sequence
from typing import Any, TypeVar

import jax
import numpy as np

from searchless.core import codecs
from searchless.core import moves
from searchless.core import records
from searchless.core import tokenizer
from searchless.core import values
from searchless.data import sequences


def packed(config: Any) -> bool:
  """Whether an experiment config trains a per-board model (board_value records): packed or graph."""
  return config.model.get('packing', 'none') == 'board' or config.model.get('kind', 'transformer') == 'graph'


def packed_rows(boards: Sequence[records.BoardValue], max_moves: int, return_edges: np.ndarray, *,
                indices: Sequence[int] | np.ndarray | None = None, epoch: int = 0) -> np.ndarray:
  """Board records -> [B, 77 + 2M] int32 packed rows (FEN, M actions, M buckets; -1 = no move).

  A board with more than `max_moves` moves keeps `max_moves` of them (in their
  order), drawn by a generator seeded with (record index, epoch): the same
  rows whatever the workers or processes. Raises `codecs.BadRecord` naming the board.

  >>> board = records.BoardValue('7k/8/8/8/8/8/8/K7 w - - 0 1', ('a1b1', 'a1a2', 'a1b2'), (0.5, 0.2, 0.9), 0.9)
  >>> row = packed_rows([board], 4, values.uniform_buckets(4)[0])[0]
  >>> row[77:81].tolist(), row[81:].tolist()  # actions, buckets
  ([0, 7, 8, -1], [1, 0, 3, -1])
  """
  count = len(boards)
  rows = np.full((count, tokenizer.SEQUENCE_LENGTH + 2 * max_moves), -1, dtype=np.int32)  # [B, 77 + 2M]
  rows[:, :tokenizer.SEQUENCE_LENGTH] = sequences.tokenize_fens([b.fen for b in boards])  # [B, 77]
  actions_at, buckets_at = tokenizer.SEQUENCE_LENGTH, tokenizer.SEQUENCE_LENGTH + max_moves
  for position, board in enumerate(boards):
    num = len(board.moves)
    if len(board.win_probs) != num:
      raise codecs.BadRecord(position, f'{num} moves but {len(board.win_probs)} win probabilities')
    keep = np.arange(num)
    if num > max_moves:
      index = position if indices is None else int(indices[position])
      keep = np.sort(np.random.default_rng((index, epoch)).choice(num, max_moves, replace=False))
    actions = [moves.MOVE_TO_ACTION.get(board.moves[i], -1) for i in keep]
    if min(actions, default=0) < 0:
      raise codecs.BadRecord(
          position, f'move {board.moves[keep[actions.index(-1)]]!r} is not a move of the 1968-move vocabulary')
    win_probs = np.asarray(board.win_probs, np.float64)[keep]
    codecs.check_win_probs(win_probs, position)
    rows[position, actions_at:actions_at + len(keep)] = actions
    rows[position, buckets_at:buckets_at + len(keep)] = values.win_probabilities_to_buckets(win_probs, return_edges)
  return rows


_Rows = TypeVar('_Rows', np.ndarray, jax.Array)


def split_packed(rows: _Rows) -> tuple[_Rows, _Rows]:
  """Packed rows [B, 77 + 2M] -> (model input [B, 77 + M], bucket targets [B, M], -1 = no move)."""
  num_moves = (rows.shape[1] - tokenizer.SEQUENCE_LENGTH) // 2
  return rows[:, :tokenizer.SEQUENCE_LENGTH + num_moves], rows[:, tokenizer.SEQUENCE_LENGTH + num_moves:]
