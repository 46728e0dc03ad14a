import json

import chess.engine
import pytest

from searchless.core import values


@pytest.fixture(scope='module')
def vectors(compat):
  return json.loads((compat / 'value_vectors.json').read_text())


def test_centipawns_to_win_probability(vectors):
  got = [values.centipawns_to_win_probability(cp) for cp in vectors['centipawns']]
  assert got == vectors['win_prob']  # Bit-identical to the reference formula.


def test_buckets_128(vectors):
  edges, centres = values.uniform_buckets(128)
  assert edges.shape == (127,) and centres.shape == (128,)
  got = values.win_probabilities_to_buckets(vectors['bucket_inputs'], edges)
  assert got.tolist() == vectors['buckets_128']


def test_ties_go_to_the_lower_bucket():
  edges, _ = values.uniform_buckets(4)
  assert values.win_probabilities_to_buckets([0.25, 0.5, 0.75, 0.7500001], edges).tolist() == [0, 1, 2, 3]


def test_scores():
  assert values.score_to_win_probability(chess.engine.Mate(2)) == 1.0
  assert values.score_to_win_probability(chess.engine.Mate(-1)) == 0.0
  assert values.score_to_win_probability(chess.engine.MateGiven) == 1.0
  assert values.score_to_win_probability(chess.engine.Cp(-100)) == values.centipawns_to_win_probability(-100)
  for cp in (-900, -37, 0, 250, 3000):
    assert values.win_probability_to_centipawns(values.centipawns_to_win_probability(cp)) == cp
  assert values.win_probability_to_centipawns(1.0) == 10_000


def test_bad_bucket_count():
  with pytest.raises(ValueError, match='at least 2'):
    values.uniform_buckets(1)
