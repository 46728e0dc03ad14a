"""searchless-export: safetensors weights, config and a serialized forward function, round-tripped."""

import json
import os
import stat
import subprocess
import sys

import jax
import numpy as np
import safetensors.numpy

from searchless.model import export
from searchless.model import loading
from searchless.model import network


def _round_trip(tmp_path, source, tokens):
  result = subprocess.run(
    [sys.executable, '-m', 'searchless.commands.export', '--checkpoint', str(source), '--out', str(tmp_path / 'out')],
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert result.returncode == 0, result.stderr[-2000:]
  model_config, params, _ = loading.load_model(str(source))
  weights, saved_config = export.load_safetensors(tmp_path / 'out' / 'model.safetensors')
  assert saved_config == model_config
  assert jax.tree.structure(weights) == jax.tree.structure(params)
  for a, b in zip(jax.tree.leaves(weights), jax.tree.leaves(params), strict=True):
    np.testing.assert_array_equal(a, b)  # Bit for bit, float32.
  # Any safetensors reader sees flat 'module/name' tensors.
  flat = safetensors.numpy.load_file(str(tmp_path / 'out' / 'model.safetensors'))
  assert {name: a.shape for name, a in flat.items()} == {
    f'{module}/{name}': np.shape(a) for module, leaves in params.items() for name, a in leaves.items()
  }
  forward = export.load_forward(tmp_path / 'out' / 'forward.jax')
  want = jax.jit(network.build(model_config).apply)(params, None, tokens)
  np.testing.assert_allclose(np.asarray(forward.call(tokens)), np.asarray(want), atol=1e-5)
  umask = os.umask(0)
  os.umask(umask)
  for name in ('model.safetensors', 'config.json', 'forward.jax'):  # Readable as the umask says (0600 once).
    assert stat.S_IMODE((tmp_path / 'out' / name).stat().st_mode) == 0o666 & ~umask, name
  return json.loads((tmp_path / 'out' / 'config.json').read_text())


def _packed_tokens():
  tokens = np.full((3, 77 + export.MOVE_SLOTS), -1, np.int32)  # 3 boards (any batch), -1: no move.
  tokens[:, :77] = 0
  tokens[:, 77:82] = [[10, 20, 30, -1, -1], [1, 2, 3, 4, 5], [7, -1, -1, -1, -1]]
  return tokens


def test_the_shipped_packed_transformer_round_trips(tmp_path):
  config = _round_trip(tmp_path, 'pretrained-transformer', _packed_tokens())
  assert config['model']['packing'] == 'board' and config['experiment']['policy'] == 'action_value'


def test_the_shipped_graph_model_round_trips(tmp_path):
  config = _round_trip(tmp_path, 'pretrained', _packed_tokens())
  assert config['model']['kind'] == 'graph' and config['experiment']['policy'] == 'action_value'


def test_a_published_layout_checkpoint_round_trips(tmp_path, compat):
  tokens = np.random.default_rng(0).integers(0, 32, (2, 79)).astype(np.int32)
  config = _round_trip(tmp_path, compat / 'reference_local_checkpoint', tokens)
  assert config['experiment'] is None and config['model']['num_layers'] >= 1
