"""benchmarks/gpu_playbook.py end to end on the CPU at toy size: its JSON, its table and a model that loads."""

import importlib.util
import json
import math
import tarfile

import numpy as np
import pytest

from searchless import configs
from campaign import board_columns
from searchless.model import loading
from searchless.model import transformer as model
from searchless.model.config import ModelConfig
import helpers

pytestmark = pytest.mark.slow  # Three processes compile toy models: a few minutes on 2 busy cores.

ROW_FIELDS = {
  'config',
  'dtype',
  'batch',
  'micro_batch',
  'params',
  'step_ms',
  'examples_per_s',
  'tokens_per_s',
  'model_flops_per_step',
  'xla_flops_per_step',
  'mfu',
  'mfu_xla',
  'peak_tflops',
  'state_mib_per_device',
  'compiled_mib_per_device',
  'peak_mib_per_device',
  'profiled',
  'largest_batch',
}


def _playbook():
  spec = importlib.util.spec_from_file_location('gpu_playbook', helpers.ROOT / 'benchmarks' / 'gpu_playbook.py')
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


@pytest.fixture(scope='module')
def run(board_bag, tmp_path_factory):
  """The whole playbook, --quick, on the ChessBench sample's 57 boards carried as columns; the model split in
  64 KiB parts."""
  tmp = tmp_path_factory.mktemp('playbook')
  board_columns.pack(board_bag, tmp / 'columns', workers=1)
  playbook = _playbook()
  playbook.PART_LIMIT = 2**16  # The float32 toy model (~40k parameters) is ~0.2 MiB: parts.
  result = playbook.main(
    [
      '--quick',
      '--data',
      str(tmp / 'columns'),
      '--out',
      str(tmp / 'out'),
      '--scratch',
      str(tmp / 'scratch'),
      '--seconds',
      '30',
    ]
  )
  return playbook, result, tmp


def test_writes_the_json_and_table_with_every_field(run):
  _, result, tmp = run
  assert json.loads((tmp / 'out' / 'playbook.json').read_text()) == json.loads(json.dumps(result))
  assert {
    'device',
    'platform',
    'devices',
    'memory_bytes_per_device',
    'batch',
    'flops',
    'rows',
    'skipped',
    'train',
    'training',
    'seconds',
  } <= set(result)
  (row,) = result['rows']
  assert set(row) == ROW_FIELDS
  assert (row['config'], row['dtype'], row['batch'], row['params']) == ('tiny', 'float32', 8, 402_624)
  assert row['step_ms'] > 0 and 0 < row['mfu'] and row['xla_flops_per_step'] > 0
  assert row['examples_per_s'] == pytest.approx(8 / (row['step_ms'] / 1000))
  seq_flops = model.flops_per_sequence(ModelConfig.from_config(configs.load('tiny')), 79)
  assert row['model_flops_per_step'] == 3 * seq_flops * 8
  # The trained config's batch: the smallest tried at >= 30% MFU, else the largest tried.
  train = result['train']
  tried = [r['batch'] for r in train['rows']]
  assert tried[0] == 4 and train['batch'] in tried
  assert train['batch'] == next((r['batch'] for r in train['rows'] if r['mfu'] >= 0.30), tried[-1])
  table = (tmp / 'out' / 'playbook.md').read_text()
  assert table.count('\n| tiny |') == 1 and table.count('\n| tiny_packed') == len(tried)


def test_trains_then_exports_a_model_that_loads(run):
  playbook, result, tmp = run
  training = result['training']
  assert training['step'] >= 1 and math.isfinite(training['loss']) and training['batch'] == result['train']['batch']
  assert 'model.embedding_dim=16' in training['overrides'] and training['config'] == 'tiny_packed'
  names = training['files']
  assert len(names) >= 2 and names == [f'model.tar.{i:02d}' for i in range(len(names))]
  assert all((tmp / 'out' / n).stat().st_size <= playbook.PART_LIMIT for n in names)
  assert len(list((tmp / 'out').iterdir())) <= 8  # What the device gives back.
  whole = tmp / 'model.tar'
  whole.write_bytes(b''.join((tmp / 'out' / n).read_bytes() for n in names))  # cat model.tar.* > model.tar
  with tarfile.open(whole) as t:
    t.extractall(tmp / 'back', filter='data')
  config, params, experiment = loading.load_model(str(tmp / 'back' / 'tiny_packed'))
  assert (config.embedding_dim, config.num_layers, config.packing) == (16, 1, 'board')
  assert experiment.train.compute_dtype == 'float32'  # --set's override came after the GPU list's.
  trained = loading.load_params(str(tmp / 'scratch' / 'train'), ema=True)
  for module, leaves in params.items():
    for name, leaf in leaves.items():
      np.testing.assert_array_equal(np.asarray(leaf, np.float32), trained[module][name])
  assert (tmp / 'back' / 'tiny_packed' / 'train_metrics.jsonl').exists()


def test_a_model_under_the_limit_is_one_tar(run, tmp_path):
  playbook, _, tmp = run
  playbook.PART_LIMIT = 16 * 2**20
  assert playbook.export(tmp / 'scratch' / 'train', tmp_path / 'stage' / 'm', tmp_path) == ['model.tar']
  with tarfile.open(tmp_path / 'model.tar') as t:
    assert 'm/config/config.json' in t.getnames()


def test_an_update_over_the_memory_limit_is_refused_before_it_runs():
  spec = importlib.util.spec_from_file_location('train_step', helpers.ROOT / 'benchmarks' / 'train_step.py')
  train_step = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(train_step)
  toy = ['model.embedding_dim=16', 'model.num_layers=1', 'model.num_heads=2']
  needed = train_step.compiled_bytes('tiny', 'float32', 4, toy)
  assert needed > 0
  with pytest.raises(MemoryError, match=r'tiny float32 batch 4 .*: needs .* GiB a device'):
    train_step.measure('tiny', 'float32', 4, 1, toy, limit=needed - 1)
  # Micro-batches (what the playbook falls back to) need less.
  assert train_step.compiled_bytes('tiny', 'float32', 4, [*toy, 'train.micro_batch=1']) < needed
