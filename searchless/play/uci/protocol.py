"""The UCI protocol's words: commands, ``go`` and ``position`` parsing, and the lines the engine writes.

Nothing here knows the model: `parse_go` and `parse_position` turn input
arguments into a `GoRequest` and a board (or a `UciError`, whose message
follows ``info string error:``); `board_lines` draws the board for ``d``.

>>> request, errors = parse_go('movetime 100 ponder'.split())
>>> request.limits, request.ponder, errors
({'movetime': 100}, True, [])
"""

from collections.abc import Sequence
import dataclasses

import chess

from searchless.core import legality
from searchless.plumbing import errors

CP_CLIP = 3000  # |score cp| limit: a model's win probability never proves a mate.
NULL_MOVE = '0000'  # UCI's "no move".
GO_NUMBERS = ('wtime', 'btime', 'winc', 'binc', 'movestogo', 'movetime', 'depth', 'nodes', 'mate')
GO_FLAGS = ('infinite', 'ponder')
_GO_KEYWORDS = (*GO_NUMBERS, *GO_FLAGS, 'searchmoves')
COMMANDS = (
  'uci',
  'debug',
  'isready',
  'setoption',
  'register',
  'ucinewgame',
  'position',
  'go',
  'stop',
  'ponderhit',
  'quit',
  'd',
)
MAX_FULL_MOVES = 1000  # TemperatureFullMoves' spin maximum.
MAX_THREADS = 1024  # Threads' spin maximum (Stockfish's); more than the CPUs available is clamped to them.
MAX_MULTIPV = 500  # MultiPV's spin maximum (more than any position's legal moves).
MAX_HASH_MB = 33554432  # Hash's spin maximum (Stockfish's), a no-op here.
MAX_MOVE_OVERHEAD_MS = 5000  # Move Overhead's spin maximum (Stockfish's); kept off a search's time.
NO_SEARCH = 'none'  # The Search option's first value: the searchless player (the others name searches).
MAX_SEARCH_NODES = 10_000_000  # SearchNodes' spin maximum.


class UciError(errors.BadInput):
  """Malformed or inapplicable input; its message follows ``info string error:``."""


@dataclasses.dataclass
class GoRequest:
  """The arguments of one ``go``."""

  limits: dict[str, int] = dataclasses.field(default_factory=dict)  # wtime, depth, ...: recorded, not used.
  infinite: bool = False
  ponder: bool = False
  searchmoves: list[str] = dataclasses.field(default_factory=list)  # UCI strings, unchecked.


def parse_go(args: Sequence[str]) -> tuple[GoRequest, list[str]]:
  """Parses ``go``'s arguments into a request and the errors found (bad parts are skipped).

  >>> request, errors = parse_go('wtime 1000 btime x searchmoves e2e4 d2d4 infinite'.split())
  >>> request
  GoRequest(limits={'wtime': 1000}, infinite=True, ponder=False, searchmoves=['e2e4', 'd2d4'])
  >>> errors
  ["go btime expects a non-negative integer, got 'x'"]
  """
  request, errors = GoRequest(), []
  i = 0
  while i < len(args):
    token = args[i]
    i += 1
    if token in GO_FLAGS:
      setattr(request, token, True)
    elif token in GO_NUMBERS:
      if i >= len(args) or args[i] in _GO_KEYWORDS:
        errors.append(f'go {token} expects a value')
        continue
      try:
        number = int(args[i])
        if number < 0 and token not in ('wtime', 'btime', 'mate'):  # Clocks may run negative.
          raise ValueError
        request.limits[token] = number
      except ValueError:
        errors.append(f'go {token} expects a non-negative integer, got {args[i]!r}')
      i += 1
    elif token == 'searchmoves':
      while i < len(args) and args[i] not in _GO_KEYWORDS:
        request.searchmoves.append(args[i])
        i += 1
    else:
      errors.append(f'unknown go argument {token!r}')
  return request, errors


def parse_position(args: Sequence[str], chess960: bool = False) -> chess.Board:
  """The board of ``position``'s arguments, move stack included; raises UciError.

  With `chess960` the board is a Chess960 board: X-FEN or Shredder-FEN castling
  rights, castling moves written king-takes-rook (``e1h1``; ``e1g1`` is read too).

  >>> parse_position('startpos moves e2e4 e7e5'.split()).fen()
  'rnbqkbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - 0 2'
  >>> parse_position(['fen', '8/8/8/8/8/8/8/8', 'w', '-', '-', '0', '1'])  # doctest: +ELLIPSIS
  Traceback (most recent call last):
  ...
  searchless.play.uci.protocol.UciError: illegal position '8/8/8/8/8/8/8/8 w - - 0 1': no white king, ...
  """
  if not args:
    raise UciError('position needs startpos or fen')
  if 'moves' in args:
    split = args.index('moves')
    setup, moves = args[:split], args[split + 1 :]
  else:
    setup, moves = args, []
  if setup[0] == 'startpos':
    if len(setup) > 1:
      raise UciError(f'unexpected {" ".join(setup[1:])!r} after position startpos')
    board = chess.Board(chess960=chess960)
  elif setup[0] == 'fen':
    fen = ' '.join(setup[1:])
    try:
      board = chess.Board(fen, chess960=chess960)
    except ValueError as e:
      raise UciError(f'bad FEN {fen!r}: {e}') from None
    if problems := legality.problems(board):
      raise UciError(f'illegal position {fen!r}: {problems}')
  else:
    raise UciError(f'position needs startpos or fen, got {setup[0]!r}')
  for text in moves:
    try:
      move = board.parse_uci(text)
      if not move:
        raise ValueError
    except ValueError:
      raise UciError(f'illegal move {text!r} in position {board.fen()}') from None
    board.push(move)
  return board


def normalise_move(board: chess.Board, text: str) -> str | None:
  """`text` as python-chess writes the move (e.g. king-takes-rook castling), or None.

  >>> normalise_move(chess.Board(), 'e2e4'), normalise_move(chess.Board(), 'e2e5')
  ('e2e4', None)
  """
  try:
    return board.parse_uci(text).uci()
  except ValueError:
    return None


def format_float(x: float) -> str:
  """An option's float value as UCI shows it.

  >>> format_float(0.0), format_float(0.5)
  ('0', '0.5')
  """
  return f'{x:g}'


def board_lines(board: chess.Board) -> list[str]:
  """The ``d`` command's picture of `board` (as Stockfish draws it), its FEN, checkers and moves.

  >>> lines = board_lines(chess.Board())
  >>> lines[2], lines[-3]
  (' | r | n | b | q | k | b | n | r | 8', 'Fen: rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1')
  """
  rule = ' +---+---+---+---+---+---+---+---+'
  lines = ['', rule]
  for rank in range(7, -1, -1):
    pieces = [board.piece_at(chess.square(f, rank)) for f in range(8)]
    lines.append(' | ' + ' | '.join(p.symbol() if p else ' ' for p in pieces) + f' | {rank + 1}')
    lines.append(rule)
  lines += [
    '   a   b   c   d   e   f   g   h',
    '',
    f'Fen: {board.fen()}',
    f'Checkers: {" ".join(chess.square_name(s) for s in board.checkers())}',
    f'Moves: {" ".join(m.uci() for m in board.move_stack)}',
  ]
  return lines
