"""Training data: ChessBench bag records -> batches of int32 token sequences, with grain.

A record becomes one sequence, exactly as the reference data loader builds it:

* ``action_value`` (fen, move, win_prob): 77 FEN tokens + action + return bucket (79);
* ``state_value`` (fen, win_prob): 77 FEN tokens + return bucket (78);
* ``behavioral_cloning`` (fen, move): 77 FEN tokens + action (78).

Buckets are `values.uniform_buckets` with ties to the lower bucket; actions are
`moves.MOVE_TO_ACTION`; tokens are `tokenizer.tokenize_batch`.

Board packing (``max_moves=M``, for ``model.packing='board'``): the records
are ``board_value`` records (`searchless.boards`) and a board becomes one row
of ``77 + 2M`` int32: its 77 FEN tokens, M move slots (the actions of its legal
moves in the reference order, -1 in unused slots) and M targets (each move's
return bucket, -1 in unused slots). A board with more than M legal moves keeps
M of them, drawn per board and epoch (`packed_rows`); every move is scored at
evaluation, where M covers the largest board.

Speed: the unit grain moves around is a *batch*, not a record. Item ``u`` of
the data source (`BagBatches`) is the raw bytes of one per-process batch, read
with one ``bagz.Reader.read_indices`` call; `ToSequences` then decodes the
whole batch at once (`decode_batch`: one join, vectorised offsets, one
latin-1 decode) and tokenizes it with one lookup. Nothing is done per record
in grain.

Order: epoch ``e`` visits the records in the order of `permute` (a keyed
pseudo-random bijection of ``[0, num_records)``, new for every epoch; the
identity when not shuffling). Global batch ``b`` of an epoch is positions
``[b * batch_size, (b + 1) * batch_size)`` of that order and process ``p`` of
``S`` gets the ``p``-th contiguous slice of it, so the global batch (and the
model's updates) do not depend on how many processes or grain workers read
it. ``batch_size`` is GLOBAL; each process yields ``batch_size // S``
sequences. With ``drop_remainder`` the last ``num_records % batch_size``
positions of every epoch are skipped (different records each epoch when
shuffling). (grain's own ``IndexSampler`` is not used for this: with
``ShardOptions`` it gives each process a fixed contiguous part of the records
to shuffle within, and per-record items make the batches depend on the number
of workers. Here grain's ``SequentialSampler`` and ``ShardOptions`` deal out
the batches, and the shuffle is `permute`'s.)

Checkpointing: the loader's iterator state is a small JSON ``bytes``::

    it = iter(loader)
    ... next(it) ...
    state = it.get_state()    # save it next to the model (e.g. in the orbax checkpoint)
    it = iter(same_loader_config)
    it.set_state(state)       # continues exactly where `state` was taken

(``grain.checkpoint.CheckpointSave`` / ``CheckpointRestore`` wrap the same for
orbax's ``CheckpointManager``). Restore with the same spec, batch size,
shuffle, seed, epochs, process count and worker count: grain refuses a state
whose sampler, source or worker count differ.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), 'state_value_data.bag')
>>> bags.write_records(path, 'state_value', [('8/8/8/8/8/8/8/K1k5 w - - 0 1', p / 10) for p in range(8)])
8
>>> loader = build_loader(path, policy='state_value', num_return_buckets=4, batch_size=4,
...                       shuffle=False, seed=0, num_epochs=1, worker_count=0)
>>> batches = list(loader)
>>> [b.shape for b in batches], batches[0].dtype
([(4, 78), (4, 78)], dtype('int32'))
>>> [b[:, -1].tolist() for b in batches]  # the return bucket of each record
[[0, 0, 0, 1], [1, 1, 2, 2]]
"""

from collections.abc import Sequence
import os
import struct
from typing import TYPE_CHECKING, NamedTuple

from absl import flags
import bagz
import grain
import numpy as np

from searchless import bags
from searchless import moves
from searchless import records
from searchless import tokenizer
from searchless import values

if TYPE_CHECKING:
  import jax

SEQUENCE_LENGTHS = records.SEQUENCE_LENGTHS

# The TupleCoder layout of each kind: 'str' = StrUtf8Coder, 'float' = FloatCoder.
# Every component but the last is nested (a str gets a varint length prefix); the
# last str is the rest of the record. A float is 8 big-endian bytes either way.
_LAYOUTS = {
    'action_value': ('str', 'str', 'float'),
    'state_value': ('str', 'float'),
    'behavioral_cloning': ('str', 'str'),
}
_INFINITE_UNITS = 2**62  # Length of the data source when epochs never end.


def _check_kind(kind: str) -> None:
  if kind not in _LAYOUTS:
    raise ValueError(f'unknown policy / record kind {kind!r}; expected one of {records.KINDS}')


# --------------------------------------------------------------------------------------
# Decoding.


class BadRecord(ValueError):
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


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
  """Reads Beam's unsigned LEB128 varint at `pos`; returns (value, next position)."""
  value, shift = 0, 0
  while True:
    if pos >= len(data):
      raise ValueError('truncated length prefix')
    byte = data[pos]
    pos += 1
    value |= (byte & 0x7F) << shift
    if not byte & 0x80:
      return value, pos
    shift += 7
    if shift >= 70:
      raise ValueError('length prefix longer than 10 bytes')


def decode_one(kind: str, data: bytes) -> tuple:
  """Decodes one record exactly (the slow path of `decode_batch`); strict about trailing bytes.

  Unlike Beam's decoder it rejects bytes left over after the last component, so a
  record of another kind is not silently misread.

  >>> decode_one('action_value', records.encode('action_value', ('8/8/8/8/8/8/8/K1k5 w - - 0 1', 'a1a2', 0.5)))
  ('8/8/8/8/8/8/8/K1k5 w - - 0 1', 'a1a2', 0.5)
  >>> decode_one('state_value', records.encode('action_value', ('8/8/8/8/8/8/8/K1k5 w - - 0 1', 'a1a2', 0.5)))
  Traceback (most recent call last):
  ...
  ValueError: 5 bytes left after the last component
  """
  layout = _LAYOUTS[kind]
  fields, pos = [], 0
  for i, component in enumerate(layout):
    if component == 'float':
      if pos + 8 > len(data):
        raise ValueError(f'truncated: {len(data) - pos} bytes left for an 8-byte float')
      fields.append(struct.unpack_from('>d', data, pos)[0])
      pos += 8
      continue
    if i + 1 == len(layout):  # The last string is the rest of the record.
      start, pos = pos, len(data)
    else:
      length, start = _read_varint(data, pos)
      pos = start + length
      if pos > len(data):
        raise ValueError(f'truncated: a string of {length} bytes but {len(data) - start} left')
    fields.append(data[start:pos].decode('utf-8'))
  if pos != len(data):
    raise ValueError(f'{len(data) - pos} bytes left after the last component')
  return tuple(fields)


def decode_batch(kind: str, raw: Sequence[bytes]) -> Columns:
  """Decodes a batch of encoded records of `kind` at once; raises `BadRecord`.

  The common case (ASCII strings shorter than 128 bytes, so one-byte length
  prefixes) is decoded with array operations over the joined bytes and one
  latin-1 decode; any other record (or a malformed one) goes through
  `decode_one`. Equal to `records.decode` field by field, floats bit for bit.

  >>> data = [records.encode('action_value', ('8/8/8/8/8/8/8/K1k5 w - - 0 1', m, p))
  ...         for m, p in (('a1a2', 0.5), ('a1b1', 1.0))]
  >>> decode_batch('action_value', data).moves, decode_batch('action_value', data).win_probs.tolist()
  (['a1a2', 'a1b1'], [0.5, 1.0])
  """
  layout = _LAYOUTS[kind]
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
      fields = decode_one(kind, raw[position])
    except (ValueError, UnicodeDecodeError) as e:
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


# --------------------------------------------------------------------------------------
# Sequences.

_MOVE_TO_ACTION = moves.MOVE_TO_ACTION


def _tokenize(fens: Sequence[str]) -> np.ndarray:
  """[B] FENs -> [B, 77] tokens; raises `BadRecord` naming the first FEN that does not tokenize."""
  try:
    return tokenizer.tokenize_batch(fens)
  except ValueError:
    for position, fen in enumerate(fens):  # Find the offending record.
      try:
        tokenizer.tokenize(fen)
      except ValueError as e:
        raise BadRecord(position, str(e)) from None
    raise


def columns_to_sequences(kind: str, columns: Columns, return_edges: np.ndarray) -> np.ndarray:
  """A decoded batch -> [B, T] int32 sequences; raises `BadRecord` naming the record."""
  count = len(columns.fens)
  sequences = np.empty((count, SEQUENCE_LENGTHS[kind]), dtype=np.int32)  # [B, T]
  sequences[:, : tokenizer.SEQUENCE_LENGTH] = _tokenize(columns.fens)  # [B, 77]
  column = tokenizer.SEQUENCE_LENGTH
  if columns.moves is not None:
    actions = np.fromiter((_MOVE_TO_ACTION.get(m, -1) for m in columns.moves), dtype=np.int32, count=count)
    if count and actions.min() < 0:
      position = int(np.argmin(actions))
      raise BadRecord(position, f'move {columns.moves[position]!r} is not a move of the 1968-move vocabulary')
    sequences[:, column] = actions  # [B]
    column += 1
  if columns.win_probs is not None:
    win_probs = columns.win_probs  # [B]
    outside = ~((win_probs >= 0.0) & (win_probs <= 1.0))  # NaN is outside too.
    if outside.any():
      position = int(np.argmax(outside))
      raise BadRecord(position, f'win probability {float(win_probs[position])!r} is not in [0, 1]')
    sequences[:, column] = values.win_probabilities_to_buckets(win_probs, return_edges)
  return sequences


def to_sequences(kind: str, raw: Sequence[bytes], num_return_buckets: int) -> np.ndarray:
  """Encoded records of `kind` -> [B, T] int32 sequences (decode + tokenize, vectorised).

  >>> raw = [records.encode('behavioral_cloning', ('8/8/8/8/8/8/8/K1k5 w - - 0 1', 'a1a2'))]
  >>> to_sequences('behavioral_cloning', raw, 128)[0, -7:].tolist()  # clocks '0..' and '1..', then a1a2
  [0, 30, 30, 1, 30, 30, 7]
  """
  _check_kind(kind)
  edges, _ = values.uniform_buckets(num_return_buckets)
  return columns_to_sequences(kind, decode_batch(kind, raw), edges)


# --------------------------------------------------------------------------------------
# Order.

_MASK64 = (1 << 64) - 1


def _splitmix64(x: int) -> int:
  x = (x + 0x9E3779B97F4A7C15) & _MASK64
  x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
  x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
  return x ^ (x >> 31)


def _mix(x: np.ndarray) -> np.ndarray:
  """splitmix64's finaliser on uint64 arrays (multiplication wraps modulo 2**64)."""
  x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
  x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
  return x ^ (x >> np.uint64(31))


def permute(positions: np.ndarray, num_records: int, seed: int, epoch: int, rounds: int = 6) -> np.ndarray:
  """The record index at each of `positions` in epoch `epoch`'s shuffled order.

  A keyed bijection of ``[0, num_records)``: a `rounds`-round Feistel network on
  the smallest even number of bits that holds ``num_records - 1`` (splitmix64
  round function, keys from seed and epoch), cycle-walked back into range.
  Stateless, so any position of any epoch costs the same: no permutation table
  is stored, whatever the dataset size.

  >>> order = permute(np.arange(10), 10, seed=0, epoch=0)
  >>> sorted(order.tolist()) == list(range(10)), order.tolist() == list(range(10))
  (True, False)
  """
  if num_records < 1:
    raise ValueError(f'num_records must be positive, got {num_records}')
  half = max(1, ((num_records - 1).bit_length() + 1) // 2)
  shift, mask = np.uint64(half), np.uint64((1 << half) - 1)
  key = _splitmix64(_splitmix64(seed) ^ epoch)
  keys = []
  for _ in range(rounds):
    key = _splitmix64(key)
    keys.append(np.uint64(key))

  def feistel(x: np.ndarray) -> np.ndarray:
    left, right = x >> shift, x & mask
    for k in keys:
      left, right = right, left ^ (_mix(right ^ k) & mask)
    return (left << shift) | right

  out = feistel(np.asarray(positions, dtype=np.uint64))
  outside = out >= np.uint64(num_records)
  while outside.any():  # Cycle-walk: the domain is < 4 * num_records, so ~<4 passes.
    out[outside] = feistel(out[outside])
    outside = out >= np.uint64(num_records)
  return out.astype(np.int64)


# --------------------------------------------------------------------------------------
# grain: a data source of raw batches, and the transform that decodes them.


class RawBatch(NamedTuple):
  indices: np.ndarray  # [B] int64 record indices in the bag
  records: list[bytes]  # [B] their encoded bytes (a list: keeps trailing NULs)
  epoch: int = 0  # The pass over the records this batch belongs to.


class BagBatches:
  """grain data source: item ``u`` is the raw records of one per-process batch.

  ``u // shard_count`` is the global step and ``u % shard_count`` the process
  whose slice of that step's global batch it holds (grain's ``ShardOptions``
  hands process ``p`` the items ``u % shard_count == p``). Picklable for grain's
  worker processes: the reader is reopened on unpickling.
  """

  def __init__(
      self,
      spec: str,
      *,
      batch_size: int,
      shard_count: int = 1,
      shuffle: bool,
      seed: int,
      num_epochs: int | None,
      num_records: int | None = None,
      drop_remainder: bool = True,
      read_parallelism: int = 1,
  ):
    if batch_size < 1:
      raise ValueError(f'batch_size must be positive, got {batch_size}')
    if shard_count < 1 or batch_size % shard_count:
      raise ValueError(
          f'batch_size {batch_size} is global and must be divisible by the number of processes ({shard_count})'
      )
    if not drop_remainder and shard_count > 1:
      raise ValueError('drop_remainder=False needs a single process (a short last batch cannot be split evenly)')
    if num_epochs is not None and num_epochs < 1:
      raise ValueError(f'num_epochs must be positive or None (forever), got {num_epochs}')
    if not isinstance(seed, int) or seed < 0:
      raise ValueError(f'seed must be a non-negative int, got {seed!r}')
    self._spec = spec
    self._read_parallelism = read_parallelism
    self._reader = self._open()
    available = len(self._reader)
    if num_records is None:
      num_records = available
    elif not 0 < num_records <= available:
      raise ValueError(f'num_records={num_records} but {spec!r} holds {available} records')
    if num_records == 0:
      raise ValueError(f'{spec!r} holds no records')
    if drop_remainder and num_records < batch_size:
      raise ValueError(f'{spec!r}: {num_records} records are fewer than one batch of {batch_size}')
    self._num_records = num_records
    self._batch_size = batch_size
    self._shard_count = shard_count
    self._local_batch_size = batch_size // shard_count
    self._shuffle = shuffle
    self._seed = seed
    self._num_epochs = num_epochs
    self._drop_remainder = drop_remainder
    self.steps_per_epoch = num_records // batch_size if drop_remainder else -(-num_records // batch_size)

  def _open(self) -> bagz.Reader:
    reader = bags.reader(self._spec)  # Names the spec if it cannot be opened.
    # bagz reads the records of one `read_indices` call on up to 100 threads by
    # default: 10x slower than one thread for a local file (measured on 2 cores).
    options = bagz.Reader.Options(max_parallelism=self._read_parallelism)
    return bagz.Reader(reader.file_spec, options)

  @property
  def spec(self) -> str:
    return self._spec

  @property
  def num_records(self) -> int:
    return self._num_records

  def __len__(self) -> int:
    if self._num_epochs is None:
      return _INFINITE_UNITS
    return self.steps_per_epoch * self._num_epochs * self._shard_count

  def record_indices(self, unit: int) -> np.ndarray:
    """[B_local] int64: the bag indices of the records of item `unit`."""
    step, shard = divmod(unit, self._shard_count)
    epoch, batch = divmod(step, self.steps_per_epoch)
    start = batch * self._batch_size + shard * self._local_batch_size
    stop = min(start + self._local_batch_size, self._num_records)  # Short only if not drop_remainder.
    positions = np.arange(start, stop, dtype=np.int64)
    if not self._shuffle:
      return positions
    return permute(positions, self._num_records, self._seed, epoch)

  def __getitem__(self, unit: int) -> RawBatch:
    indices = self.record_indices(unit)
    epoch = unit // self._shard_count // self.steps_per_epoch
    return RawBatch(indices, self._reader.read_indices(indices), epoch)

  def __getstate__(self) -> dict:
    state = self.__dict__.copy()
    del state['_reader']
    return state

  def __setstate__(self, state: dict) -> None:
    self.__dict__.update(state)
    self._reader = self._open()

  def __repr__(self) -> str:  # grain compares it when restoring an iterator state.
    return (
        f'BagBatches(spec={self._spec!r}, num_records={self._num_records}, batch_size={self._batch_size},'
        f' shard_count={self._shard_count}, shuffle={self._shuffle}, seed={self._seed},'
        f' num_epochs={self._num_epochs}, drop_remainder={self._drop_remainder})'
    )


class ToSequences(grain.transforms.Map):
  """grain transform: a `RawBatch` -> [B_local, T] int32 sequences, naming bad records."""

  def __init__(self, policy: str, num_return_buckets: int, spec: str):
    _check_kind(policy)
    self._policy = policy
    self._spec = spec
    self._edges, _ = values.uniform_buckets(num_return_buckets)

  def map(self, element: RawBatch) -> np.ndarray:
    try:
      columns = decode_batch(self._policy, element.records)
      return columns_to_sequences(self._policy, columns, self._edges)
    except BadRecord as e:
      raise ValueError(f'{self._spec!r}, record {int(element.indices[e.position])}: {e.reason}') from None


def packed_rows(boards: Sequence[records.BoardValue], max_moves: int, return_edges: np.ndarray, *,
                indices: Sequence[int] | None = None, epoch: int = 0) -> np.ndarray:
  """Board records -> [B, 77 + 2M] int32 packed rows (FEN, M actions, M buckets; -1 = no move).

  A board with more than `max_moves` moves keeps `max_moves` of them (in their
  order), drawn by a generator seeded with (record index, epoch): the same
  rows whatever the workers or processes. Raises `BadRecord` naming the board.

  >>> board = records.BoardValue('7k/8/8/8/8/8/8/K7 w - - 0 1', ('a1b1', 'a1a2', 'a1b2'), (0.5, 0.2, 0.9), 0.9)
  >>> row = packed_rows([board], 4, values.uniform_buckets(4)[0])[0]
  >>> row[77:81].tolist(), row[81:].tolist()  # actions, buckets
  ([0, 7, 8, -1], [1, 0, 3, -1])
  """
  count = len(boards)
  rows = np.full((count, tokenizer.SEQUENCE_LENGTH + 2 * max_moves), -1, dtype=np.int32)  # [B, 77 + 2M]
  rows[:, :tokenizer.SEQUENCE_LENGTH] = _tokenize([b.fen for b in boards])  # [B, 77]
  actions_at, buckets_at = tokenizer.SEQUENCE_LENGTH, tokenizer.SEQUENCE_LENGTH + max_moves
  for position, board in enumerate(boards):
    num = len(board.moves)
    if len(board.win_probs) != num:
      raise BadRecord(position, f'{num} moves but {len(board.win_probs)} win probabilities')
    keep = np.arange(num)
    if num > max_moves:
      index = position if indices is None else int(indices[position])
      keep = np.sort(np.random.default_rng((index, epoch)).choice(num, max_moves, replace=False))
    actions = [_MOVE_TO_ACTION.get(board.moves[i], -1) for i in keep]
    if min(actions, default=0) < 0:
      raise BadRecord(position, f'move {board.moves[keep[actions.index(-1)]]!r} is not a move of the 1968-move vocabulary')
    win_probs = np.asarray(board.win_probs, np.float64)[keep]
    if not np.all((win_probs >= 0.0) & (win_probs <= 1.0)):
      raise BadRecord(position, f'a win probability is not in [0, 1]: {win_probs.tolist()}')
    rows[position, actions_at:actions_at + len(keep)] = actions
    rows[position, buckets_at:buckets_at + len(keep)] = values.win_probabilities_to_buckets(win_probs, return_edges)
  return rows


def decode_boards(raw: Sequence[bytes]) -> list[records.BoardValue]:
  """Encoded board_value records -> records; raises `BadRecord` naming the record."""
  out = []
  for position, data in enumerate(raw):
    try:
      out.append(records.decode(records.BOARD_VALUE, data))
    except ValueError as e:
      raise BadRecord(position, f'cannot decode as board_value: {type(e).__name__}: {e}') from None
  return out


class ToPackedRows(grain.transforms.Map):
  """grain transform: a `RawBatch` of board_value records -> [B_local, 77 + 2M] packed rows."""

  def __init__(self, max_moves: int, num_return_buckets: int, spec: str):
    if max_moves < 1:
      raise ValueError(f'max_moves must be positive, got {max_moves}')
    self._max_moves = max_moves
    self._spec = spec
    self._edges, _ = values.uniform_buckets(num_return_buckets)

  def map(self, element: RawBatch) -> np.ndarray:
    try:
      return packed_rows(decode_boards(element.records), self._max_moves, self._edges,
                         indices=element.indices, epoch=element.epoch)
    except BadRecord as e:
      raise ValueError(f'{self._spec!r}, record {int(element.indices[e.position])}: {e.reason}') from None


# --------------------------------------------------------------------------------------
# Loaders.


def _fits(kind: str, data: bytes) -> bool:
  if kind == records.BOARD_VALUE:
    try:
      board = records.decode(kind, data)
    except ValueError:
      return False
    return len(board.moves) == len(board.win_probs) and all(m in _MOVE_TO_ACTION for m in board.moves)
  try:
    fields = decode_one(kind, data)
  except (ValueError, UnicodeDecodeError):
    return False
  return _LAYOUTS[kind][1] != 'str' or fields[1] in _MOVE_TO_ACTION


def check_kind(spec: str, policy: str, reader=None) -> None:
  """Raises ValueError unless the first, middle and last records of `spec` are `policy` records.

  `policy` is a record kind: one of the three policies, or board_value.
  """
  if policy != records.BOARD_VALUE:
    _check_kind(policy)
  reader = bags.reader(spec) if reader is None else reader
  count = len(reader)
  for index in sorted({0, count // 2, count - 1} - {-1}):
    data = reader[index]
    if _fits(policy, data):
      continue
    found = [kind for kind in records.ALL_KINDS if kind != policy and _fits(kind, data)]
    what = f'a {found[0]} record' if found else f'not a ChessBench record ({data[:40]!r}...)'
    named = [k for k in records.ALL_KINDS if k in os.path.basename(spec.split(',')[0])]
    hint = f' (the file name says {named[0]})' if named and named[0] != policy else ''
    convert = (' (searchless-convert SPEC DIR --to board makes board records from action-value records)'
               if policy == records.BOARD_VALUE else '')
    raise ValueError(f'{"board packing" if convert else f"policy {policy!r}"} needs {policy} records,'
                     f' but record {index} of {spec!r} is {what}{hint}{convert}')


def build_loader(
    spec: str,
    *,
    policy: str,
    num_return_buckets: int,
    batch_size: int,
    shuffle: bool,
    seed: int,
    num_epochs: int | None,
    worker_count: int,
    shard_index: int = 0,
    shard_count: int = 1,
    num_records: int | None = None,
    drop_remainder: bool = True,
    worker_buffer_size: int = 2,
    read_threads: int = 0,
    read_parallelism: int = 1,
    max_moves: int | None = None,
) -> grain.DataLoader:
  """A grain loader of `policy` sequences from the bag(s) `spec`; yields [B_local, T] int32 arrays.

  With `max_moves` (board packing; policy action_value) the records are
  board_value records and each row is one board: [B_local, 77 + 2 * max_moves]
  (`packed_rows`); `batch_size` then counts boards.

  Args:
    spec: a bag file, ``name@N_data.bag`` spec, glob or comma-separated list.
    policy: action_value | state_value | behavioral_cloning (the records' kind).
    num_return_buckets: uniform win-probability buckets (value classes).
    batch_size: the GLOBAL batch: all `shard_count` processes together. Each
      process yields ``batch_size // shard_count`` sequences per step, its
      contiguous slice of the global batch.
    shuffle: a global uniform shuffle, new every epoch (`permute`), else bag order.
    seed: shuffle seed (a non-negative int).
    num_epochs: passes over the records; None = forever.
    worker_count: grain worker processes (0 = decode in this process). Output
      order and content do not depend on it.
    shard_index, shard_count: this process and the number of processes
      (``jax.process_index()`` / ``jax.process_count()``).
    num_records: use only the first N records of `spec` (None = all).
    drop_remainder: skip the last partial batch of each epoch (needed with
      more than one process); else the last batch of an epoch may be short.
    worker_buffer_size: batches each worker prepares ahead.
    read_threads: grain threads that read raw batches ahead in each process.
    read_parallelism: bagz threads per batch read (1 suits local files; more
      may help on remote storage such as gs://).
  """
  _check_kind(policy)
  if not 0 <= shard_index < shard_count:
    raise ValueError(f'shard_index {shard_index} is not in [0, shard_count={shard_count})')
  if worker_count < 0:
    raise ValueError(f'worker_count must be >= 0, got {worker_count}')
  if worker_count > 0 and not flags.FLAGS.is_parsed():
    # grain (0.2.18) reads absl flags when it starts workers; a program not run
    # by absl.app has not parsed them, so take their defaults.
    flags.FLAGS.mark_as_parsed()
  source = BagBatches(
      spec,
      batch_size=batch_size,
      shard_count=shard_count,
      shuffle=shuffle,
      seed=seed,
      num_epochs=num_epochs,
      num_records=num_records,
      drop_remainder=drop_remainder,
      read_parallelism=read_parallelism,
  )
  if max_moves is not None:
    if policy != records.KINDS[0]:
      raise ValueError(f'board packing needs policy action_value, got {policy!r}')
    check_kind(spec, records.BOARD_VALUE, source._reader)  # pylint: disable=protected-access
    operation = ToPackedRows(max_moves, num_return_buckets, spec)
  else:
    check_kind(spec, policy, source._reader)  # pylint: disable=protected-access
    operation = ToSequences(policy, num_return_buckets, spec)
  shard_options = grain.sharding.ShardOptions(shard_index, shard_count, drop_remainder=True)
  return grain.DataLoader(
      data_source=source,
      # Items are already in training order (the shuffle is in `permute`):
      # the sampler walks them in sequence and ShardOptions deals them out.
      sampler=grain.samplers.SequentialSampler(len(source), shard_options),
      operations=[operation],
      worker_count=worker_count,
      worker_buffer_size=worker_buffer_size,
      shard_options=shard_options,
      read_options=grain.ReadOptions(num_threads=read_threads, prefetch_buffer_size=2 * read_threads),
  )


def config_loader(
    config,
    *,
    split: str = 'train',
    process_index: int | None = None,
    process_count: int | None = None,
) -> grain.DataLoader:
  """The loader of an experiment config's ``data.train`` or ``data.eval`` records, forever.

  Reads ``config.policy``, ``config.num_return_buckets``, ``config.model.packing``
  and ``config.data.{train, eval, batch_size, shuffle, seed, worker_count,
  num_records, max_moves}``; this process's
  slice of each global batch by ``jax.process_index()`` of ``jax.process_count()``
  unless given. ``num_records`` applies to the training split only. A fresh eval
  loader yields the same batches every time (same seed), so successive
  evaluations on its first batches compare like with like.
  """
  if split not in ('train', 'eval'):
    raise ValueError(f"split must be 'train' or 'eval', got {split!r}")
  spec = config.data.train if split == 'train' else config.data.eval
  if not spec:
    raise ValueError(f'config.data.{split} is empty: no {split} records to load')
  if process_index is None or process_count is None:
    import jax  # pylint: disable=g-import-not-at-top  # Not in grain workers' imports.

    process_index = jax.process_index() if process_index is None else process_index
    process_count = jax.process_count() if process_count is None else process_count
  return build_loader(
      spec,
      policy=config.policy,
      num_return_buckets=config.num_return_buckets,
      batch_size=config.data.batch_size,
      shuffle=config.data.shuffle,
      seed=config.data.seed,
      num_epochs=None,
      worker_count=config.data.worker_count,
      shard_index=process_index,
      shard_count=process_count,
      num_records=config.data.num_records if split == 'train' else None,
      max_moves=config.data.max_moves if packed(config) else None,
  )


def packed(config) -> bool:
  """Whether an experiment config trains the board-packed model (board_value records)."""
  return config.model.get('packing', 'none') == 'board'


def global_batch(local_sequences: np.ndarray, sharding: 'jax.sharding.Sharding') -> 'jax.Array':
  """This process's [B_local, T] batch -> the global [B_local * processes, T] jax.Array on `sharding`.

  `sharding` splits the batch dimension over all devices (e.g.
  ``NamedSharding(mesh, P(('data', 'fsdp'), None))``); process ``p``'s rows are
  rows ``[p * B_local, (p + 1) * B_local)`` of the global batch, as the loader
  deals them out (devices ordered by process, as ``jax.devices()`` is).
  """
  import jax  # pylint: disable=g-import-not-at-top

  return jax.make_array_from_process_local_data(sharding, local_sequences)
