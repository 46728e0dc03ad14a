import json

import numpy as np
import pytest

from searchless.core import tokenizer


def _vectors(compat):
  with open(compat / 'tokenizer_vectors.jsonl') as f:
    return [json.loads(line) for line in f]


def test_every_reference_vector(compat):
  vectors = _vectors(compat)
  assert len(vectors) == 403
  for v in vectors:
    assert tokenizer.tokenize(v['fen']).tolist() == v['tokens'], v['fen']


def test_batch_equals_single(compat):
  vectors = _vectors(compat)
  batch = tokenizer.tokenize_batch([v['fen'] for v in vectors])
  assert batch.shape == (403, 77) and batch.dtype == np.uint8
  np.testing.assert_array_equal(batch, np.array([v['tokens'] for v in vectors], dtype=np.uint8))


def test_start_position_layout():
  chars = tokenizer.fen_to_characters('rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq e3 0 1')
  assert (
    chars
    == 'b'
    + 'rnbqkbnr'
    + 'p' * 8
    + '.' * 16
    + '....P...'
    + '.' * 8
    + 'PPPP.PPP'
    + 'RNBQKBNR'
    + 'KQkq'
    + 'e3'
    + '0..'
    + '1..'
  )


@pytest.mark.parametrize(
  'fen, message',
  [
    ('8/8/8/8/8/8/8/K1k5 w - -', '6 space-separated fields'),
    ('8/8/8/8/8/8/8/K1k5 w - - 0 x1000', 'tokenize to 77'),  # Counters clamp only when they are numbers.
    ('8/8/8/8/8/8/8/K1k4 w - - 0 1', 'tokenize to 77'),
    ('8/8/8/8/8/8/8/K1x5 w - - 0 1', "outside the alphabet ['x']"),
  ],
)
def test_bad_fens_are_named(fen, message):
  with pytest.raises(ValueError, match=message.replace('[', r'\[').replace(']', r'\]')):
    tokenizer.tokenize(fen)
  with pytest.raises(ValueError, match='K1'):
    tokenizer.tokenize_batch(['8/8/8/8/8/8/8/K1k5 w - - 0 1', fen])
