"""Training data: ChessBench bag records -> batches of int32 token rows, with grain.

Each record becomes one sequence (`searchless.data.sequences`); with board
packing (``max_moves=M``, for ``model.packing='board'``) each board_value
record becomes one row of ``77 + 2M + 1`` (`searchless.data.packing`).

Speed: the unit grain moves around is a *batch*, not a record. Item ``u`` of
the data source (`BagBatches`) is the raw bytes of one per-process batch, read
with one ``bagz.Reader.read_indices`` call; `ToSequences` then decodes the
whole batch at once (`codecs.decode_batch`: one join, vectorised offsets, one
latin-1 decode) and tokenizes it with one lookup. Nothing is done per record
in grain.

Order: epoch ``e`` visits the records in the order of `shuffle.permute` (a keyed
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
the batches, and the shuffle is `shuffle.permute`'s.)

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

import os
from typing import Any, NamedTuple

from absl import flags
import bagz
import grain
import numpy as np

from searchless.core import bags
from searchless.core import codecs
from searchless.core import records
from searchless.core import values
from searchless.data import packing
from searchless.data import sequences
from searchless.data import shuffle as shuffle_lib
from searchless.plumbing import errors


_INFINITE_UNITS = 2**62  # Length of the data source when epochs never end.


# --------------------------------------------------------------------------------------
# grain: a data source of raw batches, and the transforms that decode them.


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
      raise errors.BadInput(f'batch_size must be positive, got {batch_size}')
    if shard_count < 1 or batch_size % shard_count:
      raise errors.BadInput(
        f'batch_size {batch_size} is global and must be divisible by the number of processes ({shard_count})'
      )
    if not drop_remainder and shard_count > 1:
      raise errors.BadInput('drop_remainder=False needs a single process (a short last batch cannot be split evenly)')
    if num_epochs is not None and num_epochs < 1:
      raise errors.BadInput(f'num_epochs must be positive or None (forever), got {num_epochs}')
    if not isinstance(seed, int) or seed < 0:
      raise errors.BadInput(f'seed must be a non-negative int, got {seed!r}')
    self._spec = spec
    self._read_parallelism = read_parallelism
    self._reader = self._open()
    available = len(self._reader)
    if num_records is None:
      num_records = available
    elif not 0 < num_records <= available:
      raise errors.BadInput(f'num_records={num_records} but {spec!r} holds {available} records')
    if num_records == 0:
      raise errors.BadInput(f'{spec!r} holds no records')
    if drop_remainder and num_records < batch_size:
      raise errors.BadInput(f'{spec!r}: {num_records} records are fewer than one batch of {batch_size}')
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
    return shuffle_lib.permute(positions, self._num_records, self._seed, epoch)

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
    codecs.check_policy(policy)
    self._policy = policy
    self._spec = spec
    self._edges, _ = values.uniform_buckets(num_return_buckets)

  def map(self, element: RawBatch) -> np.ndarray:
    try:
      columns = codecs.decode_batch(self._policy, element.records)
      return sequences.columns_to_sequences(self._policy, columns, self._edges)
    except codecs.BadRecord as e:
      raise errors.BadInput(f'{self._spec!r}, record {int(element.indices[e.position])}: {e.reason}') from None


class ToPackedRows(grain.transforms.Map):
  """grain transform: a `RawBatch` of board_value records -> [B_local, 77 + 2M + 1] packed rows."""

  def __init__(self, max_moves: int, num_return_buckets: int, spec: str):
    if max_moves < 1:
      raise errors.BadInput(f'max_moves must be positive, got {max_moves}')
    self._max_moves = max_moves
    self._spec = spec
    self._edges, _ = values.uniform_buckets(num_return_buckets)
    # Which records may be partial: those of partial_board_value files (ChessBench names a bag by its kind).
    files = bags.expand(spec).split(',')
    self._starts = np.cumsum([0] + [len(bags.reader(f)) for f in files])[:-1]  # [F] each file's first record.
    self._partial_file = np.array([records.PARTIAL_BOARD_VALUE in os.path.basename(f) for f in files])  # [F]

  def map(self, element: RawBatch) -> np.ndarray:
    partial = self._partial_file[np.searchsorted(self._starts, element.indices, side='right') - 1]  # [B_local]
    try:
      return packing.packed_rows(
        codecs.decode_boards(element.records),
        self._max_moves,
        self._edges,
        indices=element.indices,
        epoch=element.epoch,
        partial=partial,
      )
    except codecs.BadRecord as e:
      raise errors.BadInput(f'{self._spec!r}, record {int(element.indices[e.position])}: {e.reason}') from None


# --------------------------------------------------------------------------------------
# Loaders.


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
  board_value (or partial_board_value) records and each row is one board: [B_local, 77 + 2 * max_moves + 1]
  (`packing.packed_rows`); `batch_size` then counts boards.

  Args:
    spec: a bag file, ``name@N_data.bag`` spec, glob or comma-separated list.
    policy: action_value | state_value | behavioral_cloning (the records' kind).
    num_return_buckets: uniform win-probability buckets (value classes).
    batch_size: the GLOBAL batch: all `shard_count` processes together. Each
      process yields ``batch_size // shard_count`` sequences per step, its
      contiguous slice of the global batch.
    shuffle: a global uniform shuffle, new every epoch (`shuffle.permute`), else bag order.
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
  codecs.check_policy(policy)
  if not 0 <= shard_index < shard_count:
    raise ValueError(f'shard_index {shard_index} is not in [0, shard_count={shard_count})')
  if worker_count < 0:
    raise ValueError(f'worker_count must be >= 0, got {worker_count}')
  if worker_count > 0 and not flags.FLAGS.is_parsed():
    # grain (0.2.18) reads absl flags when it starts workers. Parsing them is the program's business, not a
    # library's: searchless's commands do (`plumbing.cli`).
    raise ValueError(
      f'worker_count={worker_count}: grain reads absl flags in its worker processes and this program '
      'has not parsed them: parse them first (absl.app.run, or absl.flags.FLAGS.mark_as_parsed() for '
      "their defaults, as searchless's commands do), or use worker_count=0"
    )
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
      raise errors.BadInput(f'board packing needs policy action_value, got {policy!r}')
    codecs.check_kind(spec, records.BOARD_VALUE, source._reader)  # pylint: disable=protected-access
    operation = ToPackedRows(max_moves, num_return_buckets, spec)
  else:
    codecs.check_kind(spec, policy, source._reader)  # pylint: disable=protected-access
    operation = ToSequences(policy, num_return_buckets, spec)
  shard_options = grain.sharding.ShardOptions(shard_index, shard_count, drop_remainder=True)
  return grain.DataLoader(
    data_source=source,
    # Items are already in training order (the shuffle is in `shuffle.permute`):
    # the sampler walks them in sequence and ShardOptions deals them out.
    sampler=grain.samplers.SequentialSampler(len(source), shard_options),
    operations=[operation],
    worker_count=worker_count,
    worker_buffer_size=worker_buffer_size,
    shard_options=shard_options,
    read_options=grain.ReadOptions(num_threads=read_threads, prefetch_buffer_size=2 * read_threads),
  )


def config_loader(
  config: Any,
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
    raise errors.BadInput(f'config.data.{split} is empty: no {split} records to load')
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
    max_moves=config.data.max_moves if packing.packed(config) else None,
  )
