"""The model shipped in the package: export format, the name 'pretrained' everywhere, an installed wheel."""

import importlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

import chess
import jax
import numpy as np
import pytest

from searchless import configs
from searchless.model import loading
from searchless.model import network
from searchless.model.config import ModelConfig
from searchless.play import agents
from searchless.play import player as player_lib

from helpers import ROOT, uci_argv


MATE_IN_ONE = '6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1'
SCHOLARS_MATE = 'r1bqkbnr/pppp1ppp/2n5/4p3/2B1P3/5Q2/PPPP1PPP/RNB1K1NR w KQkq - 4 4'  # Qxf7#.


def test_export_writes_bfloat16_parameters_and_the_config_that_load_model_reads(tmp_path):
  config = configs.load('tiny_packed', ['data.train=unused'])
  params = network.init_params(ModelConfig.from_config(config))
  out = loading.export(str(tmp_path / 'model'), params, config)
  handler = loading.ocp.PyTreeCheckpointHandler()
  saved = loading.metadata_tree(handler.metadata(out / 'params_ema'))
  handler.close()
  assert {str(m.dtype) for m in jax.tree.leaves(saved)} == {'bfloat16'}
  assert sorted(json.loads((out / 'probe' / 'probe.json').read_text())) == ['params_ema']  # Checked on loading.
  model_config, restored, experiment = loading.load_model(str(out))
  assert model_config == ModelConfig.from_config(config) and experiment.model.packing == 'board'
  for a, b in zip(jax.tree.leaves(restored), jax.tree.leaves(params)):
    assert a.dtype == np.float32 and a.shape == b.shape
    np.testing.assert_array_equal(a, np.asarray(b).astype(jax.numpy.bfloat16).astype(np.float32))
  with pytest.raises(FileExistsError, match='exists: export writes a new directory'):
    loading.export(str(out), params, config)


def test_the_name_pretrained_is_the_package_model_and_a_missing_one_says_how_to_get_it(tmp_path, monkeypatch):
  assert loading.resolve('pretrained') == loading.pretrained_dir() / 'params_ema'
  assert str(loading.pretrained_dir()).startswith(str(ROOT / 'searchless'))
  assert loading.resolve('pretrained-transformer') == loading.pretrained_dir('pretrained-transformer') / 'params_ema'
  monkeypatch.setattr(loading, 'pretrained_dir', lambda name='pretrained': loading.epath.Path(tmp_path))
  with pytest.raises(FileNotFoundError, match='the pretrained model is missing from this installation'):
    player_lib.Player.load('pretrained')
  with pytest.raises(FileNotFoundError, match='the pretrained-transformer model is missing from this installation'):
    player_lib.Player.load('pretrained-transformer')


@pytest.mark.parametrize('name', ['pretrained', 'pretrained-transformer'])
def test_each_shipped_model_is_small_documented_and_plays(name):
  directory = pathlib.Path(str(loading.pretrained_dir(name)))
  size = sum(f.stat().st_size for f in directory.rglob('*') if f.is_file())
  assert size <= 20 * 2**20
  card = (directory / 'MODEL_CARD.md').read_text()
  for section in ('## Data and labels', '## Training', '## Measured strength', '## Reproduce'):
    assert section in card
  player = player_lib.Player.load(name)
  assert player.policy.kind == 'action_value'
  assert agents.from_spec(f'checkpoint:{name},name=shipped').name == 'shipped'
  board = chess.Board('r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3')
  assert player.play(board) in board.legal_moves


@pytest.mark.parametrize('name, kind', [('pretrained', 'graph'), ('pretrained-transformer', 'transformer')])
def test_each_shipped_model_is_a_probability_over_the_legal_moves_and_finds_mate(name, kind):
  """Invariants of any model shipped under the name: they hold after every retrain, unlike its exact numbers."""
  player = player_lib.Player.load(name)
  model_config, params, _ = loading.load_model(name)
  assert model_config.kind == kind  # The graph model, and the paper's network (board-packed).
  # The shipped weights reproduce the probe saved beside them (load_model checks it; here the distance itself).
  probe_file = pathlib.Path(str(loading.pretrained_dir(name))) / loading.PROBE / loading.PROBE_FILE
  saved = json.loads(probe_file.read_text())[loading.PARAMS_EMA]
  assert network.probe_distance(saved, network.probe(model_config, params)) <= loading.PROBE_TOLERANCE
  # Loading computes it through the player's predictor, padded to the start position's move bucket: the same.
  assert network.probe_distance(network.probe(model_config, params), player.policy.predictor.probe()) < 1e-5
  for fen in (
    chess.STARTING_FEN,
    'r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3',
    '8/8/8/4k3/8/8/4P3/4K3 b - - 0 1',
  ):
    board = chess.Board(fen)
    values = player.win_probabilities(board)
    assert set(values) == {m.uci() for m in board.legal_moves}  # Every legal move, nothing else.
    assert list(values.values()) == sorted(values.values(), reverse=True)  # Best first.
    assert all(0.0 <= v <= 1.0 for v in values.values())
    assert player.play(board).uci() == next(iter(values))  # Argmax play is the best-valued move.
  # Each move's value is a distribution over the buckets, and so is the saved probe.
  analysis = player.analyse(chess.Board())
  np.testing.assert_allclose(np.exp(analysis.log_probs).sum(axis=-1), 1.0, atol=1e-4)
  np.testing.assert_allclose(sum(saved), 1.0, atol=1e-4)
  # The scholar's mate, the mate in one every beginner meets: valued as the best move and played.
  assert player.play(chess.Board(SCHOLARS_MATE)) == chess.Move.from_uci('f3f7')


def _scripts() -> dict[str, str]:
  """{console script: entry point} of pyproject.toml, the one list of the commands."""
  tomllib = pytest.importorskip('tomllib')  # Python >= 3.11.
  return tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']['scripts']


def test_every_console_script_is_a_command_module_main():
  for script, target in _scripts().items():
    module, _, function = target.partition(':')
    assert script.startswith('searchless-') and function == 'main'
    assert module.startswith(('searchless.commands.', 'searchless.pipelines.')), target
    assert callable(getattr(importlib.import_module(module), function)), target


@pytest.fixture(scope='module')
def wheel(tmp_path_factory) -> pathlib.Path:
  """The package's wheel, built once for this module's tests from a copy of the checkout's files (those git tracks
  or would: setuptools' build/ folder in the checkout keeps files since deleted, and would ship them)."""
  source, wheels = tmp_path_factory.mktemp('source'), tmp_path_factory.mktemp('wheels')
  listed = subprocess.run(
    ['git', 'ls-files', '-z', '--cached', '--others', '--exclude-standard'],
    cwd=ROOT,
    check=True,
    capture_output=True,
    text=True,
  ).stdout
  for name in filter(None, listed.split('\0')):
    if (ROOT / name).is_file():  # Not a file deleted but not yet committed.
      (source / name).parent.mkdir(parents=True, exist_ok=True)
      shutil.copy2(ROOT / name, source / name)
  subprocess.run(
    [sys.executable, '-m', 'pip', 'wheel', '--no-deps', '-q', '-w', str(wheels), str(source)],
    check=True,
    capture_output=True,
  )
  return next(wheels.glob('searchless-*.whl'))


# Paths of a machine, which no shipped file may hold (a path the package uses at run time is built from the
# environment: `~/.cache/searchless` is written so, for the user's home): homes, scratch folders, this checkout.
MACHINE_PATHS = ('/root/', '/home/', '/Users/', '/tmp/', '/work/', str(ROOT), str(pathlib.Path.home()) + '/')


def _not_the_product(wheel: pathlib.Path) -> list[str]:
  """What the wheel holds beyond the product: orbax's commit markers, the campaign's configs (repository tooling),
  and any file, of any type, that holds a path of a machine (each with the path it holds)."""
  found = []
  with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
      if name.endswith('commit_success.txt') or 'campaign' in name:
        found.append(name)
      data = z.read(name)
      found += [f'{name}: {p}' for p in dict.fromkeys(MACHINE_PATHS) if p.encode() in data]
  return found


# `script --help` for each script named, one after another in one process (each a process of its own spent a second
# importing what the others import again): {script: [exit status, stdout, stderr]}, as JSON.
SHOW_HELP = """
import contextlib, io, json, runpy, sys, traceback
shown = {}
for script in sys.argv[1:]:
  sys.argv, out, err, status = [script, '--help'], io.StringIO(), io.StringIO(), 0
  try:
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
      runpy.run_path(script, run_name='__main__')
  except SystemExit as stop:
    status = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
  except BaseException:
    status = 1
    err.write(traceback.format_exc())
  shown[script] = [status, out.getvalue(), err.getvalue()]
print(json.dumps(shown))
"""


@pytest.mark.slow
def test_the_wheel_holds_the_product_only(wheel):
  assert _not_the_product(wheel) == []


@pytest.mark.slow
def test_an_installed_wheel_loads_pretrained_outside_the_source_tree(wheel, tmp_path):
  """Install the wheel alone into a directory, and use it from elsewhere (Python API, agent, UCI)."""
  target = tmp_path / 'site'
  subprocess.run(
    [sys.executable, '-m', 'pip', 'install', '--no-deps', '-q', '--target', str(target), str(wheel)],
    check=True,
    capture_output=True,
  )
  env = {**os.environ, 'PYTHONPATH': str(target)}
  work = tmp_path / 'elsewhere'
  work.mkdir()
  script = (
    'import chess, searchless\n'
    'from searchless import Player\n'
    'from searchless.play import agents\n'
    'p = Player.load("pretrained")\n'
    'a = agents.from_spec("checkpoint:pretrained")\n'
    f'b = chess.Board("{MATE_IN_ONE}")\n'
    'print(searchless.__file__)\n'
    'print(p.play(b).uci(), a.play(b).uci())\n'
  )
  out = subprocess.run([sys.executable, '-c', script], cwd=work, env=env, check=True, capture_output=True, text=True)
  module_file, moves = out.stdout.split('\n')[:2]
  assert module_file.startswith(str(target))
  first, second = moves.split()
  assert first == second and chess.Move.from_uci(first) in chess.Board(MATE_IN_ONE).legal_moves
  uci = subprocess.run(
    uci_argv('pretrained'),
    cwd=work,
    env=env,
    input='uci\nisready\nposition startpos moves e2e4\ngo movetime 100\nquit\n',
    capture_output=True,
    text=True,
    timeout=300,
  )
  lines = uci.stdout.splitlines()
  assert 'uciok' in lines and 'readyok' in lines
  best = [line for line in lines if line.startswith('bestmove ')]
  board = chess.Board()
  board.push_uci('e2e4')
  assert len(best) == 1 and chess.Move.from_uci(best[0].split()[1]) in board.legal_moves

  # Every console script of the wheel starts.
  scripts = sorted((target / 'bin').glob('searchless-*'))
  assert [s.name for s in scripts] == sorted(_scripts())

  shown = subprocess.run(
    [sys.executable, '-c', SHOW_HELP, *map(str, scripts)], cwd=work, env=env, capture_output=True, text=True
  )
  assert shown.returncode == 0, shown.stderr[-3000:]
  helps = json.loads(shown.stdout)
  assert sorted(helps) == sorted(map(str, scripts))
  for script, (status, out, err) in helps.items():
    assert status == 0 and 'usage:' in out, (script, err[-500:])

  # The demo from the wheel alone: its default input and puzzles are the samples shipped in the package, and it
  # trains a shipped config by name. (Its other steps run from the source tree in test_demo.py.)
  demo = subprocess.run(
    [
      sys.executable,
      '-m',
      'searchless.commands.demo',
      '--run_dir',
      str(tmp_path / 'demo'),
      '--no_progress',
      '--annotate_args',
      '--max_games 4 --limit nodes=200 --test_fraction 0.1 --no_progress',
      '--train_args',
      'train.num_steps=2 data.batch_size=8 model.num_layers=1 train.eval_records=200',
      '--pretrained',
      '',
      '--steps',
      'annotate',
      'train',
      'puzzles',
      'report',
    ],
    cwd=work,
    env=env,
    capture_output=True,
    text=True,
    timeout=900,
  )
  assert demo.returncode == 0, demo.stderr[-3000:]
  manifest = json.loads((tmp_path / 'demo' / 'data' / 'manifest.json').read_text())
  assert manifest['inputs']['train'] == [str(target / 'searchless' / 'samples' / 'sample_games.pgn')]
  trained = json.loads((tmp_path / 'demo' / 'train' / 'summary.json').read_text())
  assert (trained['complete'], trained['step'], trained['batch_size']) == (True, 2, 8)
  summary = json.loads((tmp_path / 'demo' / 'puzzles' / 'summary.json').read_text())
  assert summary['n'] == 194 and summary['puzzles'] == str(target / 'searchless' / 'samples' / 'sample_puzzles.csv')
  assert (tmp_path / 'demo' / 'report' / 'report.html').stat().st_size > 0
