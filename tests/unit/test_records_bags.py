import json

import apache_beam as beam
from apache_beam import coders
from apache_beam.testing.test_pipeline import TestPipeline
from bagz.beam import bagzio
import pytest

from searchless.core import bags
from searchless.core import records
from searchless.data import convert


def test_compat_bags_decode_to_the_reference_records(compat):
  expected = [json.loads(line) for line in (compat / 'action_value_sample.jsonl').read_text().splitlines()]
  got = bags.read_records(str(compat / 'action_value_sample.bag'), 'action_value')
  assert len(got) == 1740
  assert [r._asdict() for r in got] == expected
  state = bags.read_records(str(compat / 'state_value_sample.bag'), 'state_value')
  clone = bags.read_records(str(compat / 'behavioral_cloning_sample.bag'), 'behavioral_cloning')
  assert (len(state), len(clone)) == (60, 57)
  assert all(0.0 <= r.win_prob <= 1.0 for r in state)


def test_encoding_is_byte_identical_to_the_reference(compat):
  reader = bags.reader(str(compat / 'action_value_sample.bag'))
  for data in list(reader)[:50]:
    assert records.encode('action_value', records.decode('action_value', data)) == data


# The reference's coders (Beam's), for every kind: our bytes are theirs, field by field.
REFERENCE_CODERS = {
  'action_value': coders.TupleCoder((coders.StrUtf8Coder(), coders.StrUtf8Coder(), coders.FloatCoder())),
  'state_value': coders.TupleCoder((coders.StrUtf8Coder(), coders.FloatCoder())),
  'behavioral_cloning': coders.TupleCoder((coders.StrUtf8Coder(), coders.StrUtf8Coder())),
  'board_value': coders.TupleCoder(
    (
      coders.StrUtf8Coder(),
      coders.IterableCoder(coders.StrUtf8Coder()),
      coders.IterableCoder(coders.FloatCoder()),
      coders.FloatCoder(),
    )
  ),
}
REFERENCE_CODERS['partial_board_value'] = REFERENCE_CODERS['board_value']
LONG_FEN = 'rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1' + ' ' * 100  # A two-byte varint length.
SAMPLES = {
  'action_value': [('8/8/8/8/8/8/8/K1k5 w - - 0 1', 'a1a2', 0.5), (LONG_FEN, 'e7e8q', 1.0), ('é', '', 0.0)],
  'state_value': [('8/8/8/8/8/8/8/K1k5 w - - 0 1', 0.25), (LONG_FEN, 1e-300)],
  'behavioral_cloning': [('8/8/8/8/8/8/8/K1k5 w - - 0 1', 'a1a2'), (LONG_FEN, 'e7e8q'), ('', '')],
  'board_value': [
    ('8/8/8/8/8/8/8/K1k5 w - - 0 1', ('a1a2', 'a1b1'), (0.5, 0.25), 0.5),
    (LONG_FEN, (), (), 0.0),
    (LONG_FEN, tuple(f'm{i}' for i in range(300)), (0.1,) * 300, 1.0),
  ],
  'partial_board_value': [('8/8/8/8/8/8/8/K1k5 w - - 0 1', ('a1a2',), (0.75,), 0.5)],
}


@pytest.mark.parametrize('kind', sorted(SAMPLES))
def test_encode_and_decode_are_the_reference_coders_without_beam(kind):
  for record in SAMPLES[kind]:
    data = records.encode(kind, record)
    assert data == REFERENCE_CODERS[kind].encode(record)
    assert tuple(records.decode(kind, data)) == record
    assert convert.RecordCoder(kind).decode(convert.RecordCoder(kind).encode(record)) == records.decode(kind, data)


def test_decode_refuses_malformed_bytes():
  data = records.encode('action_value', SAMPLES['action_value'][0])
  with pytest.raises(ValueError, match='truncated float'):
    records.decode('action_value', data[:-1])
  with pytest.raises(ValueError, match='1 bytes after the last field of a state_value record'):
    records.decode('state_value', records.encode('state_value', SAMPLES['state_value'][0]) + b'x')
  with pytest.raises(ValueError, match='a board_value record has 4 fields, got 2'):
    records.encode('board_value', ('fen', 0.5))


def test_unknown_kind():
  with pytest.raises(ValueError, match="unknown record kind 'policy'"):
    records.encode('policy', ('a', 'b'))


@pytest.mark.parametrize(
  'num_shards, compressed, names',
  [
    (1, False, ['state_value_data.bag']),
    (1, True, ['state_value_data.bagz']),
    (3, False, [f'state_value-0000{i}-of-00003_data.bag' for i in range(3)]),
  ],
)
def test_write_with_beam_and_find(tmp_path, num_shards, compressed, names):
  items = [(f'8/8/8/8/8/8/8/K1k5 w - - 0 {i}', i / 100) for i in range(1, 41)]
  with TestPipeline() as p:
    (
      p
      | beam.Create(items)
      | bagzio.WriteToBagz(
        bags.sink_path(str(tmp_path), 'state_value', num_shards, compressed), coder=convert.RecordCoder('state_value')
      )
    )
  assert sorted(f.name for f in tmp_path.iterdir()) == names
  spec = bags.find(str(tmp_path), 'state_value')
  assert sorted(bags.read_records(spec, 'state_value')) == sorted(items)
  if num_shards > 1:  # The ChessBench '@N' spec reads the same shards.
    assert len(bags.reader(str(tmp_path / 'state_value@3_data.bag'))) == 40
  assert len(bags.reader(str(tmp_path / 'state_value*'))) == 40


def test_find_errors(tmp_path):
  with pytest.raises(FileNotFoundError, match='no action_value records in'):
    bags.find(str(tmp_path), 'action_value')
  bags.write_records(str(tmp_path / 'action_value-00000-of-00002_data.bag'), 'action_value', [('f', 'a1a2', 0.5)])
  with pytest.raises(ValueError, match='incomplete or mixed shard set'):
    bags.find(str(tmp_path), 'action_value')


def test_truncated_bag_is_a_clear_error(tmp_path, compat):
  data = (compat / 'state_value_sample.bag').read_bytes()
  path = tmp_path / 'state_value_data.bag'
  path.write_bytes(data[:1000])
  with pytest.raises(ValueError, match='truncated or not a bag file'):
    bags.reader(str(path))
  with pytest.raises(FileNotFoundError, match='no bag files match'):
    bags.reader(str(tmp_path / 'nothing*.bag'))
