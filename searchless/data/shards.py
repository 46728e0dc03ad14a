"""Output files of a Beam job, written without Beam's file sinks, then committed by the driver.

Beam's `WriteToText`/`WriteToBagz` finalize through side inputs, which Beam's
Dask runner does not pass (it hands the DoFn the ``AsIter`` object itself).
Here a record set is written in two steps that any runner executes:

1. in the pipeline, `WriteShards`: the records of every set (`RecordSet`) are
   keyed by a stable hash of their board (`bucket_of`), grouped (one
   GroupByKey for all sets), sorted by their encoded bytes and written as
   *pieces* under a temporary folder; each written piece is an output element
   (a `Piece`), so a retried bundle's stray file is never mistaken for data;
2. after the pipeline, in the driver, `commit`: the pieces the job reported are
   renamed to their final names (one file ``<kind>_data.bag``, or shards
   ``<kind>-00000-of-0000N_data.bag``), older files of the same set are
   removed, missing fixed shards are written empty, and the temporary folder
   is deleted.

The records of a shard are sorted, so the same records give the same bytes on
every runner and worker count. With a fixed `num_shards`, each record's shard
is fixed too; with ``num_shards=0`` (`AUTO`) the job's estimated size
(`auto_buckets`) sets how many writers run, and each writer starts a new
shard every `records_per_shard` records.
"""

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
import dataclasses
import hashlib
import math
from typing import Any
import uuid

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.pvalue import PCollection
import bagz

from searchless.plumbing import errors
from searchless.plumbing import files

AUTO = 0  # num_shards: as many shards as the data needs (see `auto_buckets`).
DEFAULT_RECORDS_PER_SHARD = 1_000_000  # Records per shard at most when num_shards is AUTO.
TMP_DIR = '.searchless-tmp'  # Under the job's output folder while it runs; removed by `commit`.

# Size estimates for AUTO, measured on the shared Lichess games (benchmarks/studies/parse_scaling.py):
# 1,121 bytes of PGN per game, 62.4 unique boards per game, 29.4 legal moves per board.
PGN_BYTES_PER_BOARD = 18
PGN_BYTES_PER_GAME = 1121
ZSTD_RATIO = 5  # A .zst dump holds about this many times its size in PGN text.
MOVES_PER_BOARD = 30


@dataclasses.dataclass(frozen=True)
class ShardSpec:
  """One output record set: where it goes, how it is named and how many shards it has."""

  directory: str  # Folder of the final files.
  name: str  # Record kind, or the stem of a .jsonl file.
  ext: str  # '.bag', '.bagz' or '.jsonl'.
  num_shards: int = 1  # 1: one file; N > 1: N shards; AUTO: by size.

  def single(self) -> str:
    """The path of the set as one file."""
    if self.ext == '.jsonl':
      return FileSystems.join(self.directory, f'{self.name}.jsonl')
    return FileSystems.join(self.directory, f'{self.name}_data{self.ext}')

  def shard(self, index: int, count: int) -> str:
    """The path of shard `index` of `count`.

    >>> ShardSpec('out', 'state_value', '.bag', 2).shard(1, 2)
    'out/state_value-00001-of-00002_data.bag'
    """
    if self.ext == '.jsonl':
      return FileSystems.join(self.directory, f'{self.name}-{index:05d}-of-{count:05d}.jsonl')
    return FileSystems.join(self.directory, f'{self.name}-{index:05d}-of-{count:05d}_data{self.ext}')

  def existing(self) -> list[str]:
    """Files of this set already in `directory` (a single file or shards of any count)."""
    single = self.single()
    suffix = '.jsonl' if self.ext == '.jsonl' else f'_data{self.ext}'  # As `shard` names them.
    pattern = FileSystems.join(self.directory, f'{self.name}-*-of-*{suffix}')
    found = [m.path for m in FileSystems.match([pattern])[0].metadata_list]
    return found + ([single] if FileSystems.exists(single) else [])

  @property
  def key(self) -> str:
    return f'{self.directory}|{self.name}{self.ext}'


@dataclasses.dataclass(frozen=True)
class Piece:
  """A file written by `WriteShards`, to be renamed by `commit`."""

  spec_key: str  # ShardSpec.key of its set.
  bucket: int  # Its writer's bucket.
  part: int  # Its index within the bucket (AUTO starts a new part every records_per_shard).
  path: str  # Where it was written (under TMP_DIR).
  records: int


def bucket_of(key: str, buckets: int) -> int:
  """A stable bucket in [0, buckets) for `key` (the same on every machine and Python process).

  >>> bucket_of('8/8/8/8/8/8/8/K1k5 w - - 0 1', 4), bucket_of('8/8/8/8/8/8/8/K1k5 b - - 0 1', 4)
  (0, 1)
  """
  return int.from_bytes(hashlib.blake2b(key.encode('utf-8'), digest_size=8).digest(), 'big') % buckets


def auto_buckets(pgn_bytes: float, records_per_board: float, records_per_shard: int) -> int:
  """Writers for about ``pgn_bytes`` of PGN text: one per `records_per_shard` estimated records.

  The shared 5,000 games (5.6 MB): ~309k boards, ~9.3M action-values; a 30 GB monthly dump's state values:

  >>> auto_buckets(5_569_289, MOVES_PER_BOARD, 1_000_000), auto_buckets(30e9 * ZSTD_RATIO, 1, 1_000_000)
  (10, 8334)
  """
  boards = pgn_bytes / PGN_BYTES_PER_BOARD
  return max(1, math.ceil(boards * records_per_board / records_per_shard))


def pgn_bytes(paths: Sequence[str], max_games_per_file: int | None = None, sample_games: int | None = None) -> float:
  """Estimated PGN text in `paths` (``.zst`` counted `ZSTD_RATIO` times), capped by game limits."""
  total = 0.0
  for path in paths:
    text = files.size(path) * (ZSTD_RATIO if path.endswith('.zst') else 1)
    if max_games_per_file is not None:
      text = min(text, max_games_per_file * PGN_BYTES_PER_GAME)
    total += text
  if sample_games is not None:
    total = min(total, sample_games * PGN_BYTES_PER_GAME)
  return total


@dataclasses.dataclass(frozen=True)
class RecordSet:
  """How `WriteShards` writes one set: where, how a record is stored and bucketed, how many writers."""

  spec: ShardSpec
  encode: Callable[[Any], bytes]  # A record's stored bytes (a bag record, or a line without its newline).
  board_of: Callable[[Any], str]  # The text a record is bucketed by (its board: a board's records share a shard).
  buckets: int = 1  # Writers when spec.num_shards is AUTO (else num_shards).
  records_per_shard: int = DEFAULT_RECORDS_PER_SHARD  # AUTO: a new shard every this many records.

  def bucket(self, record: Any) -> int:
    return bucket_of(self.board_of(record), self.spec.num_shards or self.buckets)


class _WriteBucket(beam.DoFn):
  """((set key, bucket), records) -> the Pieces written for that bucket (sorted records)."""

  def __init__(self, sets: Mapping[str, RecordSet]):
    self._sets = dict(sets)

  def process(self, key_records: tuple[tuple[str, int], Iterable[Any]]) -> Iterator[Piece]:
    (key, bucket), records = key_records
    record_set = self._sets[key]
    spec = record_set.spec
    encoded = sorted(record_set.encode(r) for r in records)
    per_file = record_set.records_per_shard if spec.num_shards == AUTO else max(1, len(encoded))
    folder = FileSystems.join(spec.directory, TMP_DIR, f'{spec.name}{spec.ext}')
    _mkdirs(folder)
    token = uuid.uuid4().hex[:12]  # A retried bundle writes new files; only reported ones are committed.
    for part, start in enumerate(range(0, len(encoded), per_file)):
      chunk = encoded[start : start + per_file]
      path = FileSystems.join(folder, f'{bucket:05d}-{part:05d}-{token}{spec.ext}')
      _write(path, spec.ext, chunk)
      yield Piece(key, bucket, part, path, len(chunk))


class WriteShards(beam.PTransform):
  """(set key, record) pairs -> the Pieces of every set in `sets` (committed by `commit` after the job).

  One GroupByKey for all sets: on Beam's Dask runner each costs a shuffle of
  every partition with every other.
  """

  def __init__(self, sets: Iterable[RecordSet]):
    super().__init__()
    self._sets = {s.spec.key: s for s in sets}
    for record_set in self._sets.values():
      if record_set.spec.num_shards < 0:
        raise errors.BadInput(f'num_shards must be >= 0, got {record_set.spec.num_shards}')

  def expand(self, keyed_records: PCollection[tuple[str, Any]]) -> PCollection[Piece]:
    sets = self._sets
    return (
      keyed_records
      | 'Bucket' >> beam.Map(lambda kr: ((kr[0], sets[kr[0]].bucket(kr[1])), kr[1]))
      | 'Group' >> beam.GroupByKey()
      | 'Write' >> beam.ParDo(_WriteBucket(sets))
    )


def commit(specs: Sequence[ShardSpec], pieces: Sequence[Piece], tmp_roots: Iterable[str] = ()) -> dict[str, list[str]]:
  """Renames each spec's pieces to its final files; returns {spec key: final paths}.

  Files of a spec left by an earlier job in the same folder are removed first,
  fixed shards that got no records are written empty, and a set with no
  records at all is one empty file. `tmp_roots` (folders holding TMP_DIR) are
  deleted afterwards.
  """
  by_spec: dict[str, list[Piece]] = {}
  for piece in pieces:
    by_spec.setdefault(piece.spec_key, []).append(piece)
  known = {spec.key for spec in specs}
  if unknown := set(by_spec) - known:
    raise ValueError(f'pieces of unknown record sets: {sorted(unknown)}')
  final: dict[str, list[str]] = {}
  for spec in specs:
    mine = sorted(by_spec.get(spec.key, []), key=lambda p: (p.bucket, p.part))
    if len({(p.bucket, p.part) for p in mine}) != len(mine):
      raise ValueError(f'{spec.single()}: a piece was reported twice')
    if old := spec.existing():
      FileSystems.delete(old)
    if spec.num_shards > 1:  # Exactly N shards: shard i holds bucket i.
      of_bucket = {p.bucket: p for p in mine}
      targets = [spec.shard(i, spec.num_shards) for i in range(spec.num_shards)]
      for i, target in enumerate(targets):
        if i in of_bucket:
          FileSystems.rename([of_bucket[i].path], [target])
        else:
          _write(target, spec.ext, [])
    elif len(mine) <= 1:  # One file: num_shards 1, or AUTO with data for one.
      targets = [spec.single()]
      if mine:
        FileSystems.rename([mine[0].path], targets)
      else:
        _write(targets[0], spec.ext, [])
    else:
      targets = [spec.shard(i, len(mine)) for i in range(len(mine))]
      FileSystems.rename([p.path for p in mine], targets)
    final[spec.key] = targets
  for root in sorted(set(tmp_roots)):
    clean(root)
  return final


def clean(root: str) -> None:
  """Deletes ``root/TMP_DIR`` (left by a crashed job, or by this one once committed)."""
  tmp = FileSystems.join(root, TMP_DIR)
  if FileSystems.exists(tmp):
    FileSystems.delete([tmp])


def _mkdirs(folder: str) -> None:
  try:
    FileSystems.mkdirs(folder)
  except OSError:  # Exists already (another bucket made it), or the filesystem has no folders.
    pass


def _write(path: str, ext: str, encoded: Sequence[bytes]) -> None:
  if ext == '.jsonl':
    with FileSystems.create(path) as f:
      f.write(b''.join(line + b'\n' for line in encoded))
    return
  _mkdirs(FileSystems.split(path)[0])
  writer = bagz.Writer(path)
  try:
    for data in encoded:
      writer.write(data)
  finally:
    writer.close()
