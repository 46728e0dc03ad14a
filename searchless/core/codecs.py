"""Fast byte decoders of bag records: a whole batch at once, and which kind a bag holds.

`records` defines the record kinds and their Beam coders; this module reads
the same bytes without Beam, in bulk, for the training loader:

* `decode_batch`: a batch of encoded ChessBench records (``action_value``,
  ``state_value``, ``behavioral_cloning``) -> `Columns`, with array operations
  over the joined bytes (`records.decode` is the exact per-record path);
* `decode_boards`: encoded ``board_value`` records -> `records.BoardValue`;
* `check_kind`: whether a bag holds records of the kind a job expects, with an
  error that says what the records are instead.

A record that cannot be decoded raises `BadRecord`, which names its position
in the batch; so does `check_win_probs` for a win probability outside [0, 1]
(NaN included).

Each kind's byte layout is `records.LAYOUTS`.

>>> fen = '8/8/8/8/8/8/8/K1k5 w - - 0 1'
>>> columns = decode_batch('state_value', [records.encode('state_value', (fen, 0.25))])
>>> columns.fens == [fen], columns.moves, columns.win_probs.tolist()
(True, None, [0.25])
"""

from collections.abc import Sequence
import os
import typing
from typing import NamedTuple

import bagz
import numpy as np

from searchless.core import bags
from searchless.core import moves
from searchless.core import records
from searchless.plumbing import errors


def check_policy(kind: str) -> None:
  """Raises ValueError unless `kind` is one of the three ChessBench kinds (a policy's records).

  >>> check_policy('state_value')
  >>> check_policy('board_value')  # doctest: +ELLIPSIS
  Traceback (most recent call last):
  ...
  searchless.plumbing.errors.BadInput: unknown policy / record kind 'board_value'; expected one of (...)
  """
  if kind not in records.KINDS:
    raise errors.BadInput(f'unknown policy / record kind {kind!r}; expected one of {records.KINDS}')


class BadRecord(errors.BadInput):
  """A record of a batch that cannot be decoded or turned into a sequence."""

  def __init__(self, position: int, reason: str):
    super().__init__(f'record {position} of the batch: {reason}')
    self.position = position
    self.reason = reason


class Columns(NamedTuple):
  """A decoded batch, one entry per record; fields a kind lacks are None."""

  fens: list[str]  # [B]
  moves: list[str] | None  # [B] action_value, behavioral_cloning
  win_probs: np.ndarray | None  # [B] float64; action_value, state_value


def decode_batch(kind: str, raw: Sequence[bytes]) -> Columns:
  """Decodes a batch of encoded records of `kind` at once; raises `BadRecord`.

  The common case (ASCII strings shorter than 128 bytes, so one-byte length
  prefixes) is decoded with array operations over the joined bytes and one
  latin-1 decode; any other record (or a malformed one) goes through
  `records.decode`. Equal to `records.decode` field by field, floats bit for bit.

  >>> data = [records.encode('action_value', ('8/8/8/8/8/8/8/K1k5 w - - 0 1', m, p))
  ...         for m, p in (('a1a2', 0.5), ('a1b1', 1.0))]
  >>> decode_batch('action_value', data).moves, decode_batch('action_value', data).win_probs.tolist()
  (['a1a2', 'a1b1'], [0.5, 1.0])
  """
  layout = records.LAYOUTS[kind]
  count = len(raw)
  lengths = np.fromiter(map(len, raw), dtype=np.int64, count=count)  # [B]
  ends = np.cumsum(lengths)  # [B]
  starts = ends - lengths  # [B]
  joined = b''.join(raw)  # A list keeps trailing NUL bytes that an 'S' array would drop.
  total = len(joined)
  buf = np.frombuffer(joined + bytes(8), dtype=np.uint8)  # [total + 8], padded for gathers
  high = np.zeros(total + 1, dtype=np.int64)  # high[i] = bytes >= 0x80 in joined[:i]
  np.cumsum(buf[:total] >= 0x80, out=high[1:])

  def is_ascii(begin: np.ndarray, end: np.ndarray) -> np.ndarray:
    return high[np.clip(end, 0, total)] == high[np.clip(begin, 0, total)]

  ok = np.ones(count, dtype=bool)  # [B] records the vectorised path decodes
  pos = starts.copy()  # [B] where the next field starts
  spans, floats = [], []
  for i, component in enumerate(layout):
    if component == 'float':
      ok &= pos + 8 <= ends
      at = np.clip(pos, 0, total)[:, None] + np.arange(8)  # [B, 8]
      floats.append(buf[at].view('>f8')[:, 0].astype(np.float64))
      pos = pos + 8
    elif i + 1 == len(layout):  # The last string runs to the end of the record.
      ok &= (pos <= ends) & is_ascii(pos, ends)
      spans.append((pos, ends))
      pos = ends
    else:
      ok &= pos < ends
      length = buf[np.clip(pos, 0, total)].astype(np.int64)  # One-byte varints only.
      begin, pos = pos + 1, pos + 1 + length
      ok &= (length < 0x80) & (pos <= ends) & is_ascii(begin, pos)
      spans.append((begin, pos))
  ok &= pos == ends

  text = joined.decode('latin-1')  # One char per byte: offsets stay valid.
  strings = [[text[a:b] for a, b in zip(begin.tolist(), end.tolist())] for begin, end in spans]
  for position in np.flatnonzero(~ok).tolist():
    try:
      fields = tuple(records.decode(kind, raw[position]))
    except ValueError as e:
      raise BadRecord(position, f'cannot decode as {kind}: {e}') from None
    for column, value in zip(strings, [f for f, c in zip(fields, layout) if c == 'str']):
      column[position] = value
    for column, value in zip(floats, [f for f, c in zip(fields, layout) if c == 'float']):
      column[position] = value
  return Columns(
    fens=strings[0],
    moves=strings[1] if len(strings) > 1 else None,
    win_probs=floats[0] if floats else None,
  )


def check_win_probs(win_probs: np.ndarray, position: int | None = None) -> None:
  """Raises `BadRecord` at the first win probability outside [0, 1] (NaN included).

  The decoders return what the bytes hold; the loader and the evaluator check
  values with this before they use them.
  """
  bad = np.flatnonzero(~((win_probs >= 0.0) & (win_probs <= 1.0)))
  if bad.size:
    where = int(bad[0]) if position is None else position
    raise BadRecord(where, f'win probability {float(win_probs[bad[0]])!r} is not in [0, 1]')


def check_boards(boards: Sequence[records.BoardValue]) -> None:
  """`check_win_probs` over each board's move values and its own value."""
  for position, board in enumerate(boards):
    check_win_probs(np.array([*board.win_probs, board.state_value], np.float64), position)


def decode_boards(raw: Sequence[bytes]) -> list[records.BoardValue]:
  """Encoded board_value records -> records; raises `BadRecord` naming the record.

  >>> board = records.BoardValue('8/8/8/8/8/8/8/K1k5 w - - 0 1', ('a1a2',), (0.5,), 0.5)
  >>> decode_boards([records.encode('board_value', board)]) == [board]
  True
  """
  out = []
  for position, data in enumerate(raw):
    try:
      board = typing.cast(records.BoardValue, records.decode(records.BOARD_VALUE, data))
    except ValueError as e:
      raise BadRecord(position, f'cannot decode as board_value: {type(e).__name__}: {e}') from None
    out.append(board)
  return out


# --------------------------------------------------------------------------------------
# Which kind a bag holds.


def _fits(kind: str, data: bytes) -> bool:
  if kind in (records.BOARD_VALUE, records.PARTIAL_BOARD_VALUE):
    try:
      board = typing.cast(records.BoardValue, records.decode(kind, data))
    except ValueError:
      return False
    return len(board.moves) == len(board.win_probs) and all(m in moves.MOVE_TO_ACTION for m in board.moves)
  try:
    fields = tuple(records.decode(kind, data))
  except ValueError:
    return False
  return records.LAYOUTS[kind][1] != 'str' or fields[1] in moves.MOVE_TO_ACTION


def check_kind(spec: str, policy: str, reader: bagz.Reader | None = None) -> None:
  """Raises ValueError unless the first, middle and last records of `spec` are `policy` records.

  `policy` is a record kind: one of the three policies, or board_value.
  `reader` is `spec` already opened (else it is opened here).
  """
  if policy != records.BOARD_VALUE:
    check_policy(policy)
  reader = bags.reader(spec) if reader is None else reader
  count = len(reader)
  if count == 0:
    raise errors.BadInput(f'{spec!r} holds no records: nothing to read as {policy} records')
  for index in sorted({0, count // 2, count - 1}):
    data = reader[index]
    if _fits(policy, data):
      continue
    found = [kind for kind in records.ALL_KINDS if kind != policy and _fits(kind, data)]
    what = f'a {found[0]} record' if found else f'not a ChessBench record ({data[:40]!r}...)'
    named = [k for k in records.ALL_KINDS if k in os.path.basename(spec.split(',')[0])]
    named_kind = max(named, key=len) if named else None  # 'partial_board_value' also holds 'board_value'.
    hint = f' (the file name says {named_kind})' if named_kind and named_kind != policy else ''
    convert = (
      ' (searchless-convert SPEC DIR --to board makes board records from action-value records)'
      if policy == records.BOARD_VALUE
      else ''
    )
    raise errors.BadInput(
      f'{"board packing" if convert else f"policy {policy!r}"} needs {policy} records,'
      f' but record {index} of {spec!r} is {what}{hint}{convert}'
    )
