"""The request bodies of the API, read and checked: a bad one is a `BadRequest` whose message names the field.

Every body is a JSON object with known fields only. A position is a FEN (default: the
start position) and UCI moves played from it:

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
import json
from typing import Any

import chess
import chess.pgn

from searchless.core import legality
from searchless.core import notation

MAX_BODY_BYTES = 1 << 20  # A request body of more bytes is refused (413).
MAX_POSITIONS = 256  # Positions in one request, at most.
MAX_MOVES = 1024  # Moves of one position (played from its FEN), at most.
MAX_MOVETIME_MS = 60_000  # /v1/play's movetime_ms, at most.


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


def _object(body: bytes) -> dict[str, Any]:
  """The JSON object `body` holds."""
  try:
    value = json.loads(body)
  except (UnicodeDecodeError, json.JSONDecodeError) as error:
    raise BadRequest(f'the body is not valid JSON: {error}') from None
  if not isinstance(value, dict):
    raise BadRequest(f'the body must be a JSON object, not {type(value).__name__}')
  return value


def _known(value: dict[str, Any], fields: tuple[str, ...], where: str = '') -> None:
  unknown = sorted(set(value) - set(fields))
  if unknown:
    raise BadRequest(f'{where}{unknown[0]}: unknown field (expected {", ".join(fields)})')


def board(value: dict[str, Any], where: str = '') -> chess.Board:
  """The board of a position object (``fen`` and ``moves``, fields under `where`), every move checked."""
  fen = value.get('fen', chess.STARTING_FEN)
  if not isinstance(fen, str):
    raise BadRequest(f'{where}fen: expected a FEN string, got {json.dumps(fen)[:80]}')
  try:
    result = notation.read_fen(fen)
  except ValueError as error:
    raise BadRequest(f'{where}fen: not a FEN, {fen[:100]!r} ({error})') from None
  if problems := legality.problems(result):
    raise BadRequest(f'{where}fen: illegal position {fen[:100]!r} ({problems})')
  moves = value.get('moves', [])
  if not isinstance(moves, list):
    raise BadRequest(f'{where}moves: expected a list of UCI moves, got {json.dumps(moves)[:80]}')
  if len(moves) > MAX_MOVES:
    raise BadRequest(f'{where}moves: {len(moves)} moves, more than the {MAX_MOVES} allowed')
  for i, text in enumerate(moves):
    try:
      move = chess.Move.from_uci(text) if isinstance(text, str) else None
    except ValueError:
      move = None
    if move is None or not result.is_legal(move):
      raise BadRequest(f'{where}moves[{i}]: {str(text)[:20]!r} is not a legal move in {result.fen()}')
    result.push(move)
  return result


def analyse_request(body: bytes) -> tuple[list[chess.Board], bool]:
  """The boards of a /v1/analyse body, and whether it is a batch: one position (``fen``, ``moves``) or
  ``positions``, a list of them."""
  value = _object(body)
  _known(value, ('fen', 'moves', 'positions'))
  if 'positions' not in value:
    return [board(value)], False
  if 'fen' in value or 'moves' in value:
    raise BadRequest('positions: give either positions or one position (fen, moves), not both')
  positions = value['positions']
  if not isinstance(positions, list) or not positions:
    raise BadRequest('positions: expected a non-empty list of positions ({"fen": ..., "moves": [...]})')
  if len(positions) > MAX_POSITIONS:
    raise BadRequest(f'positions: {len(positions)} positions, more than the {MAX_POSITIONS} allowed in one request')
  boards = []
  for i, position in enumerate(positions):
    if not isinstance(position, dict):
      raise BadRequest(f'positions[{i}]: expected an object with fen and moves')
    _known(position, ('fen', 'moves'), f'positions[{i}].')
    boards.append(board(position, f'positions[{i}].'))
  return boards, True


def position_request(body: bytes) -> chess.Board:
  """The board of a body of one position (``fen``, ``moves``): /v1/stockfish."""
  value = _object(body)
  _known(value, ('fen', 'moves'))
  return board(value)


def play_request(body: bytes) -> PlayRequest:
  """A /v1/play body: one position and ``movetime_ms`` (optional, 1 to `MAX_MOVETIME_MS`)."""
  value = _object(body)
  _known(value, ('fen', 'moves', 'movetime_ms'))
  movetime = value.get('movetime_ms')
  if movetime is not None and (
    isinstance(movetime, bool) or not isinstance(movetime, int) or not 1 <= movetime <= MAX_MOVETIME_MS
  ):
    raise BadRequest(f'movetime_ms: expected an integer from 1 to {MAX_MOVETIME_MS}, got {json.dumps(movetime)[:40]}')
  return PlayRequest(board(value), movetime)


def pgn_request(body: bytes) -> chess.pgn.Game:
  """The game of a /v1/pgn body (``pgn``: one game's PGN text; its first game is read), every move checked.

  >>> game = pgn_request(b'{"pgn": "1. e4 e5 2. Nf3 *"}')
  >>> [m.uci() for m in game.mainline_moves()]
  ['e2e4', 'e7e5', 'g1f3']
  """
  value = _object(body)
  _known(value, ('pgn',))
  text = value.get('pgn')
  if not isinstance(text, str) or not text.strip():
    raise BadRequest('pgn: expected the text of a game in PGN')
  game = chess.pgn.read_game(io.StringIO(text))
  if game is None:
    raise BadRequest('pgn: no game found in the text')
  if game.errors:
    raise BadRequest(f'pgn: {" ".join(str(game.errors[0]).split())[:200]}')
  start = game.board()
  if problems := legality.problems(start):
    raise BadRequest(f'pgn: illegal start position {start.fen()!r} ({problems})')
  if sum(1 for _ in game.mainline_moves()) > MAX_MOVES:
    raise BadRequest(f'pgn: more than {MAX_MOVES} moves')
  return game
