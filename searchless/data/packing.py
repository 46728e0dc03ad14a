"""Board packing: one board_value record -> one int32 row holding every move of the board.

For ``model.packing='board'`` (`packed`) the training records are
``board_value`` records (`searchless.data.boards`) and a board becomes one row
of ``77 + 2M + 1`` int32 (``M = data.max_moves``): its 77 FEN tokens, M move slots
(the actions of its legal moves in the reference order, -1 in unused slots),
M targets (each move's return bucket, -1 in unused slots) and the board's own
bucket (-1: its best move's). A board with more than M legal moves keeps M of
them, drawn per board and epoch (`packed_rows`); every move is scored at
evaluation, where M covers the largest board.

A partial board (imported labels, ``partial_board_value``: values for some of its legal
moves only) holds every legal move in its slots, the unvalued ones with target -1
(a model sees the whole board; the loss reads the valued moves), and its own value as
the board's bucket. A board is read as partial when its record has fewer moves than
its position has legal moves, whatever file it came from.

>>> board = records.BoardValue('7k/8/8/8/8/8/8/K7 w - - 0 1', ('a1b1', 'a1a2'), (0.5, 0.2), 0.5)
>>> packed_rows([board], 3, values.uniform_buckets(4)[0]).shape  # 77 + 2 * 3 + 1
(1, 84)
"""

from collections.abc import Sequence
from typing import Any, TypeVar

import chess
import jax
import numpy as np

from searchless.core import codecs
from searchless.core import moves
from searchless.core import records
from searchless.core import tokenizer
from searchless.core import values
from searchless.data import sequences
from searchless.model.config import ModelConfig


def packed(config: Any) -> bool:
  """Whether an experiment config trains a per-board model (board_value records): packed or graph."""
  return ModelConfig.from_config(config).packed


def _completed(board: records.BoardValue, position: int) -> tuple[records.BoardValue, np.ndarray] | None:
  """A partial board as every legal move (reference order) with NaN for the unvalued, and which are valued; None
  for a complete board. Raises `codecs.BadRecord` for a valued move that is not legal there."""
  try:
    legal = chess.Board(board.fen).legal_moves
  except ValueError as error:
    raise codecs.BadRecord(position, f'bad FEN {board.fen!r}: {error}') from None
  if legal.count() <= len(board.moves):
    return None
  valued = dict(zip(board.moves, board.win_probs))
  ucis = sorted((m.uci() for m in legal), key=lambda uci: moves.MOVE_TO_ACTION.get(uci, -1))
  if missing := [m for m in valued if m not in set(ucis)]:
    raise codecs.BadRecord(position, f'move {missing[0]!r} is not legal on {board.fen!r}')
  has = np.array([uci in valued for uci in ucis])
  return board._replace(moves=tuple(ucis), win_probs=tuple(valued.get(uci, np.nan) for uci in ucis)), has


def packed_rows(
  boards: Sequence[records.BoardValue],
  max_moves: int,
  return_edges: np.ndarray,
  *,
  indices: Sequence[int] | np.ndarray | None = None,
  epoch: int = 0,
  partial: Sequence[bool] | np.ndarray | None = None,
) -> np.ndarray:
  """Board records -> [B, 77 + 2M + 1] int32 packed rows (FEN, M actions, M buckets, the board's bucket; -1: none).

  A board with more than `max_moves` moves keeps `max_moves` of them (in their
  order), drawn by a generator seeded with (record index, epoch): the same
  rows whatever the workers or processes; a partial board keeps its valued moves
  first. `partial` says which boards may be partial (those of partial_board_value
  bags: the kind says it); None: any, found by generating each board's legal moves
  (most of the cost of a row). Raises `codecs.BadRecord` naming the board.

  >>> board = records.BoardValue('7k/8/8/8/8/8/8/K7 w - - 0 1', ('a1b1', 'a1a2', 'a1b2'), (0.5, 0.2, 0.9), 0.9)
  >>> row = packed_rows([board], 4, values.uniform_buckets(4)[0])[0]
  >>> row[77:81].tolist(), row[81:85].tolist(), int(row[85])  # actions, buckets, the board's (its best move's)
  ([0, 7, 8, -1], [1, 0, 3, -1], -1)
  >>> partial = records.BoardValue('7k/8/8/8/8/8/8/K7 w - - 0 1', ('a1b2',), (0.9,), 0.8)
  >>> row = packed_rows([partial], 4, values.uniform_buckets(4)[0])[0]
  >>> row[77:81].tolist(), row[81:85].tolist(), int(row[85])  # every legal move; one valued; its own value
  ([0, 7, 8, -1], [-1, -1, 3, -1], 3)
  """
  count = len(boards)
  rows = np.full((count, tokenizer.SEQUENCE_LENGTH + 2 * max_moves + 1), -1, dtype=np.int32)  # [B, 77 + 2M + 1]
  rows[:, : tokenizer.SEQUENCE_LENGTH] = sequences.tokenize_fens([b.fen for b in boards])  # [B, 77]
  actions_at, buckets_at = tokenizer.SEQUENCE_LENGTH, tokenizer.SEQUENCE_LENGTH + max_moves
  for position, board in enumerate(boards):
    num = len(board.moves)
    if len(board.win_probs) != num:
      raise codecs.BadRecord(position, f'{num} moves but {len(board.win_probs)} win probabilities')
    codecs.check_win_probs(np.asarray(board.win_probs, np.float64), position)
    completed = _completed(board, position) if partial is None or partial[position] else None
    valued = np.ones(num, bool)
    if completed is not None:
      board, valued = completed
      num = len(board.moves)
      codecs.check_win_probs(np.asarray([board.state_value], np.float64), position)
      rows[position, -1] = values.win_probabilities_to_buckets([board.state_value], return_edges)[0]
    keep = np.arange(num)
    if num > max_moves:
      index = position if indices is None else int(indices[position])
      rng = np.random.default_rng((index, epoch))
      if completed is None:
        keep = np.sort(rng.choice(num, max_moves, replace=False))
      else:  # The valued moves first, then unvalued ones: a random pick of each.
        order = np.concatenate([rng.permutation(np.flatnonzero(valued)), rng.permutation(np.flatnonzero(~valued))])
        keep = np.sort(order[:max_moves])
    actions = [moves.MOVE_TO_ACTION.get(board.moves[i], -1) for i in keep]
    if min(actions, default=0) < 0:
      raise codecs.BadRecord(
        position, f'move {board.moves[keep[actions.index(-1)]]!r} is not a move of the 1968-move vocabulary'
      )
    win_probs = np.asarray(board.win_probs, np.float64)[keep]
    buckets = values.win_probabilities_to_buckets(np.where(valued[keep], win_probs, 0.5), return_edges)
    rows[position, actions_at : actions_at + len(keep)] = actions
    rows[position, buckets_at : buckets_at + len(keep)] = np.where(valued[keep], buckets, -1)
  return rows


_Rows = TypeVar('_Rows', np.ndarray, jax.Array)


def split_packed(rows: _Rows) -> tuple[_Rows, _Rows, _Rows]:
  """Packed rows [B, 77 + 2M + 1] -> (model input [B, 77 + M], bucket targets [B, M] (-1: no move or no
  value), the boards' own buckets [B] (-1: its best move's))."""
  num_moves = (rows.shape[1] - tokenizer.SEQUENCE_LENGTH) // 2
  at = tokenizer.SEQUENCE_LENGTH + num_moves
  return rows[:, :at], rows[:, at : at + num_moves], rows[:, -1]
