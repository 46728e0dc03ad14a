"""A model grown from a smaller one plays as it did; what cannot grow as the same function is refused."""

import json

import chess
import jax
import numpy as np
import pytest

from searchless import configs
from searchless.model import loading
from searchless.model import network
from searchless.model.config import ModelConfig
from searchless.play import player as player_lib
from searchless.training import grow
from searchless.training import train

# Real middlegames and endgames (dev puzzles' starting positions) and the start.
FENS = (
  chess.STARTING_FEN,
  'r6k/pp2r2p/4Rp1Q/3p4/8/1N1P2R1/PqP2bPP/7K b - - 0 24',
  '5rk1/1p3ppp/pq3b2/8/8/1P1Q1N2/P4PPP/3R2K1 w - - 2 27',
  '8/8/4k3/8/2p5/8/2K5/8 w - - 0 60',
)


def _grown(overrides):
  """The shipped graph model grown into graph_tiny with `overrides`: (its experiment config, grown params)."""
  small_config, small, _ = loading.load_model('pretrained')
  big = configs.load('graph_tiny', overrides)
  big_config = ModelConfig.from_config(big)
  fresh = jax.device_get(network.init_params(big_config))
  grown = grow.grow(small, fresh)
  grow.check_same_function(small_config, small, big_config, grown, 'pretrained')
  return big, grown


@pytest.mark.slow
def test_a_graph_with_wider_mlps_and_two_more_layers_plays_exactly_as_the_small_one(tmp_path):
  big, grown = _grown(['model.widening_factor=8', 'model.num_layers=6', 'model.seed=1'])
  assert grown['mlp_0/linear']['w'].shape == (64, 512) and 'gateau_5/out' in grown
  assert network.num_params(grown) == 730_624  # 303,936 + 4 x 49,152 (wider MLPs) + 2 x 115,040 (new layers).
  assert np.abs(grown['mlp_5/linear_2']['w']).max() == 0 < np.abs(grown['mlp_5/linear']['w']).max()
  loading.export(str(tmp_path / 'grown'), grown, big, dtype='float32')
  small_player = player_lib.Player.load('pretrained', compute_dtype='float32')
  big_player = player_lib.Player.load(str(tmp_path / 'grown'), compute_dtype='float32')
  for fen in FENS:
    board = chess.Board(fen)
    want, got = small_player.win_probabilities(board), big_player.win_probabilities(board)
    assert list(got) == list(want) and len(want) == board.legal_moves.count()
    np.testing.assert_allclose(list(got.values()), list(want.values()), atol=1e-5)


@pytest.mark.slow
def test_a_wider_residual_stream_is_refused_naming_the_weight():
  with pytest.raises(
    ValueError,
    match=r'^cannot grow gateau_0/layer_norm/offset from \(64,\) to \(128,\): only a '
    r'weight matrix grown along one axis keeps what the model computes$',
  ):
    _grown(['model.embedding_dim=128'])


@pytest.mark.slow
def test_a_transformer_with_a_new_layer_is_refused():  # Haiku numbers its modules: layer 1's are named anew.
  small_config = ModelConfig.from_config(configs.load('tiny', ['model.num_layers=1']))
  big_config = ModelConfig.from_config(configs.load('tiny', ['model.num_layers=2']))
  with pytest.raises(
    ValueError, match='^cannot grow a model into one without its weights: linear_3/b is missing from the bigger model$'
  ):
    grow.grow(jax.device_get(network.init_params(small_config)), jax.device_get(network.init_params(big_config)))


@pytest.mark.slow
def test_a_grown_model_that_computes_something_else_is_refused():
  small_config, small, _ = loading.load_model('pretrained')
  big_config = ModelConfig.from_config(configs.load('graph_tiny', ['model.num_layers=5']))
  fresh = jax.device_get(network.init_params(big_config))
  grown = grow.grow(small, fresh)
  grown['gateau_4/out']['w'] = np.asarray(fresh['gateau_4/out']['w'])  # The new layer writes into the stream.
  with pytest.raises(
    ValueError,
    match=r'^growing pretrained into this config changes what it computes \(probe '
    r'distance .+ > 1e-05; changed: num_layers 4 -> 5\): only widening_factor '
    r'and num_layers grow a graph model as the same function$',
  ):
    grow.check_same_function(small_config, small, big_config, grown, 'pretrained')


@pytest.mark.slow
def test_training_from_a_grown_model_starts_where_the_small_one_is(tmp_path, compat):
  # A one-layer transformer saved as a model to start from (a graph's train step compiles for a minute here).
  data = compat / 'action_value_sample.bag'
  model = ['model.embedding_dim=16', 'model.num_layers=1', 'model.num_heads=2']
  source = configs.load('tiny', [f'data.train={data}', *model])
  params = jax.device_get(network.init_params(ModelConfig.from_config(source)))
  loading.export(str(tmp_path / 'small_model'), params, source, dtype='float32')
  base = [
    f'data.train={data}',
    *model,
    'data.batch_size=4',
    'data.worker_count=0',
    'train.num_steps=1',
    'train.log_every=1',
    'train.compute_dtype=float32',
    f'train.init_from={tmp_path / "small_model"}',
  ]
  wide = [*base, 'model.widening_factor=8']
  with pytest.raises(
    ValueError,
    match=rf"^train.init_from '{tmp_path / 'small_model'}' does not fit this config's model: "
    r"\['linear'\]\['w'\] is \(16, 64\) there, \(16, 128\) here$",
  ):
    train.train(configs.load('tiny', wide), tmp_path / 'refused')  # Without init_grow shapes must match.
  grown = train.train(configs.load('tiny', [*wide, 'train.init_grow=True']), tmp_path / 'grown')
  small = train.train(configs.load('tiny', base), tmp_path / 'small')
  assert grown.params['linear_2']['w'].shape == (128, 16) and small.params['linear_2']['w'].shape == (64, 16)
  # The first step's loss is computed before its update, on the same batch: the grown model's is the small one's.
  first = lambda run: json.loads((tmp_path / run / 'metrics.jsonl').read_text().splitlines()[0])['loss']
  np.testing.assert_allclose(first('grown'), first('small'), rtol=1e-5)
