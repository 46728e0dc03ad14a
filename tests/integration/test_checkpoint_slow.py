"""Checkpoints: save, restore and resume of a training state: the tests that build, train or play models (slow).

The fast ones, and the helpers both use, are in tests/unit/test_checkpoint.py.
"""

import functools
import os
import subprocess
import sys
import textwrap

import grain
import pytest

from searchless.model import loading

from helpers import ROOT
from unit.test_checkpoint import TINY, restore_latest, save, tiny_state


@pytest.mark.slow
def test_raw_iterator_states_round_trip(tmp_path):
  """`get_state()` of a grain.DataLoader iterator (bytes) or a DatasetIterator (dict)."""
  params, params_ema, opt_state, experiment = tiny_state(seed=1)
  loader = grain.DataLoader(
    data_source=list(range(50)),
    sampler=grain.samplers.IndexSampler(50, shuffle=True, seed=3, num_epochs=1),
    worker_count=0,
  )
  iterator = iter(loader)
  [next(iterator) for _ in range(4)]
  loader_state = iterator.get_state()
  assert isinstance(loader_state, bytes)
  save_at = functools.partial(
    save, str(tmp_path), params=params, params_ema=params_ema, opt_state=opt_state, config=experiment
  )
  save_at(4, data_iter_state=loader_state)
  expected = [next(iterator) for _ in range(3)]
  restored = restore_latest(str(tmp_path))
  assert restored.data_iter_state == loader_state and restored.data_iter is None
  fresh = iter(loader)
  fresh.set_state(restored.data_iter_state)
  assert [next(fresh) for _ in range(3)] == expected

  dataset_iterator = iter(grain.MapDataset.range(30).shuffle(seed=1).to_iter_dataset())
  next(dataset_iterator)
  state = dataset_iterator.get_state()
  save_at(5, data_iter_state=state)
  assert restore_latest(str(tmp_path)).data_iter_state == state


@pytest.mark.slow
def test_restore_into_a_sharded_target_on_two_devices(tmp_path):
  """A replicated save restores straight into an FSDP-style sharding (2 CPU devices)."""
  script = textwrap.dedent(f"""
      import jax, numpy as np
      from searchless.model import network
      from searchless.model.config import ModelConfig
      from searchless import configs
      from searchless.training import checkpoint
      experiment = configs.load({TINY!r})
      params = network.init_params(ModelConfig.from_config(experiment))
      with checkpoint.Checkpointer({str(tmp_path)!r}, async_save=False) as c:
        c.save(1, params=params, params_ema=params, opt_state={{'count': np.zeros((), np.int32)}}, config=experiment)
      mesh = jax.make_mesh((2,), ('fsdp',))
      def target(x):
        spec = jax.sharding.PartitionSpec('fsdp') if x.shape and x.shape[0] % 2 == 0 else jax.sharding.PartitionSpec()
        return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=jax.sharding.NamedSharding(mesh, spec))
      targets = jax.tree.map(target, params)
      restored = checkpoint.Checkpointer({str(tmp_path)!r}).restore(params=targets, params_ema=targets)
      embed = restored.params['embed']['embeddings']
      assert len(jax.devices()) == 2
      assert embed.sharding == targets['embed']['embeddings'].sharding
      assert [s.data.shape for s in embed.addressable_shards] == [(984, 64), (984, 64)]
      jax.tree.map(lambda a, b: np.testing.assert_array_equal(np.asarray(a), np.asarray(b)), restored.params, params)
      # Bare shardings as the target: shapes and dtypes come from the checkpoint.
      with checkpoint.Checkpointer({str(tmp_path)!r}) as checkpointer:
        layout = jax.tree.map(lambda t: t.sharding, targets)
        again = checkpointer.restore(params=layout, params_ema=layout)
      assert again.params['embed']['embeddings'].sharding == embed.sharding
      jax.tree.map(lambda a, b: np.testing.assert_array_equal(np.asarray(a), np.asarray(b)), again.params_ema, params)
      print('ok')
  """)
  env = dict(os.environ, XLA_FLAGS='--xla_force_host_platform_device_count=2', JAX_PLATFORMS='cpu')
  result = subprocess.run(
    [sys.executable, '-c', script], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
  )
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.strip().endswith('ok')


@pytest.mark.slow
def test_published_checkpoint_plays_legal_moves(compat):
  import chess
  from searchless.play import policy
  from searchless.play import predictor

  model_config, params, saved = loading.load_model(str(compat / 'reference_local_checkpoint'))
  assert saved is None  # Published layout: architecture inferred from the shapes.
  player = policy.make_policy('action_value', predictor.Predictor(model_config, params))
  board = chess.Board()
  for _ in range(6):
    analysis = player.analyse(board)
    assert set(analysis.moves) == set(board.legal_moves)
    assert all(0.0 <= v <= 1.0 for v in analysis.win_probs)
    board.push(analysis.best_move())
  assert len(board.move_stack) == 6
