"""Our per-move train step against the published reference trainer's numbers (no reference source needed).

`tests/fixtures/compat/reference_train_step.npz` holds what the reference's `training_utils` computed for a
2-layer, d=32 model on 32 action-value records of the compat sample (benchmarks/reference_train_step.py,
README_train_step.md): its initial parameters, the batch, the loss, and digests (per-leaf sums, norms and
exact values at fixed places) of the gradients and of the parameters and EMA after one clipped Adam step.
"""

import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from searchless import configs
from searchless.model import network
from searchless.model.config import ModelConfig
from searchless.training import sharding
from searchless.training import step as step_lib

pytestmark = pytest.mark.slow  # Compiles the update: about a minute on 2 busy cores.

VECTOR = pathlib.Path(__file__).resolve().parents[1] / 'fixtures' / 'compat' / 'reference_train_step.npz'


@pytest.fixture(scope='module')
def vector():
  with np.load(VECTOR) as npz:
    data = {key: npz[key] for key in npz.files}
  params = {}
  for key, value in data.items():
    if key.startswith('params/'):
      module, name = key.removeprefix('params/').rsplit('/', 1)
      params.setdefault(module, {})[name] = value
  config = configs.load(str(data['config']), [str(o) for o in data['overrides']])
  return data, params, config


def leaves(tree) -> dict[str, np.ndarray]:
  return {
    f'{module}/{name}': np.asarray(leaf, np.float64) for module, group in tree.items() for name, leaf in group.items()
  }


def assert_digest(data: dict, prefix: str, tree, atol: float, rtol: float) -> None:
  """`tree`'s per-leaf sums, norms and values at the vector's places match the vector's `prefix`/ digests."""
  flat = leaves(tree)
  names = {key.removeprefix(prefix + '/').rsplit('/', 1)[0] for key in data if key.startswith(prefix + '/')}
  assert names == set(flat)
  for name, leaf in flat.items():
    values = leaf.reshape(-1)
    scale = np.sqrt(values.size)  # Sums and norms gather rounding from every element.
    assert values.sum() == pytest.approx(data[f'{prefix}/{name}/sum'], abs=atol * scale, rel=rtol), name
    norm = np.sqrt((values**2).sum())
    assert norm == pytest.approx(data[f'{prefix}/{name}/norm'], abs=atol * scale, rel=rtol), name
    np.testing.assert_allclose(
      values[: len(data[f'{prefix}/{name}/first'])], data[f'{prefix}/{name}/first'], atol=atol, rtol=rtol, err_msg=name
    )
    np.testing.assert_allclose(
      values[data[f'{prefix}/{name}/places']], data[f'{prefix}/{name}/at'], atol=atol, rtol=rtol, err_msg=name
    )


def test_vector_is_the_reference_setup(vector):
  data, params, config = vector
  assert data['sequences'].shape == (config.data.batch_size, 79) == (32, 79)
  assert (config.optim.learning_rate, config.optim.max_grad_norm, config.optim.ema_decay) == (1e-4, 1.0, 0.99)
  assert network.num_params(params) == 102_816


# The initial parameters of a config (argv: the config, its overrides, the npz to write), as the product computes them:
# in a process with XLA's optimizations on, which the tests' own processes have off (tests/conftest.py); without them
# 4% of the embedding's values differ in their last bit.
INIT = """
import sys
import numpy as np
from searchless import configs
from searchless.model import network
from searchless.model.config import ModelConfig
params = network.init_params(ModelConfig.from_config(configs.load(sys.argv[1], sys.argv[2:-1])))
np.savez(sys.argv[-1], **{f'{m}/{n}': np.asarray(v) for m, group in params.items() for n, v in group.items()})
"""


def test_initialisation_matches_reference(vector, tmp_path):
  data, params, _ = vector
  env = {key: value for key, value in os.environ.items() if key != 'JAX_DISABLE_MOST_OPTIMIZATIONS'}
  argv = [sys.executable, '-c', INIT, str(data['config']), *map(str, data['overrides']), str(tmp_path / 'ours.npz')]
  subprocess.run(argv, env=env, check=True)
  with np.load(tmp_path / 'ours.npz') as ours:
    assert set(ours.files) == set(leaves(params))
    for name, leaf in leaves(params).items():
      np.testing.assert_array_equal(ours[name].astype(np.float64), leaf, err_msg=name)


def test_loss_and_gradients_match_reference(vector):
  data, params, config = vector
  net = network.build(ModelConfig.from_config(config), jnp.float32)
  loss_fn = step_lib.make_loss_fn(net.apply, config)
  gradient = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))
  (loss, targets), grads = gradient(params, jnp.asarray(data['sequences']))
  assert float(targets) == 32
  assert float(loss) == pytest.approx(float(data['loss']), rel=1e-6)
  assert_digest(data, 'grads', grads, atol=1e-7, rtol=1e-4)
  # Not vacuous: the gradient of another batch (rows reversed within the last token) misses the vector.
  shuffled = data['sequences'].copy()
  shuffled[:, -1] = shuffled[::-1, -1]
  _, other = gradient(params, jnp.asarray(shuffled))
  with pytest.raises(AssertionError):
    assert_digest(data, 'grads', other, atol=1e-7, rtol=1e-4)


def test_one_adam_step_matches_reference(vector):
  data, params, config = vector
  fns = step_lib.make_functions(config, sharding.make_mesh(1, jax.devices()[:1]))
  copy = jax.tree.map(jnp.array, params)
  state = step_lib.TrainingState(
    jnp.zeros((), jnp.int32), copy, jax.tree.map(jnp.array, params), step_lib.make_optimizer(config).init(copy)
  )
  state, metrics = fns.update(state, jax.device_put(data['sequences'], fns.batch_sharding))
  assert float(metrics['loss']) == pytest.approx(float(data['loss']), rel=1e-6)
  assert_digest(data, 'stepped', state.params, atol=1e-7, rtol=1e-6)
  assert_digest(data, 'ema', state.params_ema, atol=1e-7, rtol=1e-6)
  # Every weight the batch reaches moved by about the learning rate (Adam's first step): the check is not idle.
  moved = np.abs(np.asarray(state.params['linear']['w']) - params['linear']['w'])
  assert 0.5e-4 < float(np.median(moved)) <= 1.0001e-4
