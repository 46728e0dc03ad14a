"""Checkpoints: the published layout (read) and ours (save, restore, resume)."""

import json
import os
import pathlib
import re
from typing import Any, NamedTuple

import grain
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from searchless.model import loading

from searchless import configs
from searchless.core import config as config_lib
from searchless.model import network
from searchless.model.config import ModelConfig
from searchless.training import checkpoint


TINY = 'tiny'


def assert_trees_equal(actual, expected):
  assert jax.tree.structure(actual) == jax.tree.structure(expected)
  for a, e in zip(jax.tree.leaves(actual), jax.tree.leaves(expected), strict=True):
    assert np.asarray(a).dtype == np.asarray(e).dtype
    np.testing.assert_array_equal(np.asarray(a), np.asarray(e))


@pytest.fixture(scope='module')
def reference(compat):
  with np.load(compat / 'reference_local_model.npz') as npz:
    params = {}
    for key in npz.files:
      if key.startswith('params/'):
        module, name = key.removeprefix('params/').rsplit('/', 1)
        params.setdefault(module, {})[name] = npz[key]
    return params, npz['sequences'], npz['last_log_probs']


@pytest.fixture(scope='module')
def published(compat) -> pathlib.Path:
  return compat / 'reference_local_checkpoint'


# --- The published layout -----------------------------------------------------------------


@pytest.mark.parametrize('form', ['model', 'step', 'item'])
@pytest.mark.parametrize('ema', [True, False])
def test_published_checkpoint_loads_in_every_path_form(published, reference, form, ema):
  item = 'params_ema' if ema else 'params'
  path = {'model': published, 'step': published / '6400000', 'item': published / '6400000' / item}[form]
  assert loading.resolve(str(path), ema=ema) == published / '6400000' / item
  params = loading.load_params(str(path), ema=ema)
  assert all(isinstance(leaf, np.ndarray) for leaf in jax.tree.leaves(params))
  assert_trees_equal(params, reference[0])


def test_published_checkpoint_reproduces_reference_log_probs(published, reference):
  _, sequences, last_log_probs = reference
  config, params, experiment = loading.load_model(str(published))
  assert experiment is None
  assert config == ModelConfig(embedding_dim=64, num_layers=4, num_heads=4, output_size=128, max_sequence_length=79)
  log_probs = jax.jit(network.build(config).apply)(params, None, sequences)
  assert np.abs(np.asarray(log_probs[:, -1]) - last_log_probs).max() <= 1e-5


def test_missing_or_empty_paths_fail_with_the_path(tmp_path):
  missing = tmp_path / 'no_such_model'
  with pytest.raises(FileNotFoundError, match=re.escape(f'{missing} does not exist')):
    loading.load_params(str(missing))
  with pytest.raises(FileNotFoundError, match=re.escape(f'no parameters found at {tmp_path}')):
    loading.load_model(str(tmp_path))
  (tmp_path / '100').mkdir()  # A step dir without parameters is not a checkpoint.
  with pytest.raises(FileNotFoundError, match='no parameters found'):
    loading.load_params(str(tmp_path))
  with pytest.raises(FileNotFoundError, match=re.escape(f'no checkpoint in {tmp_path / "empty"}')):
    checkpoint.Checkpointer(str(tmp_path / 'empty')).restore()


# --- Our layout ---------------------------------------------------------------------------


def save(directory: str, step: int, **items) -> bool:
  """One synchronous save (`checkpoint.Checkpointer` is the one save API)."""
  with checkpoint.Checkpointer(directory, async_save=False) as checkpointer:
    return checkpointer.save(step, **items)


def restore_latest(directory: str, **targets) -> checkpoint.Restored | None:
  with checkpoint.Checkpointer(directory, async_save=False) as checkpointer:
    return None if checkpointer.latest_step() is None else checkpointer.restore(**targets)


OPTIMIZER = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-4))


@jax.jit
def one_adam_step(params):
  opt_state = OPTIMIZER.init(params)
  grads = jax.tree.map(lambda p: jnp.full_like(p, 0.5), params)
  updates, opt_state = OPTIMIZER.update(grads, opt_state, params)
  return optax.apply_updates(params, updates), opt_state


def tiny_state(seed: int):
  """(params, params_ema, opt_state, experiment config) of the tiny model after one Adam step."""
  experiment = configs.load(TINY, [f'model.seed={seed}'])
  params_ema = network.init_params(ModelConfig.from_config(experiment))
  params, opt_state = one_adam_step(params_ema)
  return params, params_ema, opt_state, experiment


def abstract(tree):
  return jax.eval_shape(lambda: tree)


def test_save_restore_round_trips_everything(tmp_path):
  directory = str(tmp_path / 'checkpoints')
  old = tiny_state(seed=1)
  new = tiny_state(seed=2)
  assert save(directory, 100, params=old[0], params_ema=old[1], opt_state=old[2], config=old[3])
  assert save(directory, 200, params=new[0], params_ema=new[1], opt_state=new[2], config=new[3])
  items = {name for name in os.listdir(tmp_path / 'checkpoints' / '200') if not name.startswith('_')}
  assert items - {'commit_success.txt'} == {'config', 'opt_state', 'params', 'params_ema'}
  saved_config = (tmp_path / 'checkpoints' / '200' / 'config' / 'config.json').read_text()
  assert json.loads(saved_config) == json.loads(config_lib.to_json(new[3]))

  params, params_ema, opt_state, experiment = new
  restored = restore_latest(
    directory, params=abstract(params), params_ema=abstract(params_ema), opt_state=abstract(opt_state)
  )
  assert restored.step == 200
  assert_trees_equal(restored.params, params)
  assert_trees_equal(restored.params_ema, params_ema)
  assert_trees_equal(restored.opt_state, opt_state)  # optax namedtuples, Adam count = 1.
  assert int(restored.opt_state[1][0].count) == 1
  assert config_lib.to_json(restored.config) == config_lib.to_json(experiment)
  assert restored.config.model.seed == 2 and restored.data_iter is None
  # Not vacuous: the two steps hold different values.
  assert np.abs(np.asarray(new[0]['linear']['w']) - np.asarray(old[0]['linear']['w'])).max() > 0.01

  with checkpoint.Checkpointer(directory) as checkpointer:
    assert checkpointer.all_steps() == [100, 200]
    earlier = checkpointer.restore(100, params=old[0], params_ema=old[1], opt_state=old[2])
    assert not checkpointer.save(200, params=params, params_ema=params_ema, opt_state=opt_state, config=experiment)
  assert earlier.step == 100
  assert_trees_equal(earlier.params, old[0])
  assert_trees_equal(earlier.opt_state, old[2])


def test_restore_without_targets_and_load_model(tmp_path):
  params, params_ema, opt_state, experiment = tiny_state(seed=3)
  save(str(tmp_path / 'checkpoints'), 5, params=params, params_ema=params_ema, opt_state=opt_state, config=experiment)
  restored = restore_latest(str(tmp_path / 'checkpoints'))
  assert_trees_equal(restored.params, params)
  assert jax.tree.leaves(restored.opt_state)[0].shape == jax.tree.leaves(opt_state)[0].shape
  # Evaluation reads the EMA (default) or the raw parameters, from the workdir.
  config, loaded, loaded_experiment = loading.load_model(str(tmp_path))
  assert config == ModelConfig.from_config(experiment)
  assert config_lib.to_json(loaded_experiment) == config_lib.to_json(experiment)
  assert_trees_equal(loaded, jax.device_get(params_ema))
  _, loaded, _ = loading.load_model(str(tmp_path / 'checkpoints' / '5' / 'params'), ema=False)
  assert_trees_equal(loaded, jax.device_get(params))


def test_load_model_rejects_parameters_that_do_not_fit_their_config(tmp_path):
  params, params_ema, opt_state, _ = tiny_state(seed=1)
  wrong = configs.load(TINY, ['model.num_layers=3'])
  save(str(tmp_path), 1, params=params, params_ema=params_ema, opt_state=opt_state, config=wrong)
  with pytest.raises(ValueError, match='num_layers 4 != 3'):
    loading.load_model(str(tmp_path))


def test_keep_and_latest_step(tmp_path):
  params, params_ema, opt_state, experiment = tiny_state(seed=1)
  with checkpoint.Checkpointer(str(tmp_path), keep=2) as checkpointer:
    assert checkpointer.latest_step() is None
    for step in (10, 20, 30):
      checkpointer.save(step, params=params, params_ema=params_ema, opt_state=opt_state, config=experiment)
    checkpointer.wait()
    assert checkpointer.all_steps() == [20, 30] and checkpointer.latest_step() == 30
  assert restore_latest(str(tmp_path)).step == 30
  assert loading.resolve(str(tmp_path)) == tmp_path / '30' / 'params_ema'
  empty = tmp_path / 'empty'
  empty.mkdir()
  assert restore_latest(str(empty)) is None


def test_data_iterator_position_round_trips(tmp_path):
  params, params_ema, opt_state, experiment = tiny_state(seed=1)
  dataset = grain.MapDataset.range(100).shuffle(seed=0).to_iter_dataset()
  iterator = iter(dataset)
  seen = [next(iterator) for _ in range(7)]
  save(
    str(tmp_path), 7, params=params, params_ema=params_ema, opt_state=opt_state, config=experiment, data_iter=iterator
  )
  expected = [next(iterator) for _ in range(5)]
  fresh = iter(dataset)
  restored = restore_latest(str(tmp_path), data_iter=fresh)
  assert restored.data_iter is fresh
  assert [next(fresh) for _ in range(5)] == expected
  assert expected != seen[:5]


class TrainingState(NamedTuple):  # The shape of train.py's state.
  step: Any
  params: Any
  params_ema: Any
  opt_state: Any


def test_training_states_save_and_restore_whole(tmp_path):
  params, params_ema, opt_state, experiment = tiny_state(seed=4)
  state = TrainingState(jnp.asarray(9, jnp.int32), params, params_ema, opt_state)
  from searchless.training import train

  manager = checkpoint.Checkpointer(str(tmp_path / 'checkpoints'), keep=2)
  device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
  layout = jax.tree.map(lambda _: device, state)
  assert train._restore_state(manager, layout) is None
  items = dict(params=state.params, params_ema=state.params_ema, opt_state=state.opt_state, config=experiment)
  assert manager.save(9, data_iter_state=b'{"position": 9}', **items)
  assert not manager.save(9, **items)
  manager.wait()
  restored, iterator_state = train._restore_state(checkpoint.Checkpointer(str(tmp_path / 'checkpoints')), layout)
  assert isinstance(restored, TrainingState) and iterator_state == b'{"position": 9}'
  assert_trees_equal(restored, state)
  assert restored.step.sharding == device
  manager.close()
