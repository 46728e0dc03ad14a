"""Every legal move of a board in SAN at once: python-chess's `Board.san`, character for character, and faster.

`Board.san` pushes each move to look for check and searches the legal moves again to
disambiguate it (14 us a move on 2 cores: 0.45 ms for a position's 33 moves, the most a
served answer spends in Python). Here the legal moves are generated once: a move's
rivals (the same piece type to the same square) come from that list, and check is read
from the attacks on the other king after the move, without pushing it. Only a move that
gives check is pushed, to tell mate (``#``) from check (``+``).

>>> board = chess.Board('6k1/8/8/8/R6R/8/1N3N2/4K3 w - - 0 1')
>>> names = all_san(board)
>>> [names[chess.Move.from_uci(m)] for m in ('a4d4', 'b2d3', 'h4g4', 'a4a8', 'e1f1')]
['Rad4', 'Nbd3', 'Rhg4+', 'Ra8+', 'Kf1']
>>> all(names[move] == board.san(move) for move in board.legal_moves)
True
"""

import collections

import chess


def _attacked(color: chess.Color, square: chess.Square, occupied: int, pieces: dict[int, int]) -> bool:
  """Whether `color`'s `pieces` (piece type -> bitboard, after a move) attack `square` with `occupied` squares."""
  return bool(
    chess.BB_KNIGHT_ATTACKS[square] & pieces[chess.KNIGHT]
    or chess.BB_KING_ATTACKS[square] & pieces[chess.KING]
    or chess.BB_PAWN_ATTACKS[not color][square] & pieces[chess.PAWN]
    or chess.BB_DIAG_ATTACKS[square][chess.BB_DIAG_MASKS[square] & occupied]
    & (pieces[chess.BISHOP] | pieces[chess.QUEEN])
    or (
      (
        chess.BB_RANK_ATTACKS[square][chess.BB_RANK_MASKS[square] & occupied]
        | chess.BB_FILE_ATTACKS[square][chess.BB_FILE_MASKS[square] & occupied]
      )
      & (pieces[chess.ROOK] | pieces[chess.QUEEN])
    )
  )


def _mover(board: chess.Board, move: chess.Move) -> chess.PieceType:
  """The type of the piece `move` moves (a legal move has one)."""
  kind = board.piece_type_at(move.from_square)
  if kind is None:
    raise ValueError(f'{move.uci()} moves no piece on {board.fen()}')
  return kind


def _gives_check(board: chess.Board, move: chess.Move, king: chess.Square) -> bool:
  """Whether legal `move` leaves the mover attacking the other side's `king` square (castling and en passant too)."""
  us = board.turn
  moved = _mover(board, move)
  pieces = {kind: board.pieces_mask(kind, us) for kind in chess.PIECE_TYPES}
  occupied = board.occupied
  if board.is_castling(move):  # The king to the c- or g-file, its rook beside it on the inside.
    rank = chess.square_rank(move.from_square)
    queen_side = chess.square_file(move.to_square) < chess.square_file(move.from_square)
    if board.piece_type_at(move.to_square) == chess.ROOK and board.color_at(move.to_square) == us:
      rook_from = move.to_square  # King takes rook (Chess960).
    else:
      rook_from = chess.square(0 if queen_side else 7, rank)
    king_to, rook_to = (chess.square(2 if queen_side else 6, rank), chess.square(3 if queen_side else 5, rank))
    pieces[chess.KING] = chess.BB_SQUARES[king_to]
    pieces[chess.ROOK] = (pieces[chess.ROOK] & ~chess.BB_SQUARES[rook_from]) | chess.BB_SQUARES[rook_to]
    occupied &= ~(chess.BB_SQUARES[move.from_square] | chess.BB_SQUARES[rook_from])
    occupied |= chess.BB_SQUARES[king_to] | chess.BB_SQUARES[rook_to]
    return _attacked(us, king, occupied, pieces)
  pieces[moved] &= ~chess.BB_SQUARES[move.from_square]
  pieces[move.promotion or moved] |= chess.BB_SQUARES[move.to_square]
  occupied = (occupied & ~chess.BB_SQUARES[move.from_square]) | chess.BB_SQUARES[move.to_square]
  if board.is_en_passant(move):
    occupied &= ~chess.BB_SQUARES[move.to_square - 8 if us == chess.WHITE else move.to_square + 8]
  return _attacked(us, king, occupied, pieces)


def all_san(board: chess.Board) -> dict[chess.Move, str]:
  """Every legal move of `board` in SAN, as ``board.san(move)`` writes it (standard chess and Chess960)."""
  legal = list(board.legal_moves)
  rivals: dict[tuple[int, int], int] = collections.defaultdict(int)  # (piece type, to) -> from squares.
  kinds = {}
  for move in legal:
    kinds[move] = kind = _mover(board, move)
    rivals[(kind, move.to_square)] |= chess.BB_SQUARES[move.from_square]
  king = board.king(not board.turn)
  names = {}
  for move in legal:
    if board.is_castling(move):
      san = 'O-O-O' if chess.square_file(move.to_square) < chess.square_file(move.from_square) else 'O-O'
    else:
      kind = kinds[move]
      capture = board.is_capture(move)
      san = '' if kind == chess.PAWN else chess.piece_symbol(kind).upper()
      if kind != chess.PAWN:
        others = rivals[(kind, move.to_square)] & ~chess.BB_SQUARES[move.from_square]
        if others:
          column = bool(others & chess.BB_RANKS[chess.square_rank(move.from_square)])
          row = bool(others & chess.BB_FILES[chess.square_file(move.from_square)])
          if column or not row:
            san += chess.FILE_NAMES[chess.square_file(move.from_square)]
          if row:
            san += chess.RANK_NAMES[chess.square_rank(move.from_square)]
      elif capture:
        san += chess.FILE_NAMES[chess.square_file(move.from_square)]
      san += ('x' if capture else '') + chess.SQUARE_NAMES[move.to_square]
      if move.promotion:
        san += '=' + chess.piece_symbol(move.promotion).upper()
    if king is not None and _gives_check(board, move, king):
      san = board.san(move)  # Check or mate: python-chess's own look-ahead (rare).
    names[move] = san
  return names
