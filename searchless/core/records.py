"""The three ChessBench record kinds and their Apache Beam coders.

The coders are the reference's: a record is encoded with
``TupleCoder((StrUtf8Coder, ...))``, so bag files written here are read by the
published reader and vice versa.

A fourth kind, ``board_value`` (ours), holds a whole board in one record: its
FEN, every legal move with its win probability, and the board's own value,
with a Beam coder in the same style (``IterableCoder`` for the move lists).
One record per board instead of one per move: the FEN is stored once.
A ``partial_board_value`` record has the same fields but values only some of its
board's legal moves (free labels, `searchless.data.free_labels`).

>>> record = ActionValue('8/8/8/8/8/8/8/K1k5 w - - 0 1', 'a1a2', 0.5)
>>> decode('action_value', encode('action_value', record)) == record
True
>>> board = BoardValue('8/8/8/8/8/8/8/K1k5 w - - 0 1', ('a1a2', 'a1b1'), (0.5, 0.25), 0.5)
>>> decode('board_value', encode('board_value', board)) == board
True
"""

import struct
from typing import NamedTuple

from apache_beam import coders


class ActionValue(NamedTuple):
  fen: str  # Board before the move.
  move: str  # UCI move.
  win_prob: float  # Mover's win probability after playing `move`.


class StateValue(NamedTuple):
  fen: str
  win_prob: float  # Win probability of the side to move.


class BehavioralCloning(NamedTuple):
  fen: str
  move: str  # The engine's best move.


class BoardValue(NamedTuple):
  fen: str
  moves: tuple[str, ...]  # Every legal move (UCI); none on a checkmate or stalemate board.
  win_probs: tuple[float, ...]  # Mover's win probability after each of `moves`.
  state_value: float  # Win probability of the side to move.


KINDS = ('action_value', 'state_value', 'behavioral_cloning')  # The ChessBench datasets.
BOARD_VALUE = 'board_value'  # Ours: one record per board.
PARTIAL_BOARD_VALUE = 'partial_board_value'  # Ours: a board with only some of its moves valued (free labels).
ALL_KINDS = KINDS + (BOARD_VALUE, PARTIAL_BOARD_VALUE)
# Tokens of a record as a model input: 77 FEN tokens + action and/or return bucket.
SEQUENCE_LENGTHS = {'action_value': 79, 'state_value': 78, 'behavioral_cloning': 78}
RECORD_TYPES = {
    'action_value': ActionValue,
    'state_value': StateValue,
    'behavioral_cloning': BehavioralCloning,
    BOARD_VALUE: BoardValue,
    PARTIAL_BOARD_VALUE: BoardValue,
}

_FEN = coders.StrUtf8Coder()
_MOVE = coders.StrUtf8Coder()
_WIN_PROB = coders.FloatCoder()
CODERS = {
    'action_value': coders.TupleCoder((_FEN, _MOVE, _WIN_PROB)),
    'state_value': coders.TupleCoder((_FEN, _WIN_PROB)),
    'behavioral_cloning': coders.TupleCoder((_FEN, _MOVE)),
    BOARD_VALUE: coders.TupleCoder((
        _FEN, coders.IterableCoder(_MOVE), coders.IterableCoder(_WIN_PROB), _WIN_PROB)),
}
CODERS[PARTIAL_BOARD_VALUE] = CODERS[BOARD_VALUE]  # The same fields; the kind says which moves are there.


def _check_kind(kind: str) -> None:
  if kind not in CODERS:
    raise ValueError(f'unknown record kind {kind!r}; expected one of {ALL_KINDS}')


def encode(kind: str, record: tuple) -> bytes:
  """Encodes a record of `kind` to the bytes stored in a bag."""
  _check_kind(kind)
  return CODERS[kind].encode(tuple(record))


def _varint(data: bytes, pos: int) -> tuple[int, int]:
  value, shift = 0, 0
  while True:
    if pos >= len(data) or shift > 63:
      raise ValueError('truncated or overlong length prefix')
    byte = data[pos]
    value |= (byte & 0x7F) << shift
    pos += 1
    if not byte & 0x80:
      return value, pos
    shift += 7


def _count(data: bytes, pos: int, item_bytes: int) -> tuple[int, int]:
  if pos + 4 > len(data):
    raise ValueError('truncated list length')
  count = struct.unpack_from('>i', data, pos)[0]
  if count < 0 or count * item_bytes > len(data) - pos - 4:  # Beam's unknown-length form is not written here.
    raise ValueError(f'bad list length {count}')
  return count, pos + 4


def _decode_board_value(data: bytes) -> BoardValue:
  """`CODERS['board_value'].decode`, strictly: any malformed input raises ValueError.

  (Beam's compiled coder may crash the process on bytes of another kind.)
  """
  length, pos = _varint(data, 0)
  fen = data[pos:pos + length].decode('utf-8')
  pos += length
  count, pos = _count(data, pos, 2)
  moves = []
  for _ in range(count):
    length, pos = _varint(data, pos)
    if pos + length > len(data):
      raise ValueError('truncated move')
    moves.append(data[pos:pos + length].decode('utf-8'))
    pos += length
  count, pos = _count(data, pos, 8)
  win_probs = struct.unpack_from(f'>{count}d', data, pos)
  pos += 8 * count
  if pos + 8 != len(data):
    raise ValueError(f'{len(data) - pos} bytes where the 8-byte state value should end the record')
  return BoardValue(fen, tuple(moves), win_probs, struct.unpack_from('>d', data, pos)[0])


def decode(kind: str, data: bytes) -> NamedTuple:
  """Decodes the bytes of one bag record of `kind` (board_value: ValueError if malformed)."""
  _check_kind(kind)
  if kind == BOARD_VALUE:
    return _decode_board_value(data)
  return RECORD_TYPES[kind](*CODERS[kind].decode(data))
