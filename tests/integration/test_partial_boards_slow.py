"""Partial boards: the valued moves only, and the board's own value: the tests that build, train or play models (slow).

The fast ones, and the helpers both use, are in tests/unit/test_partial_boards.py.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from searchless import configs
from searchless.core import moves
from searchless.core import values
from searchless.data import packing
from searchless.model import network
from searchless.model.config import ModelConfig
from searchless.training import step as step_lib

from unit.test_partial_boards import EDGES, PARTIAL


@pytest.mark.parametrize('name', ['tiny_packed', 'graph_tiny'])
@pytest.mark.slow
def test_the_loss_of_a_partial_board_is_over_its_valued_moves(name):
  config = configs.load(
    name,
    [
      'model.embedding_dim=16',
      'model.num_layers=1',
      'model.num_heads=2',
      'model.graph_edge_dim=8' if name == 'graph_tiny' else 'model.seed=1',
      'data.train=unused',
      'data.max_moves=64',
    ],
  )
  model_config = ModelConfig.from_config(config)
  params = network.init_params(model_config)
  with_value = model_config.kind == 'graph'
  # Each compiled as one program (op by op, every operation compiled a kernel of its own: seconds).
  apply = jax.jit(network.build(model_config, with_value=with_value).apply)
  loss_fn = jax.jit(step_lib.make_loss_fn(apply, config))
  rows = packing.packed_rows([PARTIAL], 64, EDGES)
  loss, count = loss_fn(params, jnp.asarray(rows))
  assert float(count) == 3.0
  # By hand: the valued moves' log-losses read from the whole board's outputs (+ the value head on 0.7's bucket).
  inputs, targets, own = packing.split_packed(rows)
  out = apply(params, None, jnp.asarray(inputs))
  move_lp, state_lp = out if with_value else (out, None)
  picked = [float(move_lp[0, i, t]) for i, t in enumerate(targets[0]) if t >= 0]
  expected = -np.mean(picked) - (float(state_lp[0, own[0]]) * config.loss.value_weight if with_value else 0.0)
  np.testing.assert_allclose(float(loss), expected, rtol=1e-6)
  if not with_value:  # The packed transformer's moves do not see each other: the same board with only those moves.
    rows_only = np.where(np.arange(rows.shape[1]) < 77, rows, -1)  # The FEN, then only the 3 valued moves.
    rows_only[0, 77:80] = [moves.MOVE_TO_ACTION[m] for m in PARTIAL.moves]
    rows_only[0, 77 + 64 : 80 + 64] = values.win_probabilities_to_buckets(PARTIAL.win_probs, EDGES)
    np.testing.assert_allclose(float(loss_fn(params, jnp.asarray(rows_only))[0]), float(loss), rtol=1e-5)
