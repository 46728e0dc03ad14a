"""Training: loss falls, resume is exact, meshes and hosts agree: the tests that build, train or play models (slow).

The fast ones, and the helpers both use, are in tests/unit/test_train.py.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from searchless import configs
from searchless.core import config as config_lib
from searchless.model import loading
from searchless.plumbing import folder_lock
from searchless.training import checkpoint
from searchless.training import train

from unit.test_train import SMALL, TINY, _losses, small_config
from unit import test_train as unit_tests

av_bag = unit_tests.av_bag  # A fixture of the fast tests.


# The resumed state and data do not depend on the model: the board-packed run reads the graph's board records.
@pytest.mark.parametrize('packed', [False, True], ids=['per_move', 'board_packed'])
@pytest.mark.slow
def test_resume_is_bit_identical(tmp_path, av_bag, board_bag, packed):
  if packed:
    config = configs.load('tiny_packed', SMALL + [f'data.train={board_bag}', 'train.num_steps=6'])
  else:
    config = small_config(av_bag, 'train.num_steps=6')
  straight = train.train(config, tmp_path / 'a')
  train.train(config, tmp_path / 'b', stop_after=3)
  resumed = train.train(config, tmp_path / 'b')
  assert int(straight.step) == int(resumed.step) == 6
  for tree in ('params', 'params_ema', 'opt_state'):
    a, b = jax.tree.leaves(getattr(straight, tree)), jax.tree.leaves(getattr(resumed, tree))
    assert len(a) == len(b) > 0
    for x, y in zip(a, b):
      np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
  assert _losses(tmp_path / 'a') == _losses(tmp_path / 'b')


@pytest.mark.slow
def test_loss_falls_and_config_is_saved(tmp_path, av_bag):
  # 32 records, seen many times: the model must memorise them (the full sample's
  # bucket marginal is nearly uniform, so only memorising lowers the loss fast).
  config = small_config(
    av_bag, 'train.num_steps=100', 'optim.learning_rate=3e-3', 'train.log_every=20', 'data.num_records=32'
  )
  train.train(config, tmp_path)
  losses = _losses(tmp_path)  # Means over 20 steps.
  assert len(losses) == 5
  assert losses[0] > 3.0 and losses[-1] < 1.0 and losses == sorted(losses, reverse=True)
  saved = config_lib.from_json((tmp_path / 'config.json').read_text())
  assert saved.model.embedding_dim == 32 and saved.data.train == av_bag
  record = json.loads((tmp_path / 'metrics.jsonl').read_text().splitlines()[-1])
  assert set(record) >= {'step', 'loss', 'grad_norm', 'examples_per_s', 'tokens_per_s', 'mfu'}
  # Each parameter item's probe is saved and reproduced on loading; a config edited in a field the
  # shapes do not show (heads) is refused.
  probes = json.loads((tmp_path / 'checkpoints' / '100' / 'probe' / 'probe.json').read_text())
  assert sorted(probes) == ['params', 'params_ema'] and len(probes['params']) == 128
  loading.load_model(str(tmp_path))
  step_config = tmp_path / 'checkpoints' / '100' / 'config' / 'config.json'
  step_config.write_text(step_config.read_text().replace('"num_heads": 2', '"num_heads": 4'))
  with pytest.raises(ValueError, match=r'probe distance .*num_heads 4'):
    loading.load_model(str(tmp_path))


def _train_command(workdir, data: str, *args: str, config: str = TINY) -> list[str]:
  """searchless-train of `config` on `data` in `workdir`, then `args` (flags, then overrides)."""
  return [
    sys.executable,
    '-m',
    'searchless.commands.train',
    '--config',
    config,
    '--workdir',
    str(workdir),
    '--data',
    data,
    *args,
  ]


def _run_cli(workdir, data, *extra, env=None, steps=8, config=TINY):
  cmd = _train_command(workdir, data, *SMALL, f'train.num_steps={steps}', *extra, config=config)
  return subprocess.run(cmd, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=600)


# The graph's micro-batches: test_graph_model_on_eight_cpu_devices_with_fsdp_and_micro_batches_matches_one_device.
@pytest.mark.parametrize('name', ['tiny', 'tiny_packed'])
@pytest.mark.slow
def test_a_micro_batched_step_is_the_whole_batch_step(av_bag, board_bag, name):
  from searchless.data import loader
  from searchless.training import sharding
  from searchless.training import step as step_lib

  data = av_bag if name == 'tiny' else board_bag
  base = SMALL + [f'data.train={data}', 'data.worker_count=0', 'loss.value_weight=0.5']
  whole_config = configs.load(name, base)
  batch = next(iter(loader.config_loader(whole_config, split='train')))  # [16, T] real rows.
  results = []
  for micro in (0, 4):
    fns = step_lib.make_functions(configs.load(name, [*base, f'train.micro_batch={micro}']), sharding.make_mesh(1))
    state, metrics = fns.update(fns.init(jax.random.PRNGKey(0)), jax.device_put(batch, fns.batch_sharding))
    results.append((state, metrics))
  (whole, whole_metrics), (micro, micro_metrics) = results
  from searchless.data import packing

  valued = 16 if name == 'tiny' else int((packing.split_packed(np.asarray(batch))[1] >= 0).sum())  # Every valued move.
  assert float(micro_metrics['targets']) == float(whole_metrics['targets']) == valued
  np.testing.assert_allclose(float(micro_metrics['loss']), float(whole_metrics['loss']), rtol=1e-6)
  np.testing.assert_allclose(float(micro_metrics['grad_norm']), float(whole_metrics['grad_norm']), rtol=1e-5)
  # The optimiser's moments (0.1 g and 0.001 g^2 after one step) hold the gradients to the tight bound.
  for x, y in zip(jax.tree.leaves(micro.opt_state), jax.tree.leaves(whole.opt_state)):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-4, atol=1e-7)
  # Adam's first step moves a weight by lr g / (|g| + eps): a gradient within float rounding of eps (the
  # same sum in another order) lands anywhere in +-lr, so a tenth of lr is allowed beside the relative bound.
  atol = whole_config.optim.learning_rate / 10
  for x, y in zip(jax.tree.leaves(micro.params), jax.tree.leaves(whole.params)):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-4, atol=atol)


@pytest.mark.slow
def test_a_cooldown_scales_each_update_by_its_share_of_the_remaining_steps(av_bag):
  from searchless.data import loader
  from searchless.training import sharding
  from searchless.training import step as step_lib

  base = [*SMALL, f'data.train={av_bag}', 'data.worker_count=0', 'train.num_steps=10']
  batch = next(iter(loader.config_loader(configs.load(TINY, base), split='train')))  # [16, T] real rows.
  moves = {}
  for cooldown, at in ((0, 9), (4, 9), (4, 7), (4, 6)):
    fns = step_lib.make_functions(
      configs.load(TINY, [*base, f'optim.cooldown_steps={cooldown}']), sharding.make_mesh(1)
    )
    start = fns.init(jax.random.PRNGKey(0))
    start = start._replace(step=jax.device_put(np.int32(at), fns.state_sharding.step))  # Steps taken so far.
    before = [np.array(p) for p in jax.tree.leaves(start.params)]  # The update donates `start`.
    end, _ = fns.update(start, jax.device_put(batch, fns.batch_sharding))
    assert int(end.step) == at + 1
    moves[cooldown, at] = [np.asarray(e) - b for e, b in zip(jax.tree.leaves(end.params), before)]
  # The last update (step 9 of 10) moves a quarter as far; step 7, 3/4; step 6 is the cooldown's first: all of it.
  # A move is read back as (p + u) - p: float32 rounds it at 6e-8 for weights near 1 (Adam's first u is lr = 1e-3).
  for key, factor in (((4, 9), 0.25), ((4, 7), 0.75), ((4, 6), 1.0)):
    for got, full in zip(moves[key], moves[0, 9]):
      np.testing.assert_allclose(got, factor * full, rtol=1e-5, atol=1.2e-7)
  assert max(np.abs(m).max() for m in moves[4, 9]) < 0.3 * max(np.abs(m).max() for m in moves[0, 9])


@pytest.mark.slow
def test_eight_cpu_devices_on_two_meshes_match_one_device(tmp_path, av_bag):
  one = _run_cli(tmp_path / 'one', av_bag)
  assert one.returncode == 0, one.stderr[-3000:]
  eight = {'XLA_FLAGS': '--xla_force_host_platform_device_count=8'}
  for fsdp in (1, 2):
    run = _run_cli(tmp_path / f'fsdp{fsdp}', av_bag, f'train.fsdp={fsdp}', env=eight)
    assert run.returncode == 0, run.stderr[-3000:]
    np.testing.assert_allclose(_losses(tmp_path / f'fsdp{fsdp}'), _losses(tmp_path / 'one'), rtol=2e-5)
    assert json.loads((tmp_path / f'fsdp{fsdp}' / 'metrics.jsonl').read_text().splitlines()[0])['devices'] == 8


@pytest.mark.slow
def test_graph_model_on_eight_cpu_devices_with_fsdp_and_micro_batches_matches_one_device(tmp_path, board_bag):
  one = _run_cli(tmp_path / 'one', board_bag, 'model.graph_edge_dim=8', steps=4, config='graph_tiny')
  assert one.returncode == 0, one.stderr[-3000:]
  eight = _run_cli(
    tmp_path / 'eight',
    board_bag,
    'model.graph_edge_dim=8',
    'train.fsdp=2',
    'train.micro_batch=8',
    steps=4,
    config='graph_tiny',
    env={'XLA_FLAGS': '--xla_force_host_platform_device_count=8'},
  )
  assert eight.returncode == 0, eight.stderr[-3000:]
  np.testing.assert_allclose(_losses(tmp_path / 'eight'), _losses(tmp_path / 'one'), rtol=2e-5)
  assert json.loads((tmp_path / 'eight' / 'metrics.jsonl').read_text().splitlines()[0])['devices'] == 8


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


def _train_on_two_processes(workdir, data: str, *overrides: str) -> list[subprocess.Popen]:
  """Processes 0 and 1 of a two-process training run (`SMALL` and `overrides`) in `workdir`, started."""
  flags = ['--coordinator', f'127.0.0.1:{_free_port()}', '--num_processes', '2', '--process_id']
  return [
    subprocess.Popen(
      _train_command(workdir, data, *flags, str(i), *SMALL, *overrides),
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
    )
    for i in range(2)
  ]


@pytest.mark.slow
def test_two_processes_train_and_write_one_checkpoint(tmp_path, av_bag):
  procs = _train_on_two_processes(tmp_path / 'run', av_bag, 'train.num_steps=6')
  outputs = [p.communicate(timeout=600) for p in procs]
  for p, (out, err) in zip(procs, outputs):
    assert p.returncode == 0, err[-3000:]
  steps = sorted(int(d.name) for d in (tmp_path / 'run' / 'checkpoints').iterdir() if d.name.isdigit())
  assert steps[-1] == 6
  model_config, params, saved = loading.load_model(str(tmp_path / 'run' / 'checkpoints'))
  assert saved.data.batch_size == 16 and model_config.num_layers == 1
  records = [json.loads(line) for line in (tmp_path / 'run' / 'metrics.jsonl').read_text().splitlines()]
  assert len(records) == 6 and {(r['processes'], r['devices']) for r in records} == {(2, 2)}


@pytest.mark.slow
def test_a_signal_to_one_process_stops_both_at_the_same_step(tmp_path, av_bag):
  """A pod's hosts agree on stopping: one host signalled alone would leave the other waiting in a collective."""
  procs = _train_on_two_processes(
    tmp_path / 'run', av_bag, 'train.num_steps=100000', 'train.ckpt_every=100000', 'train.log_every=7'
  )
  metrics = tmp_path / 'run' / 'metrics.jsonl'
  deadline = time.time() + 300
  while not metrics.exists():
    assert time.time() < deadline and all(p.poll() is None for p in procs), [p.communicate()[1][-2000:] for p in procs]
    time.sleep(0.1)
  procs[1].send_signal(signal.SIGTERM)  # Process 1 only.
  outputs = [p.communicate(timeout=120) for p in procs]
  for p, (out, err) in zip(procs, outputs):
    assert p.returncode == 0, err[-3000:]
  steps = [int(d.name) for d in (tmp_path / 'run' / 'checkpoints').iterdir() if d.name.isdigit()]
  assert len(steps) == 1 and steps[0] >= 3  # One checkpoint, at the step both stopped at.
  assert f'stopped by signal at step {steps[0]}' in outputs[0][0] + outputs[0][1]  # Process 0 was never signalled.
  assert (
    json.loads(metrics.read_text().splitlines()[-1])['step'] == steps[0]
  )  # Its last steps logged, at whatever step.


@pytest.mark.slow
def test_a_second_trainer_is_refused_and_a_killed_run_resumes_with_one_metrics_line_per_step(tmp_path, av_bag):
  import signal
  import time

  cmd = _train_command(tmp_path, av_bag, *SMALL, 'train.num_steps=100000')
  first = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
  metrics = tmp_path / 'metrics.jsonl'
  deadline = time.monotonic() + 300
  while time.monotonic() < deadline and (not metrics.exists() or len(metrics.read_text().splitlines()) < 8):
    time.sleep(0.2)
  try:
    assert first.poll() is None, first.stderr.read()[-3000:]
    with pytest.raises(
      folder_lock.FolderInUse, match=f'{tmp_path} is in use by another trainer \\(pid {first.pid} on '
    ):
      train.train(small_config(av_bag, 'train.num_steps=5'), tmp_path)
  finally:
    first.send_signal(signal.SIGKILL)  # A crash: steps were logged after its last checkpoint.
    first.wait()
  logged = [json.loads(line)['step'] for line in metrics.read_text().splitlines()]
  resumed_from = checkpoint.Checkpointer(str(tmp_path / 'checkpoints')).latest_step()
  assert max(logged) > resumed_from
  end = max(logged) + 2
  train.train(small_config(av_bag, f'train.num_steps={end}'), tmp_path)  # The lock died with the process.
  assert [json.loads(line)['step'] for line in metrics.read_text().splitlines()] == list(range(1, end + 1))
