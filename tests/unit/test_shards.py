import dataclasses
import functools
import json
import uuid

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
import pytest

from searchless.core import bags
from searchless.core import records
from searchless.data import shards

FENS = ['8/8/8/8/8/8/8/K1k5 w - - 0 1', '8/8/8/8/8/8/8/K1k5 b - - 0 1', '8/8/8/8/8/8/1K6/2k5 w - - 0 1']
ENCODE = functools.partial(records.encode, 'state_value')


def _save(piece, directory):
  with open(directory / f'{uuid.uuid4().hex}.json', 'w') as f:
    json.dump(dataclasses.asdict(piece), f)


def _write(tmp_path, spec, values, buckets=1, per_shard=shards.DEFAULT_RECORDS_PER_SHARD):
  """Runs WriteShards on `values` and returns the pieces it reported."""
  reported = tmp_path / f'reported-{uuid.uuid4().hex}'
  reported.mkdir()
  with TestPipeline() as p:
    _ = (
      p
      | beam.Create([(spec.key, v) for v in values])
      | shards.WriteShards([shards.RecordSet(spec, ENCODE, lambda r: r[0], buckets, per_shard)])
      | beam.Map(_save, reported)
    )
  return [shards.Piece(**json.loads(f.read_text())) for f in sorted(reported.iterdir())]


def _records(path):
  return bags.read_records(str(path), 'state_value')


def test_fixed_shards_hold_a_hash_of_each_board_sorted_and_empty_ones_exist(tmp_path):
  out = tmp_path / 'out'
  values = [(FENS[0], 0.5), (FENS[1], 0.25), (FENS[0], 0.75)]
  spec = shards.ShardSpec(str(out), 'state_value', '.bag', 4)
  assert [shards.bucket_of(f, 4) for f in FENS[:2]] == [0, 1]
  pieces = _write(tmp_path, spec, values)
  assert sorted((p.bucket, p.part, p.records) for p in pieces) == [(0, 0, 2), (1, 0, 1)]
  final = shards.commit([spec], pieces, [str(out)])
  names = [f'state_value-0000{i}-of-00004_data.bag' for i in range(4)]
  assert final == {spec.key: [str(out / n) for n in names]}
  assert sorted(p.name for p in out.iterdir()) == names  # The temporary folder is gone.
  assert [_records(out / n) for n in names] == [
    [(FENS[0], 0.5), (FENS[0], 0.75)],
    [(FENS[1], 0.25)],
    [],
    [],
  ]  # Sorted by their encoded bytes.
  assert bags.find(str(out), 'state_value') == ','.join(str(out / n) for n in names)


def test_auto_shards_split_every_records_per_shard_and_one_piece_is_one_file(tmp_path):
  out = tmp_path / 'out'
  values = [(FENS[i % 3], i / 8) for i in range(5)]
  spec = shards.ShardSpec(str(out), 'state_value', '.bag', shards.AUTO)
  pieces = _write(tmp_path, spec, values, buckets=1, per_shard=2)
  assert sorted((p.bucket, p.part, p.records) for p in pieces) == [(0, 0, 2), (0, 1, 2), (0, 2, 1)]
  shards.commit([spec], pieces, [str(out)])
  names = [f'state_value-0000{i}-of-00003_data.bag' for i in range(3)]
  assert sorted(p.name for p in out.iterdir()) == names
  everything = [r for n in names for r in _records(out / n)]
  assert everything == sorted(values, key=lambda r: ENCODE(r))

  # A second job into the same folder replaces the set: one piece is one <kind>_data.bag, the shards go.
  pieces = _write(tmp_path, spec, values[:1], buckets=1, per_shard=2)
  shards.commit([spec], pieces, [str(out)])
  assert sorted(p.name for p in out.iterdir()) == ['state_value_data.bag']
  assert _records(out / 'state_value_data.bag') == values[:1]


def test_only_reported_pieces_are_committed_and_sets_without_records_are_one_empty_file(tmp_path):
  out = tmp_path / 'out'
  spec = shards.ShardSpec(str(out), 'state_value', '.bag', 1)
  lines = shards.ShardSpec(str(out), 'failures', '.jsonl', 1)
  pieces = _write(tmp_path, spec, [(FENS[2], 1.0)])
  stray = out / shards.TMP_DIR / 'state_value.bag' / '00000-00000-retried.bag'  # A retried bundle's file.
  stray.write_bytes((out / shards.TMP_DIR / 'state_value.bag').joinpath(pieces[0].path.rsplit('/', 1)[1]).read_bytes())
  shards.commit([spec, lines], pieces, [str(out)])
  assert sorted(p.name for p in out.iterdir()) == ['failures.jsonl', 'state_value_data.bag']
  assert _records(out / 'state_value_data.bag') == [(FENS[2], 1.0)]
  assert (out / 'failures.jsonl').read_text() == ''
  with pytest.raises(ValueError, match='a piece was reported twice'):
    shards.commit([spec], pieces * 2)
  with pytest.raises(ValueError, match='pieces of unknown record sets'):
    shards.commit([lines], pieces)


def test_auto_buckets_follow_the_input_size(tmp_path):
  small = tmp_path / 'g.pgn'
  small.write_bytes(b'x' * 18_000)  # ~1,000 boards.
  big = tmp_path / 'g.pgn.zst'
  big.write_bytes(b'x' * 18_000)
  assert shards.pgn_bytes([str(small)]) == 18_000
  assert shards.pgn_bytes([str(small), str(big)]) == 18_000 * (1 + shards.ZSTD_RATIO)
  assert shards.pgn_bytes([str(small)], max_games_per_file=2) == 2 * shards.PGN_BYTES_PER_GAME
  assert shards.pgn_bytes([str(small), str(big)], sample_games=3) == 3 * shards.PGN_BYTES_PER_GAME
  assert shards.auto_buckets(18_000, 30, 10_000) == 3  # 1,000 boards x 30 moves / 10,000.
  assert shards.auto_buckets(18_000, 1, 10_000) == 1
  assert shards.auto_buckets(0, 30, 10_000) == 1
