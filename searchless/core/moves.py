"""The 1968-move action vocabulary, in the ChessBench (reference) order.

Order: for each from-square a1..h8, the squares a queen then a knight standing
there attacks on an empty board (castling is a king move of two squares), then
all promotions (rank 2->1 then 7->8; per file: straight, capture left, capture
right; pieces q, r, b, n). The paper says "sorted alphabetically"; the published
code and checkpoints use this order, so we do too.

>>> NUM_ACTIONS
1968
>>> MOVE_TO_ACTION['e2e4'], ACTION_TO_MOVE[0]
(317, 'a1b1')
"""

import chess

from searchless.plumbing import errors

_FILES = 'abcdefgh'


def _all_moves() -> tuple[str, ...]:
  moves = []
  board = chess.BaseBoard.empty()
  for square in chess.SQUARES:
    targets: list[chess.Square] = []
    for piece in (chess.QUEEN, chess.KNIGHT):
      board.set_piece_at(square, chess.Piece(piece, chess.WHITE))
      targets += board.attacks(square)
    board.remove_piece_at(square)
    moves += [chess.square_name(square) + chess.square_name(t) for t in targets]
  for rank, next_rank in (('2', '1'), ('7', '8')):
    for index, file in enumerate(_FILES):
      next_files = [file]
      if index > 0:
        next_files.append(_FILES[index - 1])
      if index < 7:
        next_files.append(_FILES[index + 1])
      for next_file in next_files:
        moves += [f'{file}{rank}{next_file}{next_rank}{p}' for p in 'qrbn']
  return tuple(moves)


ACTION_TO_MOVE: tuple[str, ...] = _all_moves()
MOVE_TO_ACTION: dict[str, int] = {m: i for i, m in enumerate(ACTION_TO_MOVE)}
NUM_ACTIONS = len(ACTION_TO_MOVE)
assert NUM_ACTIONS == len(MOVE_TO_ACTION) == 1968


def move_to_action(move: str) -> int:
  """Returns the action index of a UCI move string, naming it if unknown."""
  try:
    return MOVE_TO_ACTION[move]
  except KeyError:
    raise errors.BadInput(f'{move!r} is not a move of the 1968-move vocabulary') from None
