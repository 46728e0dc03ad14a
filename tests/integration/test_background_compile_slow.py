"""A predictor's batch shapes compiled in the background: the tests that build, train or play models (slow).

The fast ones, and the helpers both use, are in tests/unit/test_background_compile.py.
"""

import chess
import numpy as np
import pytest

from searchless.core import tokenizer
from searchless.model import loading
from searchless.play import policy as policy_lib
from searchless.play import predictor as predictor_lib

from unit.test_background_compile import BUSY, OPEN

KINGS = chess.Board('k7/8/8/8/8/8/8/7K w - - 0 1')  # 3 moves: the 16-slot bucket.


@pytest.fixture(scope='module')
def packed():
  model_config, params, _ = loading.load_model('pretrained-transformer')  # A board-packed model.
  return model_config, params


def _analyses(predictor, boards):
  return policy_lib.make_policy('action_value', predictor).analyse_many(boards)


@pytest.mark.slow
def test_packed_background_warm_up_compiles_the_start_positions_shape_then_pads_to_compiled_shapes(packed):
  full = predictor_lib.PackedPredictor(*packed, share=False)  # Shapes of its own, as `hurried`'s.
  full.warm_up()
  assert full.shapes.ready == {(1, tokenizer.SEQUENCE_LENGTH + s) for s in predictor_lib.MOVE_BUCKETS}
  hurried = predictor_lib.PackedPredictor(*packed, share=False)
  hurried.shapes.close()  # No worker: only what warm_up compiles now.
  hurried.warm_up(background=True)
  first = (1, tokenizer.SEQUENCE_LENGTH + 32)  # The start position's move bucket: `probe`'s shape.
  assert hurried.shapes.ready == {first}
  boards = [chess.Board(), OPEN, KINGS]  # 20, 26 and 3 moves: all in the 32-slot shape, one board a call.
  got, want = _analyses(hurried, boards), _analyses(full, boards)
  assert hurried.shapes.ready == {first} and hurried.rows_run == 3
  for g, w in zip(got, want):
    assert g.moves == w.moves
    np.testing.assert_allclose(g.win_probs, w.win_probs, atol=1e-5)
  _analyses(hurried, [BUSY])  # 43 moves: no compiled shape fits, so its own compiles now.
  assert hurried.shapes.ready == {first, (1, tokenizer.SEQUENCE_LENGTH + 48)}


@pytest.mark.slow
def test_packed_background_warm_up_for_a_search_compiles_the_rest_in_order(packed):
  predictor = predictor_lib.PackedPredictor(*packed, share=False)
  predictor.warm_up(16, background=True)
  assert predictor.shapes.wait(300)
  slots = (32, 48, 64, 16, 96, 128, 256)
  assert predictor.shapes.ready == {(b, tokenizer.SEQUENCE_LENGTH + s) for s in slots for b in (1, 4, 16)}
  predictor.close()
