"""The player's rules and the Python API on checkpoints: the tests that build, train or play models (slow).

The fast ones, and the helpers both use, are in tests/unit/test_player.py.
"""

import json
import os
import pathlib

import chess
import pytest

from searchless.core import tokenizer
from searchless.play import player as player_lib
from searchless.play import predictor as predictor_lib


def _small_export(tmp_path, *overrides):
  """A small board-packed transformer (random parameters), exported as a shipped model is (config and probe)."""
  from searchless import configs
  from searchless.model import loading
  from searchless.model import network
  from searchless.model.config import ModelConfig

  config = configs.load(
    'tiny_packed', ['model.embedding_dim=16', 'model.num_layers=1', 'model.num_heads=2', *overrides]
  )
  params = network.init_params(ModelConfig.from_config(config))
  return loading.export(str(tmp_path / 'model'), params, config, dtype='float32')


def _edit_model_config(model_dir, **fields):
  """Changes fields of an exported model's config, as a hand edit would."""
  config_file = model_dir / 'config' / 'config.json'
  config = json.loads(config_file.read_text())
  config['model'].update(fields)
  config_file.write_text(json.dumps(config))


@pytest.mark.slow
def test_a_config_edited_away_from_its_weights_is_refused(tmp_path, monkeypatch):
  """Heads leave no trace in the paper's parameter shapes: the probe saved with a model catches them."""
  from searchless.model import loading
  from searchless.model import network

  monkeypatch.setattr(predictor_lib, '_JITTED', {})  # No shape another test compiled for a model of this shape.
  model_dir = _small_export(tmp_path)
  player = player_lib.Player.load(str(model_dir))
  assert player.policy.kind == 'action_value'  # The export loads as it is.
  # The probe ran through the predictor, in the start position's shape (20 moves: 32 slots): its first move's.
  assert player.policy.predictor.shapes.ready == {(1, tokenizer.SEQUENCE_LENGTH + 32)}
  before = player.policy.predictor.rows_run
  assert player.play(chess.Board()) and player.policy.predictor.rows_run == before + 1  # No new shape.
  assert player.policy.predictor.shapes.ready == {(1, tokenizer.SEQUENCE_LENGTH + 32)}
  # Its probe passed, and is remembered in the compilation cache: the same files load again without it.
  memos = list((pathlib.Path(os.environ['JAX_COMPILATION_CACHE_DIR']) / 'searchless-probes').iterdir())
  assert memos
  with monkeypatch.context() as patch:
    patch.setattr(network, 'probe', lambda *_: pytest.fail('the probe ran again'))
    patch.setattr(predictor_lib.PackedPredictor, 'probe', lambda *_: pytest.fail('the probe ran again'))
    assert loading.load_model(str(model_dir))[0].num_heads == 2
    # Nothing runs at load: the one shape ready is the first player's, which predictors of a model share.
    assert player_lib.Player.load(str(model_dir)).policy.predictor.shapes.ready == {(1, tokenizer.SEQUENCE_LENGTH + 32)}
  _edit_model_config(model_dir, num_heads=4)  # Another config: the probe runs again.
  with pytest.raises(
    ValueError,
    match=r'do not compute what they computed when saved \(probe distance \d\.\d{3} > 0\.02\)'
    r'.*num_heads 4',
  ):
    player_lib.Player.load(str(model_dir))
  with pytest.raises(ValueError, match='^num_heads 2 contradicts the checkpoint at .*: its config has num_heads 4$'):
    loading.load_model(str(model_dir), num_heads=2)


@pytest.mark.slow
def test_a_prior_edited_away_from_its_weights_is_one_line_naming_the_table(tmp_path):
  """The structural priors' tables have per-head shapes: a changed head count is named, not a haiku traceback."""
  model_dir = _small_export(tmp_path, 'model.square_bias=relative')
  _edit_model_config(model_dir, num_heads=4)
  with pytest.raises(
    ValueError,
    match=r"do not fit their config: \['multi_head_dot_product_attention'\]\['move_square_bias'\] "
    r"is \(2, 2\) there, \(4, 2\) in the config's transformer model$",
  ):
    player_lib.Player.load(str(model_dir))


def _cache_files_after_a_move(checkpoint, env_changes: dict[str, str | None]) -> None:
  """Loads `checkpoint` with the Python API and plays a move in a fresh process with `env_changes`."""
  import os
  import subprocess
  import sys

  env = {k: v for k, v in os.environ.items() if k not in env_changes}
  env.update({k: v for k, v in env_changes.items() if v is not None})
  code = (
    f'import chess; from searchless.play import player; player.Player.load({str(checkpoint)!r}).play(chess.Board())'
  )
  subprocess.run([sys.executable, '-c', code], env=env, check=True, capture_output=True, timeout=300)


@pytest.mark.slow
def test_the_python_api_keeps_compiled_shapes_in_a_persistent_cache(model_checkpoint, tmp_path):
  """By default under $XDG_CACHE_HOME/searchless/xla; $SEARCHLESS_COMPILATION_CACHE moves it; a
  JAX_COMPILATION_CACHE_DIR the user set is used as it is."""
  _cache_files_after_a_move(
    model_checkpoint,
    {'XDG_CACHE_HOME': str(tmp_path / 'xdg'), 'SEARCHLESS_COMPILATION_CACHE': None, 'JAX_COMPILATION_CACHE_DIR': None},
  )
  assert any((tmp_path / 'xdg' / 'searchless' / 'xla').iterdir())
  _cache_files_after_a_move(
    model_checkpoint,
    {
      'XDG_CACHE_HOME': str(tmp_path / 'xdg2'),
      'SEARCHLESS_COMPILATION_CACHE': None,
      'JAX_COMPILATION_CACHE_DIR': str(tmp_path / 'jax'),
    },
  )
  assert any((tmp_path / 'jax').iterdir()) and not (tmp_path / 'xdg2').exists()
  _cache_files_after_a_move(
    model_checkpoint,
    {'SEARCHLESS_COMPILATION_CACHE': str(tmp_path / 'ours'), 'JAX_COMPILATION_CACHE_DIR': str(tmp_path / 'jax2')},
  )
  assert any((tmp_path / 'ours').iterdir()) and not (tmp_path / 'jax2').exists()
