"""The model: the reference's parameters and outputs: the tests that build, train or play models (slow).

The fast ones, and the helpers both use, are in tests/unit/test_model.py.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from searchless.core import moves
from searchless.core import records
from searchless.model import network
from searchless.model.config import ModelConfig

from unit.test_model import abstract_params, flat_shapes, model_config
from unit import test_model as unit_tests

local_apply = unit_tests.local_apply  # A fixture of the fast tests.
reference = unit_tests.reference  # A fixture of the fast tests.


@pytest.mark.slow
def test_reproduces_reference_log_probs(reference, local_apply):
  params, sequences, last_log_probs = reference
  assert sequences.shape == (8, 79) and last_log_probs.shape == (8, 128)
  assert flat_shapes(params) == flat_shapes(abstract_params(model_config('local')))
  log_probs = local_apply(params, None, sequences)  # [B, T, V]
  assert log_probs.shape == (8, 79, 128) and log_probs.dtype == jnp.float32
  error = np.abs(np.asarray(log_probs[:, -1]) - last_log_probs).max()
  assert error <= 1e-5, error
  # Not vacuous: the reference outputs differ between boards and from fresh params.
  assert np.abs(last_log_probs - last_log_probs[0]).max() > 0.1
  fresh = local_apply(network.init_params(model_config('local')), None, sequences)
  assert np.abs(np.asarray(fresh[:, -1]) - last_log_probs).max() > 0.1


@pytest.mark.slow
def test_bfloat16_compute_with_qk_layernorm_and_causal_mask():
  config = ModelConfig(
    embedding_dim=32,
    num_layers=2,
    num_heads=4,
    output_size=16,
    max_sequence_length=10,
    apply_qk_layernorm=True,
    use_causal_mask=True,
  )
  params = network.init_params(config)
  tokens = np.arange(20, dtype=np.int32).reshape(2, 10)
  fp32 = jax.jit(network.build(config).apply)(params, None, tokens)
  bf16 = jax.jit(network.build(config, jnp.bfloat16).apply)(params, None, tokens)
  assert bf16.dtype == jnp.float32 and bf16.shape == (2, 10, 16)
  assert np.abs(np.asarray(bf16) - np.asarray(fp32)).max() < 0.05


@pytest.mark.slow
def test_causal_mask_hides_later_tokens():
  config = ModelConfig(
    embedding_dim=32, num_layers=2, num_heads=4, output_size=16, max_sequence_length=10, use_causal_mask=True
  )
  params = network.init_params(config)
  apply = jax.jit(network.build(config).apply)
  tokens = np.arange(10, dtype=np.int32)[None]
  changed = tokens.copy()
  changed[0, 6] = 500
  before, after = apply(params, None, tokens), apply(params, None, changed)
  np.testing.assert_array_equal(before[:, :7], after[:, :7])  # Position t sees tokens < t.
  assert np.abs(before[:, 7:] - after[:, 7:]).max() > 1e-4
  # Without the mask (the reference models) every position sees the whole board.
  open_config = ModelConfig(embedding_dim=32, num_layers=2, num_heads=4, output_size=16, max_sequence_length=10)
  apply = jax.jit(network.build(open_config).apply)
  assert np.abs(apply(params, None, tokens)[:, :7] - apply(params, None, changed)[:, :7]).max() > 1e-4


@pytest.mark.parametrize(
  'policy, output_size, length',
  [('action_value', 128, 79), ('state_value', 128, 78), ('behavioral_cloning', moves.NUM_ACTIONS, 78)],
)
@pytest.mark.slow
def test_from_config_policies(policy, output_size, length):
  config = model_config('local', [f'policy={policy}'])
  assert (config.output_size, config.max_sequence_length) == (output_size, 79)  # As the reference, any policy.
  assert records.SEQUENCE_LENGTHS[policy] == length
  assert (config.embedding_dim, config.num_layers, config.num_heads, config.widening_factor) == (64, 4, 4, 4)
  apply = jax.jit(network.build(config).apply)
  log_probs = apply(network.init_params(config), None, np.zeros((3, length), np.int32))
  assert log_probs.shape == (3, length, output_size)
