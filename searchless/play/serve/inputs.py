"""The request bodies of the API, read and checked: a bad one is a `BadRequest` whose message names the field.

Every body is a JSON object with known fields only (read by orjson: nesting past 1024 levels, a number
that is no double and bytes that are not UTF-8 are a 400 like any bad JSON). A position is a FEN (default:
the start position; a Chess960 one in X-FEN or Shredder-FEN, with ``"chess960": true`` or inferred from
castling rights that only Chess960 has) and UCI moves played from it:

>>> boards, batch = analyse_request(b'{"moves": ["e2e4"]}')
>>> [b.fen() for b in boards], batch
(['rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1'], False)
>>> boards, batch = analyse_request(b'{"positions": [{}, {"fen": "8/8/8/8/8/8/k7/7K w - - 0 1"}]}')
>>> len(boards), batch
(2, True)
>>> for body in (b'{"fen": "4k3/8/8/8/8/8/8/4K2K w - - 0 1"}', b'{"positions": [{"moves": ["e2e4", "e2e4"]}]}'):
...   try:
...     analyse_request(body)
...   except BadRequest as error:
...     print(error)
fen: illegal position '4k3/8/8/8/8/8/8/4K2K w - - 0 1' (too many kings)
positions[0].moves[1]: 'e2e4' is not a legal move in rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1
"""

import dataclasses
import io
from typing import Any

import chess
import chess.pgn
import orjson

from searchless.core import legality
from searchless.core import notation
from searchless.core import tokenizer

MAX_BODY_BYTES = 1 << 20  # A request body of more bytes is refused (413).
MAX_POSITIONS = 256  # Positions in one request, at most.
MAX_MOVES = 1024  # Moves of one position (played from its FEN), at most.
MAX_PGN_PLIES = 4096  # Moves of a PGN, its variations' included, at most: what its parse can cost is bounded.
MAX_MOVETIME_MS = 60_000  # /v1/play's movetime_ms, at most.
POSITION_FIELDS = ('fen', 'moves', 'chess960')


class BadRequest(Exception):
  """A request the API refuses: `status` (4xx) and a message of one sentence naming the field at fault."""

  def __init__(self, message: str, status: int = 400):
    super().__init__(message)
    self.status = status


@dataclasses.dataclass(frozen=True)
class PlayRequest:
  """A /v1/play request: the board and the search's time (None: the agent's own budget)."""

  board: chess.Board
  movetime_ms: int | None


def show(value: Any, limit: int = 80) -> str:
  """`value` as JSON, cut at `limit` characters, for an error message (any value a body can hold: orjson gives
  up past 254 levels of nesting, where this names the type instead).

  >>> show([[1, 2], 'a' * 100], 12)
  '[[1,2],"aaaa'
  """
  try:
    return orjson.dumps(value).decode()[:limit]
  except orjson.JSONEncodeError:
    return f'a deeply nested {type(value).__name__}'


def _object(body: bytes) -> dict[str, Any]:
  """The JSON object `body` holds."""
  try:
    value = orjson.loads(body)
  except orjson.JSONDecodeError as error:
    raise BadRequest(f'the body is not valid JSON: {error}') from None
  if not isinstance(value, dict):
    raise BadRequest(f'the body must be a JSON object, not {_kind(value)}')
  return value


def _kind(value: Any) -> str:
  """The JSON name of `value`'s type."""
  names = {dict: 'object', list: 'array', str: 'string', bool: 'boolean', int: 'number', float: 'number'}
  return names.get(type(value), 'null')


def _known(value: dict[str, Any], fields: tuple[str, ...], where: str = '') -> None:
  unknown = sorted(set(value) - set(fields))
  if unknown:
    raise BadRequest(f'{where}{unknown[0][:40]}: unknown field (expected {", ".join(fields)})')


def _read_fen(fen: str, chess960: bool | None, where: str) -> chess.Board:
  """The board of `fen`; `chess960` None: a Chess960 board when only Chess960 makes its castling rights valid."""
  try:
    if chess960:
      return chess.Board(fen, chess960=True)
    result = notation.read_fen(fen)
    if chess960 is None and result.status() & chess.STATUS_BAD_CASTLING_RIGHTS:
      other = chess.Board(fen, chess960=True)
      if not other.status() & chess.STATUS_BAD_CASTLING_RIGHTS:
        return other
    return result
  except ValueError as error:
    raise BadRequest(f'{where}fen: not a FEN, {fen[:100]!r} ({str(error)[:200]})') from None


def board(value: dict[str, Any], where: str = '') -> chess.Board:
  """The board of a position object (``fen``, ``moves``, ``chess960``, fields under `where`), every move checked."""
  fen = value.get('fen', chess.STARTING_FEN)
  if not isinstance(fen, str):
    raise BadRequest(f'{where}fen: expected a FEN string, got {show(fen)}')
  chess960 = value.get('chess960')
  if chess960 is not None and not isinstance(chess960, bool):
    raise BadRequest(f'{where}chess960: expected true or false, got {show(chess960)}')
  result = _read_fen(fen, chess960, where)
  if problems := legality.problems(result):
    raise BadRequest(f'{where}fen: illegal position {fen[:100]!r} ({problems})')
  if result.chess960 and not set(result.fen().split()[2]) <= set(tokenizer.CHARACTERS + 'KQkq-'):
    raise BadRequest(f'{where}fen: castling rights {result.fen().split()[2]!r} the model cannot read (Chess960)')
  moves = value.get('moves', [])
  if not isinstance(moves, list):
    raise BadRequest(f'{where}moves: expected a list of UCI moves, got {show(moves)}')
  if len(moves) > MAX_MOVES:
    raise BadRequest(f'{where}moves: {len(moves)} moves, more than the {MAX_MOVES} allowed')
  for i, text in enumerate(moves):
    try:
      move = chess.Move.from_uci(text) if isinstance(text, str) else None
    except ValueError:
      move = None
    if move is None or not result.is_legal(move):
      shown = repr(text[:20]) if isinstance(text, str) else show(text, 20)
      raise BadRequest(f'{where}moves[{i}]: {shown} is not a legal move in {result.fen()}')
    result.push(move)
  return result


def analyse_request(body: bytes) -> tuple[list[chess.Board], bool]:
  """The boards of a /v1/analyse body, and whether it is a batch: one position (``fen``, ``moves``) or
  ``positions``, a list of them."""
  value = _object(body)
  _known(value, (*POSITION_FIELDS, 'positions'))
  if 'positions' not in value:
    return [board(value)], False
  if set(value) & set(POSITION_FIELDS):
    raise BadRequest('positions: give either positions or one position (fen, moves), not both')
  positions = value['positions']
  if not isinstance(positions, list) or not positions:
    raise BadRequest('positions: expected a non-empty list of positions ({"fen": ..., "moves": [...]})')
  if len(positions) > MAX_POSITIONS:
    raise BadRequest(f'positions: {len(positions)} positions, more than the {MAX_POSITIONS} allowed in one request')
  boards = []
  for i, position in enumerate(positions):
    if not isinstance(position, dict):
      raise BadRequest(f'positions[{i}]: expected an object with fen and moves, got {show(position, 40)}')
    _known(position, POSITION_FIELDS, f'positions[{i}].')
    boards.append(board(position, f'positions[{i}].'))
  return boards, True


def position_request(body: bytes) -> chess.Board:
  """The board of a body of one position (``fen``, ``moves``): /v1/stockfish."""
  value = _object(body)
  _known(value, POSITION_FIELDS)
  return board(value)


def play_request(body: bytes) -> PlayRequest:
  """A /v1/play body: one position and ``movetime_ms`` (optional, 1 to `MAX_MOVETIME_MS`)."""
  value = _object(body)
  _known(value, (*POSITION_FIELDS, 'movetime_ms'))
  movetime = value.get('movetime_ms')
  if movetime is not None and (
    isinstance(movetime, bool) or not isinstance(movetime, int) or not 1 <= movetime <= MAX_MOVETIME_MS
  ):
    raise BadRequest(f'movetime_ms: expected an integer from 1 to {MAX_MOVETIME_MS}, got {show(movetime, 40)}')
  return PlayRequest(board(value), movetime)


class _TooLong(Exception):
  """A PGN with more than `MAX_PGN_PLIES` moves, its variations' included."""


class _Builder(chess.pgn.GameBuilder):
  """python-chess's game builder of the main line alone that counts what it reads: every move and variation
  (past `MAX_PGN_PLIES` it stops the parse), the tag pairs and the result; its errors are the game's, not lines
  in the log. A variation's moves are checked and counted, not kept: no tree of nodes (each linked to its
  parent) that only Python's garbage collector frees, whose full collections stop every thread."""

  def begin_game(self) -> None:
    self.plies = self.found = self.depth = 0  # depth: of the variation read (0: the main line).
    super().begin_game()

  def visit_header(self, tagname: str, tagvalue: str) -> None:
    self.found += 1
    super().visit_header(tagname, tagvalue)

  def visit_result(self, result: str) -> None:
    self.found += 1
    super().visit_result(result)

  def begin_variation(self) -> None:
    self.plies += 1  # Each variation copies its board: counted as a move.
    if self.plies > MAX_PGN_PLIES:
      raise _TooLong()
    self.depth += 1

  def end_variation(self) -> None:
    self.depth -= 1

  def visit_comment(self, comment: str) -> None:
    if not self.depth:
      super().visit_comment(comment)

  def visit_nag(self, nag: int) -> None:
    if not self.depth:
      super().visit_nag(nag)

  def visit_move(self, board: chess.Board, move: chess.Move) -> None:
    self.plies += 1
    self.found += 1
    if self.plies > MAX_PGN_PLIES:
      raise _TooLong()
    if not self.depth:
      super().visit_move(board, move)

  def handle_error(self, error: Exception) -> None:
    self.game.errors.append(error)


def pgn_request(body: bytes) -> chess.pgn.Game:
  """The game of a /v1/pgn body (``pgn``: one game's PGN text): its main line, every move checked (the
  variations' too, not kept); text with no game, more than one, or more than `MAX_PGN_PLIES` moves (variations
  included) is a `BadRequest`.

  >>> game = pgn_request(b'{"pgn": "1. e4 e5 (1... c5 2. Nf3) 2. Nf3 *"}')
  >>> [m.uci() for m in game.mainline_moves()], [len(node.variations) for node in game.mainline()]
  (['e2e4', 'e7e5', 'g1f3'], [1, 1, 0])
  >>> try:
  ...   pgn_request(b'{"pgn": "1. e4 e5 (1... c5 2. Ke3) 2. Nf3 *"}')
  ... except BadRequest as bad:
  ...   print(str(bad)[:30])
  pgn: illegal san: 'Ke3' in rnb
  """
  value = _object(body)
  _known(value, ('pgn',))
  text = value.get('pgn')
  if not isinstance(text, str) or not text.strip():
    raise BadRequest('pgn: expected the text of a game in PGN')
  handle = io.StringIO(text)
  builder: list[_Builder] = []

  def visitor() -> _Builder:
    builder.append(_Builder())
    return builder[-1]

  try:
    game = chess.pgn.read_game(handle, Visitor=visitor)
  except _TooLong:
    raise BadRequest(f'pgn: more than {MAX_PGN_PLIES} moves, variations included') from None
  if game is None or not builder[0].found:
    raise BadRequest(f'pgn: no game found in the text (no tag pair, move or result): {text.strip()[:40]!r}')
  if game.errors:
    raise BadRequest(f'pgn: {" ".join(str(game.errors[0]).split())[:200]}')
  if chess.pgn.read_game(handle, Visitor=chess.pgn.SkipVisitor):
    raise BadRequest('pgn: more than one game in the text; paste one game')
  start = game.board()
  if problems := legality.problems(start):
    raise BadRequest(f'pgn: illegal start position {start.fen()!r} ({problems})')
  if sum(1 for _ in game.mainline_moves()) > MAX_MOVES:
    raise BadRequest(f'pgn: more than {MAX_MOVES} moves')
  return game


def pgn_answer(body: bytes) -> dict[str, Any]:
  """The /v1/pgn answer to `body` (`pgn_request`): the game's headers, start FEN, moves (UCI and SAN) and whether
  it is Chess960.

  >>> answer = pgn_answer(b'{"pgn": "1. e4 e5 (1... c5) 2. Nf3 *"}')
  >>> [move['san'] for move in answer['moves']], answer['chess960']
  (['e4', 'e5', 'Nf3'], False)
  """
  game = pgn_request(body)
  board = game.board()
  fen = board.fen()
  moves = []
  for move in game.mainline_moves():
    moves.append({'uci': move.uci(), 'san': board.san(move)})
    board.push(move)
  return {'headers': dict(game.headers), 'fen': fen, 'chess960': board.chess960, 'moves': moves}
