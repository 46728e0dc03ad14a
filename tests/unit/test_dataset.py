import doctest
import json
import math
import pickle
import random
import struct
import subprocess
import sys

from absl import flags
import numpy as np
import pytest

from searchless.core import bags
from searchless.core import codecs
from searchless import configs
from searchless.core import moves
from searchless.core import records
from searchless.core import tokenizer
from searchless.core import values
from searchless.data import loader as loader_lib
from searchless.data import sequences
from searchless.data import shuffle

KINDS = records.KINDS
COUNTS = {'action_value': 1740, 'state_value': 60, 'behavioral_cloning': 57}
FEN = '8/8/8/8/8/8/8/K1k5 w - - 0 1'


@pytest.fixture(autouse=True, scope='module')
def absl_flags_parsed():
  """This test program parses absl's flags (as a searchless command does): grain's worker processes read them."""
  flags.FLAGS.mark_as_parsed()


def test_worker_processes_need_a_program_that_parsed_absl_flags(compat):
  code = (
    'from searchless.data import loader\n'
    f"loader.build_loader({_bag(compat, 'action_value')!r}, policy='action_value', num_return_buckets=128, "
    'batch_size=60, shuffle=False, seed=0, num_epochs=1, worker_count=1)'
  )
  done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=300)
  assert done.returncode == 1
  assert done.stderr.strip().splitlines()[-1] == (
    'ValueError: worker_count=1: grain reads absl flags in its worker processes and this program has not parsed '
    'them: parse them first (absl.app.run, or absl.flags.FLAGS.mark_as_parsed() for their defaults, as '
    "searchless's commands do), or use worker_count=0"
  )


def _bag(compat, kind: str) -> str:
  return str(compat / f'{kind}_sample.bag')


def _loader(spec, policy='action_value', **kwargs):
  options = dict(
    policy=policy, num_return_buckets=128, batch_size=60, shuffle=True, seed=0, num_epochs=1, worker_count=0
  )
  options.update(kwargs)
  return loader_lib.build_loader(spec, **options)


def _expected_sequence(kind: str, record) -> list[int]:
  """The straightforward per-record construction the loader must match."""
  sequence = tokenizer.tokenize(record.fen).tolist()
  if kind != 'state_value':
    sequence.append(moves.MOVE_TO_ACTION[record.move])
  if kind != 'behavioral_cloning':
    edges, _ = values.uniform_buckets(128)
    sequence.append(int(values.win_probabilities_to_buckets([record.win_prob], edges)[0]))
  return sequence


def _same_fields(got: tuple, want: tuple) -> bool:
  """Field equality, floats bit for bit (so NaN and -0.0 count)."""
  if len(got) != len(want):
    return False
  for g, w in zip(got, want):
    if isinstance(w, float):
      if struct.pack('>d', g) != struct.pack('>d', w):
        return False
    elif g != w or type(g) is not type(w):
      return False
  return True


def _rows(columns: codecs.Columns, i: int) -> tuple:
  fields = [columns.fens[i]]
  if columns.moves is not None:
    fields.append(columns.moves[i])
  if columns.win_probs is not None:
    fields.append(float(columns.win_probs[i]))
  return tuple(fields)


def test_docstring_examples():
  for module in (codecs, sequences, shuffle, loader_lib):
    assert doctest.testmod(module).failed == 0, module.__name__


# ---------------------------------------------------------------------------- decoding


@pytest.mark.parametrize('kind', KINDS)
def test_decoder_equals_records_decode_on_every_compat_record(compat, kind):
  raw = list(bags.reader(_bag(compat, kind)))
  assert len(raw) == COUNTS[kind]
  columns = codecs.decode_batch(kind, raw)
  for i, data in enumerate(raw):
    want = tuple(records.decode(kind, data))
    assert _same_fields(_rows(columns, i), want), i


def _random_string(rng: random.Random) -> str:
  roll = rng.random()
  if roll < 0.4:  # Realistic: a FEN or a move.
    return rng.choice([FEN, 'rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq e3 0 1', 'e2e4', 'a7a8q', ''])
  alphabet = tokenizer.CHARACTERS + ' /-' if roll < 0.8 else 'aé♞ü\x00\x7f\u20ac𝄞 '
  # Lengths up to 300 need two-byte varint length prefixes.
  return ''.join(rng.choice(alphabet) for _ in range(rng.choice([0, 1, 5, 77, 127, 128, 129, 300])))


def _random_float(rng: random.Random) -> float:
  return rng.choice(
    [
      0.0,
      -0.0,
      1.0,
      0.5,
      0.25,
      0.75,
      5e-324,
      math.nan,
      math.inf,
      -1.5,
      rng.random(),
      rng.random(),
      struct.unpack('>d', bytes(rng.randrange(256) for _ in range(8)))[0],
    ]
  )


@pytest.mark.parametrize('kind', KINDS)
def test_decoder_equals_records_decode_on_random_records(kind):
  rng = random.Random(kind)
  items = []
  for _ in range(3000):
    fields = [_random_string(rng)]
    if kind != 'state_value':
      fields.append(_random_string(rng))
    if kind != 'behavioral_cloning':
      fields.append(_random_float(rng))
    items.append(tuple(fields))
  raw = [records.encode(kind, item) for item in items]
  if kind != 'behavioral_cloning':  # Float bytes that end in NUL survive the batching.
    assert sum(data.endswith(b'\x00') for data in raw) > 100
  assert sum(len(data) > 130 for data in raw) > 100  # Multi-byte length prefixes.
  start = 0
  while start < len(raw):  # Batches of assorted sizes, fast and slow paths mixed.
    size = rng.choice([1, 2, 7, 64, 500])
    batch = raw[start : start + size]
    columns = codecs.decode_batch(kind, batch)
    for i, data in enumerate(batch):
      want = tuple(records.decode(kind, data))
      assert _same_fields(_rows(columns, i), want), (start + i, want)
    start += size


@pytest.mark.parametrize(
  'kind, data, message',
  [
    ('action_value', records.encode('action_value', (FEN, 'a1a2', 0.5))[:-1], 'truncated'),
    ('action_value', records.encode('action_value', (FEN, 'a1a2', 0.5)) + b'\x00', '1 bytes after the last field'),
    ('state_value', records.encode('action_value', (FEN, 'a1a2', 0.5)), '5 bytes after the last field'),
    ('state_value', b'', 'truncated'),
    ('behavioral_cloning', b'\x03\xff\xfe\xfde2e4', "can't decode"),
    ('behavioral_cloning', b'\x90', 'truncated'),
  ],
)
def test_decoder_names_the_bad_record(kind, data, message):
  good = records.encode(
    kind, {'action_value': (FEN, 'a1a2', 0.5), 'state_value': (FEN, 0.5), 'behavioral_cloning': (FEN, 'a1a2')}[kind]
  )
  with pytest.raises(codecs.BadRecord, match=message) as e:
    codecs.decode_batch(kind, [good, good, data, good])
  assert e.value.position == 2


def _mutants(fens: list[str], count: int) -> list[str]:
  """FENs with random edits: odd but valid shapes and invalid ones."""
  rng = random.Random(1)
  out = []
  for _ in range(count):
    fen = list(rng.choice(fens))
    for _ in range(rng.choice([1, 1, 2])):
      at = rng.randrange(len(fen))
      edit = rng.choice(['replace', 'delete', 'insert'])
      char = rng.choice(tokenizer.CHARACTERS + ' -/90X\x00é')
      if edit == 'replace':
        fen[at] = char
      elif edit == 'delete':
        del fen[at]
      else:
        fen.insert(at, char)
    out.append(''.join(fen))
  return out


def test_fens_tokenize_as_the_tokenizer_or_name_the_record(compat):
  fens = [json.loads(line)['fen'] for line in (compat / 'tokenizer_vectors.jsonl').read_text().splitlines()]
  odd = [
    '8/8/8/8/8/8/8/K1k5 w K - 0 1',  # one castling right
    '8/8/8/8/8/8/8/K1k5 w KQkq - 100 200',  # 3-digit clocks
    '8/8/8/8/8/8/8/K1k5 w KQkq e 1000 1',  # 1-char en passant + 4-char clock: still 77 tokens
    '9/8/8/8/8/8/8/K1k5 w - - 0 1',  # '9' is a token of its own, not 9 squares
    '8/8/8/8/8/8/8/8/K1k5 w - - 0 1',  # the tokenizer does not count rows
  ]
  valid, invalid = [], []
  for fen in fens + odd + _mutants(fens, 4000):
    try:
      valid.append((fen, tokenizer.tokenize(fen)))
    except ValueError:
      invalid.append(fen)
  assert len(valid) > 1000 and len(invalid) > 1000
  raw = [records.encode('state_value', (fen, 0.5)) for fen, _ in valid]
  got = sequences.to_sequences('state_value', raw, 128)[:, :77]
  np.testing.assert_array_equal(got, np.stack([tokens for _, tokens in valid]).astype(np.int32))
  good = records.encode('state_value', (FEN, 0.5))
  for fen in invalid:
    with pytest.raises(codecs.BadRecord) as e:
      sequences.to_sequences('state_value', [good, records.encode('state_value', (fen, 0.5))], 128)
    assert e.value.position == 1 and 'FEN' in e.value.reason, fen


def test_every_move_of_the_vocabulary_and_no_other():
  raw = [records.encode('behavioral_cloning', (FEN, move)) for move in moves.ACTION_TO_MOVE]
  np.testing.assert_array_equal(sequences.to_sequences('behavioral_cloning', raw, 128)[:, -1], np.arange(1968))
  for move in ['', 'e2e4 ', 'E2E4', 'e2e4\x00', 'a1a2q', 'e7e8k', 'e2', 'e2e4qq', 'é2e4']:
    with pytest.raises(codecs.BadRecord, match='is not a move of the 1968-move vocabulary') as e:
      sequences.to_sequences('behavioral_cloning', raw[:3] + [records.encode('behavioral_cloning', (FEN, move))], 128)
    assert e.value.position == 3 and repr(move) in e.value.reason


def test_permute_is_a_bijection_per_seed_and_epoch():
  for n in (1, 2, 3, 5, 64, 1000, 1025, 4097):
    for seed, epoch in ((0, 0), (0, 1), (7, 0)):
      order = shuffle.permute(np.arange(n), n, seed, epoch)
      assert sorted(order.tolist()) == list(range(n)), (n, seed, epoch)
  base = shuffle.permute(np.arange(1000), 1000, 0, 0)
  assert not np.array_equal(base, shuffle.permute(np.arange(1000), 1000, 0, 1))
  assert not np.array_equal(base, shuffle.permute(np.arange(1000), 1000, 1, 0))
  np.testing.assert_array_equal(base[500:510], shuffle.permute(np.arange(500, 510), 1000, 0, 0))
  huge = shuffle.permute(np.arange(10_000), 530_000_000, 0, 0)  # ChessBench's size: no table.
  assert len(set(huge.tolist())) == 10_000 and huge.min() >= 0 and huge.max() < 530_000_000
  # Where record 0 lands, over many epochs: roughly uniform over 10 positions.
  inverse = [int(np.flatnonzero(shuffle.permute(np.arange(10), 10, 3, e) == 0)[0]) for e in range(2000)]
  assert all(140 < inverse.count(p) < 260 for p in range(10)), [inverse.count(p) for p in range(10)]


# ---------------------------------------------------------------------------- sequences


@pytest.mark.parametrize('kind', KINDS)
def test_sequences_equal_the_per_record_construction(compat, kind):
  spec = _bag(compat, kind)
  batches = list(_loader(spec, kind, batch_size=16, shuffle=False, drop_remainder=False))
  assert all(b.shape == (16, records.SEQUENCE_LENGTHS[kind]) and b.dtype == np.int32 for b in batches[:-1])
  got = np.concatenate(batches)
  want = np.array([_expected_sequence(kind, r) for r in bags.read_records(spec, kind)], dtype=np.int32)
  assert got.shape == (COUNTS[kind], {'action_value': 79}.get(kind, 78))
  np.testing.assert_array_equal(got, want)


def test_hand_written_sequences(compat):
  # 1Br1kbr1/p3pppp/5n2/np1P1Q2/1Pp4P/4P1P1/2KPNP2/q5R1 w - - 2 29, b8c7, 0.777476727204475
  action_value = (
    [29]  # w
    + [30, 24, 20, 30, 21, 11, 20, 30]  # .Br.kbr.
    + [18, 30, 30, 30, 18, 18, 18, 18]  # p...pppp
    + [30, 30, 30, 30, 30, 19, 30, 30]  # .....n..
    + [19, 18, 30, 23, 30, 27, 30, 30]  # np.P.Q..
    + [30, 23, 18, 30, 30, 30, 30, 23]  # .Pp....P
    + [30, 30, 30, 30, 23, 30, 23, 30]  # ....P.P.
    + [30, 30, 28, 23, 25, 23, 30, 30]  # ..KPNP..
    + [22, 30, 30, 30, 30, 30, 26, 30]  # q.....R.
    + [30, 30, 30, 30]
    + [30, 30]  # no castling, no en passant
    + [2, 30, 30]
    + [2, 9, 30]  # '2..', '29.'
    + [1634]  # b8c7: line 1635 of move_vocab.txt
    + [99]  # 0.7775 * 128 = 99.5 -> bucket 99
  )
  first = next(iter(_loader(_bag(compat, 'action_value'), batch_size=4, shuffle=False)))
  assert first[0].tolist() == action_value
  assert first[1, -2:].tolist() == [1632, 104]  # b8a7 (line 1633), 0.8175 * 128 = 104.6
  assert first[2, -2:].tolist() == [1631, 53]  # b8d6 (line 1632), 0.4165 * 128 = 53.3
  state = next(iter(_loader(_bag(compat, 'state_value'), 'state_value', batch_size=4, shuffle=False)))
  clone = next(iter(_loader(_bag(compat, 'behavioral_cloning'), 'behavioral_cloning', batch_size=4, shuffle=False)))
  assert state.shape == clone.shape == (4, 78)
  sv = bags.read_records(_bag(compat, 'state_value'), 'state_value')[0]
  bc = bags.read_records(_bag(compat, 'behavioral_cloning'), 'behavioral_cloning')[0]
  assert state[0, -1] == math.ceil(sv.win_prob * 128) - 1
  assert clone[0, -1] == [line for line in (compat / 'move_vocab.txt').read_text().split()].index(bc.move)


@pytest.mark.parametrize('kind', KINDS)
def test_shapes_per_policy(compat, kind):
  batches = list(_loader(_bag(compat, kind), kind, batch_size=8))
  assert len(batches) == COUNTS[kind] // 8
  assert {(b.shape, b.dtype) for b in batches} == {((8, records.SEQUENCE_LENGTHS[kind]), np.dtype(np.int32))}


# ---------------------------------------------------------------------------- order


def _sorted_rows(array: np.ndarray) -> list:
  return sorted(map(tuple, array.tolist()))


def test_shuffle_is_a_seeded_permutation_of_every_record_per_epoch(compat):
  spec = _bag(compat, 'action_value')
  everything = np.concatenate(list(_loader(spec, shuffle=False)))  # 1740 = 29 batches of 60
  two_epochs = np.concatenate(list(_loader(spec, seed=3, num_epochs=2)))
  first, second = two_epochs[:1740], two_epochs[1740:]
  assert len(two_epochs) == 3480
  assert _sorted_rows(first) == _sorted_rows(second) == _sorted_rows(everything)
  assert not np.array_equal(first, everything) and not np.array_equal(first, second)
  np.testing.assert_array_equal(two_epochs, np.concatenate(list(_loader(spec, seed=3, num_epochs=2))))
  assert not np.array_equal(first, np.concatenate(list(_loader(spec, seed=4))))
  source = loader_lib.BagBatches(spec, batch_size=60, shuffle=True, seed=3, num_epochs=2)
  for epoch in range(2):
    indices = np.concatenate([source.record_indices(29 * epoch + u) for u in range(29)])
    assert sorted(indices.tolist()) == list(range(1740))


def test_drop_remainder_skips_the_partial_batch_of_each_epoch(compat):
  spec = _bag(compat, 'action_value')
  batches = list(_loader(spec, batch_size=100, num_epochs=2))  # 1740 = 17 * 100 + 40
  assert len(batches) == 34 and all(len(b) == 100 for b in batches)
  kept = list(_loader(spec, batch_size=100, drop_remainder=False))
  assert [len(b) for b in kept] == [100] * 17 + [40]


def test_num_records_uses_the_first_records(compat):
  spec = _bag(compat, 'action_value')
  got = np.concatenate(list(_loader(spec, num_records=120, num_epochs=3)))
  head = np.concatenate(list(_loader(spec, shuffle=False)))[:120]
  assert len(got) == 360 and _sorted_rows(got[240:]) == _sorted_rows(head)


def test_shards_together_make_exactly_the_global_batch(compat):
  spec = _bag(compat, 'action_value')
  whole = list(_loader(spec, batch_size=120, seed=5))
  halves = [list(_loader(spec, batch_size=120, seed=5, shard_index=p, shard_count=2)) for p in range(2)]
  assert len(whole) == len(halves[0]) == len(halves[1]) == 14
  for step, batch in enumerate(whole):
    assert halves[0][step].shape == (60, 79)
    np.testing.assert_array_equal(np.concatenate([halves[0][step], halves[1][step]]), batch)
  source = loader_lib.BagBatches(spec, batch_size=120, shard_count=2, shuffle=True, seed=5, num_epochs=1)
  for step in range(14):
    first, second = source.record_indices(2 * step), source.record_indices(2 * step + 1)
    assert not set(first.tolist()) & set(second.tolist())


def test_worker_processes_give_the_same_batches(compat):
  spec = _bag(compat, 'action_value')
  in_process = list(_loader(spec, batch_size=100, seed=2))
  workers = list(_loader(spec, batch_size=100, seed=2, worker_count=2))
  assert len(workers) == len(in_process) == 17
  for a, b in zip(workers, in_process):
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize('before, worker_count', [(5, 0), (27, 0), (5, 1)])  # 27 + 5 crosses an epoch.
def test_iterator_state_round_trip(compat, before, worker_count):
  spec = _bag(compat, 'action_value')
  options = dict(batch_size=60, seed=1, num_epochs=None, worker_count=worker_count)
  iterator = iter(_loader(spec, **options))
  for _ in range(before):
    next(iterator)
  state = iterator.get_state()
  assert isinstance(state, bytes)
  after = [next(iterator) for _ in range(5)]
  resumed = iter(_loader(spec, **options))  # A fresh loader, as after a restart.
  resumed.set_state(state)
  for want in after:
    np.testing.assert_array_equal(next(resumed), want)


def test_restoring_a_state_from_another_configuration_fails(compat):
  spec = _bag(compat, 'action_value')
  iterator = iter(_loader(spec, num_epochs=None))
  next(iterator)
  with pytest.raises(ValueError, match='DataSource in checkpoint does not match'):
    iter(_loader(spec, num_epochs=None, seed=9)).set_state(iterator.get_state())


def test_source_pickles_and_reopens(compat):
  source = loader_lib.BagBatches(_bag(compat, 'action_value'), batch_size=60, shuffle=True, seed=0, num_epochs=None)
  copy = pickle.loads(pickle.dumps(source))
  assert repr(copy) == repr(source)
  assert copy[7].records == source[7].records


# ---------------------------------------------------------------------------- errors


def _write(path, kind, items) -> str:
  with bags.bagz.Writer(str(path)) as writer:
    for item in items:
      writer.write(item if isinstance(item, bytes) else records.encode(kind, item))
  return str(path)


def test_missing_files_name_the_spec(tmp_path):
  with pytest.raises(FileNotFoundError, match='nowhere/action_value_data.bag'):
    _loader(str(tmp_path / 'nowhere' / 'action_value_data.bag'))
  with pytest.raises(FileNotFoundError, match=r'no bag files match .*action_value\*'):
    _loader(str(tmp_path / 'action_value*'))
  _write(tmp_path / 'action_value-00000-of-00002_data.bag', 'action_value', [(FEN, 'a1a2', 0.5)] * 4)
  with pytest.raises(FileNotFoundError, match=r'action_value@2_data.bag'):
    _loader(str(tmp_path / 'action_value@2_data.bag'))


@pytest.mark.parametrize(
  'bad, message',
  [
    (b'\x40' + FEN.encode(), r'record 2: cannot decode as action_value: truncated'),
    ((FEN, 'e2e9', 0.5), r"record 2: move 'e2e9' is not a move of the 1968-move vocabulary"),
    ((FEN.replace('K', 'X'), 'a1a2', 0.5), r'record 2: FEN has characters outside the alphabet'),
    ((FEN, 'a1a2', 1.5), r'record 2: win probability 1.5 is not in \[0, 1\]'),
  ],
)
def test_bad_records_name_spec_and_index(tmp_path, bad, message):
  good = (FEN, 'a1a2', 0.5)
  spec = _write(tmp_path / 'action_value_data.bag', 'action_value', [good] * 2 + [bad] + [good] * 5)
  loader = _loader(spec, batch_size=4, shuffle=False)
  with pytest.raises(ValueError, match=f'{spec}.*{message}'):
    list(loader)


def test_bad_records_are_named_from_worker_processes_too(tmp_path):
  good = (FEN, 'a1a2', 0.5)
  spec = _write(tmp_path / 'action_value_data.bag', 'action_value', [good] * 2 + [(FEN, 'e2e9', 0.5)] + [good] * 5)
  with pytest.raises(ValueError, match=f"{spec}', record 2: move 'e2e9'"):
    list(_loader(spec, batch_size=4, shuffle=False, worker_count=1))


def test_policy_must_match_the_records(compat):
  with pytest.raises(
    ValueError,
    match=r"policy 'action_value' needs action_value records, but record 0 of"
    r".*state_value_sample.bag' is a state_value record"
    r' \(the file name says state_value\)',
  ):
    _loader(_bag(compat, 'state_value'), 'action_value', batch_size=4)
  with pytest.raises(ValueError, match="policy 'behavioral_cloning' needs .* is a action_value record"):
    _loader(_bag(compat, 'action_value'), 'behavioral_cloning', batch_size=4)
  with pytest.raises(ValueError, match="policy 'state_value' needs .* is a behavioral_cloning record"):
    _loader(_bag(compat, 'behavioral_cloning'), 'state_value', batch_size=4)
  with pytest.raises(ValueError, match="unknown policy / record kind 'policy'"):
    _loader(_bag(compat, 'action_value'), 'policy')


@pytest.mark.parametrize(
  'options, message',
  [
    (dict(batch_size=100, shard_count=3), 'batch_size 100 is global and must be divisible by the number of processes'),
    (dict(shard_index=2, shard_count=2), r'shard_index 2 is not in \[0, shard_count=2\)'),
    (dict(num_records=5000), 'num_records=5000 but .* holds 1740 records'),
    (dict(batch_size=2000), '1740 records are fewer than one batch of 2000'),
    (dict(num_epochs=0), 'num_epochs must be positive'),
    (dict(drop_remainder=False, shard_count=2), 'drop_remainder=False needs a single process'),
  ],
)
def test_bad_options(compat, options, message):
  with pytest.raises(ValueError, match=message):
    _loader(_bag(compat, 'action_value'), **options)


# ---------------------------------------------------------------------------- config and jax


def test_config_loader(compat):
  spec = _bag(compat, 'action_value')
  config = configs.load('tiny', [f'data.train={spec}', 'data.batch_size=64', 'data.num_records=1000'])
  batch = next(iter(loader_lib.config_loader(config)))
  assert batch.shape == (64, 79) and batch.dtype == np.int32
  second = next(iter(loader_lib.config_loader(config, process_index=1, process_count=2)))
  np.testing.assert_array_equal(second, batch[32:])
  with pytest.raises(ValueError, match='config.data.eval is empty'):
    loader_lib.config_loader(config, split='eval')
  config = configs.load('tiny', [f'data.eval={spec}', 'data.batch_size=64'])
  first_eval = [next(iter(loader_lib.config_loader(config, split='eval'))) for _ in range(2)]
  np.testing.assert_array_equal(*first_eval)  # Every evaluation sees the same batches.


def test_global_batch_on_a_mesh():
  import jax
  from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

  mesh = Mesh(np.array(jax.devices()[:1]), ('data',))
  sharding = NamedSharding(mesh, P('data', None))
  local = np.arange(8 * 79, dtype=np.int32).reshape(8, 79)
  from searchless.training import sharding as sharding_lib

  array = sharding_lib.global_batch(local, sharding)
  assert array.shape == (8 * jax.process_count(), 79) and array.dtype == np.int32
  assert array.sharding == sharding
  np.testing.assert_array_equal(np.asarray(array), local)
