"""The predictor against the reference: parameter names and shapes, outputs, sizes."""

import json
import re

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from searchless import configs
from searchless.core import config as config_lib
from searchless.core import moves
from searchless.model import network
from searchless.model import transformer
from searchless.model.config import ModelConfig

# Published model name -> our config file.
CONFIG_FILES = {'local': 'tiny', '9M': '9m', '136M': '136m', '270M': '270m'}


def model_config(name: str, overrides=()) -> ModelConfig:
  experiment = configs.load(CONFIG_FILES[name], list(overrides))
  return ModelConfig.from_config(experiment)


def abstract_params(config: ModelConfig):
  return jax.eval_shape(lambda: network.init_params(config))


def flat_shapes(params) -> dict[str, list[int]]:
  return {f'{module}/{name}': list(leaf.shape) for module, leaves in params.items() for name, leaf in leaves.items()}


def npz_params(npz) -> dict:
  """'params/<module path>/<name>' keys -> haiku's {module path: {name: array}}."""
  params = {}
  for key in npz.files:
    if key.startswith('params/'):
      module, name = key.removeprefix('params/').rsplit('/', 1)
      params.setdefault(module, {})[name] = npz[key]
  return params


@pytest.fixture(scope='module')
def reference_shapes(compat):
  return json.loads((compat / 'reference_param_shapes.json').read_text())


@pytest.fixture(scope='module')
def reference(compat):
  with np.load(compat / 'reference_local_model.npz') as npz:
    return npz_params(npz), npz['sequences'], npz['last_log_probs']


@pytest.fixture(scope='module')
def local_apply():
  return jax.jit(network.build(model_config('local')).apply)


@pytest.mark.parametrize('name', list(CONFIG_FILES))
def test_param_names_shapes_and_count_match_reference(name, reference_shapes):
  params = abstract_params(model_config(name))
  expected = reference_shapes[name]
  assert flat_shapes(params) == expected['params']
  assert all(leaf.dtype == jnp.float32 for leaf in jax.tree.leaves(params))
  assert network.num_params(params) == expected['num_params']
  assert (
    network.num_params(params) == {'local': 402_624, '9M': 8_954_240, '136M': 136_479_872, '270M': 270_730_368}[name]
  )


def test_input_is_shifted_right(reference, local_apply):
  """Position t sees tokens < t only through the shift: the last token is dropped."""
  params, sequences, _ = reference
  changed = sequences.copy()
  changed[:, -1] = 77  # The dummy bucket token never reaches the model.
  np.testing.assert_array_equal(local_apply(params, None, changed), local_apply(params, None, sequences))
  changed[:, -2] = (changed[:, -2] + 1) % moves.NUM_ACTIONS  # The action does.
  assert np.abs(local_apply(params, None, changed) - local_apply(params, None, sequences)).max() > 1e-3


def test_bfloat16_compute_is_close_to_float32(reference):
  params, sequences, last_log_probs = reference
  config = model_config('local')
  bf16 = network.build(config, compute_dtype=jnp.bfloat16)
  log_probs = jax.jit(bf16.apply)(params, None, sequences)
  assert log_probs.dtype == jnp.float32
  # Measured on CPU: 0.035 max |log-prob error| (mostly in unlikely buckets),
  # 6e-4 max |probability error|, 3e-4 max |expected win probability error|.
  error = np.abs(np.asarray(log_probs[:, -1]) - last_log_probs).max()
  assert 0 < error < 0.1, error
  probs, reference_probs = np.exp(np.asarray(log_probs[:, -1])), np.exp(last_log_probs)
  assert np.abs(probs - reference_probs).max() < 2e-3
  bucket_values = (np.arange(128) + 0.5) / 128
  assert np.abs((probs - reference_probs) @ bucket_values).max() < 1e-3
  np.testing.assert_allclose(np.exp(np.asarray(log_probs)).sum(-1), 1.0, atol=1e-5)  # fp32 log-softmax.
  # Parameters stay float32 and identical to the fp32 model's initialisation.
  dummy = jnp.zeros((1, 79), jnp.int32)
  init_bf16 = jax.jit(bf16.init)(jax.random.PRNGKey(1), dummy)
  init_fp32 = network.init_params(config)
  assert all(leaf.dtype == jnp.float32 for leaf in jax.tree.leaves(init_bf16))
  jax.tree.map(np.testing.assert_array_equal, init_bf16, init_fp32)


def test_from_config_rejects_bad_settings():
  with pytest.raises(ValueError, match='unknown policy'):
    model_config('local', ['policy=q_learning'])
  with pytest.raises(ValueError, match='not divisible by num_heads'):
    model_config('local', ['model.num_heads=5'])
  config = model_config('local')
  with pytest.raises(ValueError, match='exceeds max_sequence_length 79'):
    network.build(config).apply(network.init_params(config), None, np.zeros((1, 80), np.int32))


def test_the_defaults_are_the_papers_9m(reference_shapes):
  assert ModelConfig() == model_config('9M')
  shapes = {}
  for key, shape in reference_shapes['9M']['params'].items():
    module, leaf = key.rsplit('/', 1)
    shapes.setdefault(module, {})[leaf] = jax.ShapeDtypeStruct(tuple(shape), jnp.float32)
  assert transformer.infer_config(shapes) == ModelConfig()  # The published 9M checkpoint's shapes.
  config = ModelConfig()
  assert (
    config.embedding_dim,
    config.num_layers,
    config.num_heads,
    config.output_size,
    config.max_sequence_length,
  ) == (256, 8, 8, 128, 79)


def test_experiment_defaults_are_the_model_section_of_an_experiment_config():
  defaults = ModelConfig.experiment_defaults()
  assert 'output_size' not in defaults and 'max_sequence_length' not in defaults  # From the policy and buckets.
  assert defaults == configs.base().model.to_dict()
  assert ModelConfig(**defaults) == ModelConfig()


def _experiment(**model) -> ml_collections.ConfigDict:
  return ml_collections.ConfigDict({'policy': 'action_value', 'num_return_buckets': 128, 'model': model})


@pytest.mark.parametrize('field', ['foo', 'output_size', 'max_sequence_length'])
def test_from_config_refuses_an_unknown_model_field(field):
  with pytest.raises(ValueError, match=f"^unknown model field '{field}'$"):
    ModelConfig.from_config(_experiment(num_layers=2, **{field: 1}))


def test_a_config_saved_before_a_field_existed_loads_with_its_default():
  saved = json.loads(config_lib.to_json(configs.load('tiny')))
  newer = (
    'emb_init_scale',
    'packing',
    'move_attention',
    'joint_layers',
    'kind',
    'graph_edge_dim',
    'graph_open_lines',
    'mover_view',
    'move_squares',
    'square_bias',
    'smolgen',
    'move_gather',
  )
  for name in newer:
    del saved['model'][name]
  old = ModelConfig.from_config(config_lib.from_json(json.dumps(saved)))
  assert old == model_config('local')
  assert ModelConfig.from_config(_experiment()) == ModelConfig()  # An empty model section: the 9M model.


@pytest.mark.parametrize(
  'field, value, message',
  [
    ('embedding_dim', 0, 'model.embedding_dim must be >= 1, got 0'),
    ('num_layers', 0, 'model.num_layers must be >= 1, got 0'),
    ('num_heads', 0, 'model.num_heads must be >= 1, got 0'),
    ('widening_factor', 0, 'model.widening_factor must be > 0, got 0'),
    ('joint_layers', -1, 'model.joint_layers must be >= 0, got -1'),
    ('graph_edge_dim', 0, 'model.graph_edge_dim must be >= 1, got 0'),
    ('smolgen', -1, 'model.smolgen must be >= 0, got -1'),
  ],
)
def test_ranges_name_the_experiment_field(field, value, message):
  with pytest.raises(ValueError, match=f'^{re.escape(message)}$'):
    ModelConfig(**{field: value})
  with pytest.raises(ValueError, match=f'^{re.escape(message)}$'):
    configs.load('tiny', [f'model.{field}={value}'])


@pytest.mark.parametrize('name', list(CONFIG_FILES))
def test_infer_config_recovers_published_models(name, reference_shapes):
  expected = model_config(name)
  assert transformer.infer_config(abstract_params(expected)) == expected
  # Straight from the reference's shapes, without our initialiser.
  shapes = {}
  for key, shape in reference_shapes[name]['params'].items():
    module, leaf = key.rsplit('/', 1)
    shapes.setdefault(module, {})[leaf] = jax.ShapeDtypeStruct(tuple(shape), jnp.float32)
  assert transformer.infer_config(shapes) == expected


def test_infer_config_needs_heads_outside_the_published_table():
  config = ModelConfig(
    embedding_dim=64,
    num_layers=3,
    num_heads=2,
    widening_factor=2,
    output_size=32,
    max_sequence_length=78,
    apply_post_ln=False,
    apply_qk_layernorm=True,
  )
  params = abstract_params(config)
  with pytest.raises(ValueError, match='cannot infer num_heads of a 3-layer, d=64 model'):
    transformer.infer_config(params)
  assert transformer.infer_config(params, num_heads=2) == config
  with pytest.raises(ValueError, match='not predictor parameters'):
    transformer.infer_config({'linear': {'w': np.zeros((2, 2))}})


def test_flops_per_sequence_counts_every_weight_matmul():
  for name in ('local', '9M', '270M'):
    config = model_config(name)
    params = abstract_params(config)
    # 2 FLOPs per weight per position for every matrix (not embeddings, norms or
    # biases), plus q.k and attention.v: 2 * 2 * T^2 * d per layer.
    weights = sum(int(np.prod(p['w'].shape)) for p in params.values() if 'w' in p)
    count = 2 * 79 * weights + config.num_layers * 4 * 79 * 79 * config.embedding_dim
    assert transformer.flops_per_sequence(config, 79) == count
  assert transformer.flops_per_sequence(model_config('local'), 79) == 49_103_872
  assert transformer.flops_per_sequence(model_config('9M'), 79) == 1_381_703_680
  assert transformer.flops_per_sequence(model_config('270M'), 79) == 42_842_521_600


def test_resolve_dtype():
  assert network.resolve_dtype('auto', 'cpu') == jnp.float32
  assert network.resolve_dtype('auto', 'gpu') == jnp.bfloat16
  assert network.resolve_dtype('auto', 'tpu') == jnp.bfloat16
  assert network.resolve_dtype('float32', 'gpu') == jnp.float32
  with pytest.raises(ValueError, match='float16'):
    network.resolve_dtype('float16')
