"""The three ChessBench record kinds and their bytes.

The bytes are the reference's: what its Apache Beam coders
(``TupleCoder((StrUtf8Coder, ...))``) write, so bag files written here are read
by the published reader and vice versa. Encoding and decoding need no Beam.

A fourth kind, ``board_value`` (ours), holds a whole board in one record: its
FEN, every legal move with its win probability, and the board's own value,
laid out in the same style (Beam's ``IterableCoder`` for the move lists).
One record per board instead of one per move: the FEN is stored once.
A ``partial_board_value`` record has the same fields but values only some of its
board's legal moves (imported labels, `searchless.data.lichess_evals`).

>>> record = ActionValue('8/8/8/8/8/8/8/K1k5 w - - 0 1', 'a1a2', 0.5)
>>> decode('action_value', encode('action_value', record)) == record
True
>>> board = BoardValue('8/8/8/8/8/8/8/K1k5 w - - 0 1', ('a1a2', 'a1b1'), (0.5, 0.25), 0.5)
>>> decode('board_value', encode('board_value', board)) == board
True
"""

import struct
from typing import NamedTuple


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
PARTIAL_BOARD_VALUE = 'partial_board_value'  # Ours: a board with only some of its moves valued (imported labels).
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

# Each kind's fields, as the reference's Beam coders lay them out: `TupleCoder` of `StrUtf8Coder` ('str'),
# `FloatCoder` ('float', 8 bytes big-endian) and `IterableCoder` of those ('strs', 'floats': a big-endian int32
# count, then the items). Inside a tuple a string is prefixed by its varint length, except the tuple's last field.
LAYOUTS = {
  'action_value': ('str', 'str', 'float'),
  'state_value': ('str', 'float'),
  'behavioral_cloning': ('str', 'str'),
  BOARD_VALUE: ('str', 'strs', 'floats', 'float'),
  PARTIAL_BOARD_VALUE: ('str', 'strs', 'floats', 'float'),  # The same fields; the kind says which moves are there.
}


def _check_kind(kind: str) -> None:
  if kind not in LAYOUTS:
    raise ValueError(f'unknown record kind {kind!r}; expected one of {ALL_KINDS}')


def _write_varint(value: int, out: list[bytes]) -> None:
  while True:
    byte = value & 0x7F
    value >>= 7
    if value:
      out.append(bytes((byte | 0x80,)))
    else:
      out.append(bytes((byte,)))
      return


def _write_str(text: str, out: list[bytes], prefixed: bool) -> None:
  data = text.encode('utf-8')
  if prefixed:
    _write_varint(len(data), out)
  out.append(data)


def encode(kind: str, record: tuple) -> bytes:
  """Encodes a record of `kind` to the bytes stored in a bag (the reference's Beam coders' bytes)."""
  _check_kind(kind)
  layout = LAYOUTS[kind]
  if len(record) != len(layout):
    raise ValueError(f'a {kind} record has {len(layout)} fields, got {len(record)}: {record!r}')
  out: list[bytes] = []
  for i, (field, value) in enumerate(zip(layout, record)):
    if field == 'str':
      _write_str(value, out, prefixed=i + 1 < len(layout))
    elif field == 'float':
      out.append(struct.pack('>d', value))
    elif field == 'strs':
      out.append(struct.pack('>i', len(value)))
      for item in value:
        _write_str(item, out, prefixed=True)
    else:
      out.append(struct.pack(f'>i{len(value)}d', len(value), *value))
  return b''.join(out)


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


def fen_of(data: bytes) -> str:
  """The FEN of one record of any kind (its first field), read without decoding the rest.

  >>> fen_of(encode('board_value', BoardValue('8/8/8/8/8/8/8/K1k5 w - - 3 70', (), (), 0.5)))
  '8/8/8/8/8/8/8/K1k5 w - - 3 70'
  >>> fen_of(b'\\x85')
  Traceback (most recent call last):
  ...
  ValueError: truncated or overlong length prefix
  """
  length, pos = _varint(data, 0)
  if pos + length > len(data):
    raise ValueError('truncated string')
  return data[pos : pos + length].decode('utf-8')


def decode(kind: str, data: bytes) -> NamedTuple:
  """Decodes the bytes of one bag record of `kind`, strictly: malformed bytes raise ValueError.

  (Beam's compiled coders may crash the process on bytes of another kind.)
  """
  _check_kind(kind)
  layout = LAYOUTS[kind]
  fields: list = []
  pos = 0
  for i, field in enumerate(layout):
    if field == 'str':
      if i + 1 < len(layout):
        length, pos = _varint(data, pos)
        if pos + length > len(data):
          raise ValueError('truncated string')
      else:
        length = len(data) - pos
      fields.append(data[pos : pos + length].decode('utf-8'))
      pos += length
    elif field == 'float':
      if pos + 8 > len(data):
        raise ValueError('truncated float')
      fields.append(struct.unpack_from('>d', data, pos)[0])
      pos += 8
    elif field == 'strs':
      count, pos = _count(data, pos, 1)
      items = []
      for _ in range(count):
        if pos < len(data) and data[pos] < 0x80:  # A one-byte length: every move's.
          length, pos = data[pos], pos + 1
        else:
          length, pos = _varint(data, pos)
        if pos + length > len(data):
          raise ValueError('truncated string')
        items.append(data[pos : pos + length].decode('utf-8'))
        pos += length
      fields.append(tuple(items))
    else:
      count, pos = _count(data, pos, 8)
      fields.append(struct.unpack_from(f'>{count}d', data, pos))
      pos += 8 * count
  if pos != len(data):
    raise ValueError(f'{len(data) - pos} bytes after the last field of a {kind} record')
  return RECORD_TYPES[kind](*fields)
