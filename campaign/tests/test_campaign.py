"""The strength campaign: chunks as the shared labels were cut, resumable labels, distinct boards, train, evaluate."""

import json
import pathlib
import signal
import subprocess
import sys
import time

import psutil
import pytest

from campaign import boards as campaign_boards
from campaign import card as campaign_card
from campaign import games as campaign_games
from campaign import labels as campaign_labels
from campaign import log as campaign_log
from campaign import model as campaign_model
from campaign import run as campaign
from campaign import ship as campaign_ship
from searchless import configs
from searchless.core import bags
from searchless.core import config as config_lib
from searchless.core import records
from searchless.data import pgn
from searchless.evaluation import strength
from searchless.model import loading

from helpers import ROOT, alive


# A graph model small enough that a step takes milliseconds.
SMALL = [
  'model.embedding_dim=16',
  'model.graph_edge_dim=8',
  'model.num_layers=1',
  'model.num_heads=2',
  'data.batch_size=8',
  'train.log_every=1',
  'train.ckpt_every=1000',
  'data.worker_count=0',
]


def _board(fen, value):
  return records.BoardValue(fen, ('a1a2',), (value,), value)


def _label_folder(folder: pathlib.Path, train, test=()) -> pathlib.Path:
  for split, boards in (('train', train), ('test', test)):
    (folder / split).mkdir(parents=True)
    bags.write_records(str(folder / split / 'board_value_data.bag'), 'board_value', boards)
  (folder / 'manifest.json').write_text('{}')
  return folder


def _shared_labels(board_bag, tmp_path) -> pathlib.Path:
  """A shared folder whose one label chunk holds 40 train and the rest held-out boards of `board_bag`."""
  shared = tmp_path / 'shared'
  boards = bags.read_records(board_bag, 'board_value')
  _label_folder(shared / 'data' / 'labels' / 'chunk_000', boards[:40], boards[40:])
  return shared


def _no_sources(tmp_path) -> pathlib.Path:
  """A sources file with no game files: the steps run on the shared labels alone."""
  path = tmp_path / 'no_sources.json'
  path.write_text(json.dumps({'sources': [], 'games_per_chunk': 500}))
  return path


def _games(path: pathlib.Path) -> list[str]:
  return [game.text for game in pgn.iter_raw_games(str(path))]


def _env():
  import os

  return {**os.environ, 'PYTHONPATH': os.pathsep.join([str(ROOT), os.environ.get('PYTHONPATH', '')])}


def _few_puzzles(tmp_path) -> pathlib.Path:
  """The first 10 sample puzzles: an evaluation's puzzles in seconds."""
  puzzles = tmp_path / 'puzzles.csv'
  puzzles.write_text(
    ''.join((ROOT / 'searchless' / 'samples' / 'sample_puzzles.csv').read_text().splitlines(True)[:11])
  )
  return puzzles


def test_the_46k_file_is_cut_into_the_shared_labels_chunks_byte_for_byte(shared_data, tmp_path):
  sources, games_per_chunk = campaign_games.read_sources()
  assert [s.name for s in sources] == ['lichess999', 'bfx3970', 'magnus46k'] and games_per_chunk == 500
  todo = campaign_games.write_games(shared_data.parent, tmp_path / 'games', [sources[2]], games_per_chunk)
  assert [p.name for p in todo[:2]] == ['magnus46k_006.pgn', 'magnus46k_007.pgn'] and len(todo) == 87
  assert json.loads((tmp_path / 'games' / 'magnus46k.json').read_text())['games'] == 46177
  subprocess.run(
    [sys.executable, str(shared_data / 'labels' / 'make_chunks.py'), str(tmp_path / 'ref'), '6', '6'],
    check=True,
    capture_output=True,
  )
  assert (tmp_path / 'games' / 'magnus46k_006.pgn').read_bytes() == (tmp_path / 'ref' / 'chunk_006.pgn').read_bytes()
  # The shared labels' manifest counts the games of its chunk: the same cut gives the same count.
  manifest = json.loads((shared_data / 'labels' / 'chunk_000' / 'manifest.json').read_text())
  assert (tmp_path / 'games' / 'magnus46k_000.pgn').read_text().count('[Event ') == manifest['games']['read'] == 497


def test_boards_are_merged_distinct_first_label_first_and_rebuilt_only_when_labels_change(tmp_path):
  a = _label_folder(
    tmp_path / 'a',
    [_board('8/8/8/8/8/8/8/K1k5 w - - 0 1', 0.25), _board('8/8/8/8/8/8/8/K1k5 b - - 0 1', 0.5)],
    [_board('8/8/8/8/8/8/1K6/2k5 w - - 0 1', 0.75)],
  )
  b = _label_folder(
    tmp_path / 'b', [_board('8/8/8/8/8/8/8/K1k5 w - - 7 40', 0.125), _board('8/8/8/8/8/8/K7/2k5 w - - 0 1', 1.0)]
  )
  out = tmp_path / 'boards'
  done = campaign_boards.merge_boards([a, b], out, 'train')
  assert (done['records_read'], done['distinct_boards']) == (4, 3)
  merged = bags.read_records(done['bag'], 'board_value')
  # The same position with other move counters is the same board: the first folder's label is kept.
  assert [(r.fen, r.state_value) for r in merged] == [
    ('8/8/8/8/8/8/8/K1k5 w - - 0 1', 0.25),
    ('8/8/8/8/8/8/8/K1k5 b - - 0 1', 0.5),
    ('8/8/8/8/8/8/K7/2k5 w - - 0 1', 1.0),
  ]
  stamp = pathlib.Path(done['bag']).stat().st_mtime_ns
  assert (
    campaign_boards.merge_boards([a, b], out, 'train') == done and pathlib.Path(done['bag']).stat().st_mtime_ns == stamp
  )
  assert campaign_boards.merge_boards([a], out, 'train')['distinct_boards'] == 2  # A different set of labels: rebuilt.
  assert campaign_boards.merge_boards([a, b], out, 'test')['distinct_boards'] == 1
  # A merge that fails part-way (a label folder without its bag) leaves the last bag and its index, and no part.
  before = sorted(p.name for p in out.iterdir())
  with pytest.raises(FileNotFoundError):
    campaign_boards.merge_boards([a, tmp_path / 'missing'], out, 'train')
  assert (
    sorted(p.name for p in out.iterdir())
    == before
    == ['test.json', 'test_board_value_data.bag', 'train.json', 'train_board_value_data.bag']
  )
  assert json.loads((out / 'train.json').read_text())['folders'] == [str(a)]


def test_without_an_accelerator_it_packs_the_next_gpu_calls_boards_and_refuses_to_train(board_bag, tmp_path, capsys):
  from campaign import board_columns

  shared = _shared_labels(board_bag, tmp_path)
  workdir = tmp_path / 'campaign'
  assert campaign.DEFAULT_STEPS == ('games', 'labels', 'pack')
  campaign.run(workdir, shared, sources=_no_sources(tmp_path))  # The default steps: no labels to make here.
  packed = json.loads((workdir / 'device' / 'data.json').read_text())
  assert (packed['boards'], packed['distinct_boards']) == (40, 40) and packed['bytes'] <= 28 * 2**20
  assert board_columns.unpack(workdir / 'device' / 'data', tmp_path / 'back.bag') == 40
  assert [r.fen for r in bags.read_records(str(tmp_path / 'back.bag'), 'board_value')] == [
    r.fen for r in bags.read_records(board_bag, 'board_value')[:40]
  ]
  assert '[pack] 40 of 40 distinct train boards as columns' in capsys.readouterr().out
  # A budget the columns do not fit: the first boards that do, the folder replaced whole.
  small = packed['bytes'] * 0.6 / 2**20
  campaign.run(workdir, shared, steps=['pack'], sources=_no_sources(tmp_path), device_mib=small)
  again = json.loads((workdir / 'device' / 'data.json').read_text())
  assert 0 < again['boards'] < 40 and again['bytes'] <= small * 2**20
  assert sorted(p.name for p in (workdir / 'device').iterdir()) == ['data', 'data.json']
  with pytest.raises(ValueError, match='^the train step has no accelerator here: CPU training stretches'):
    campaign.run(workdir, shared, steps=['train'], sources=_no_sources(tmp_path))
  assert not (workdir / 'train').exists()


@pytest.mark.engine
def test_labels_are_resumable_logged_and_an_unfinished_folder_is_labelled_again(stockfish, lichess_999, tmp_path):
  games = _games(lichess_999)
  short = [g for g in games if g.count('.') < 12][:2]  # Two short real games: a few dozen boards.
  chunk = tmp_path / 'games' / 'lichess999_000.pgn'
  chunk.parent.mkdir()
  chunk.write_text(campaign_games.chunk_texts(short, 500)[0])
  (tmp_path / 'logs').mkdir()
  (tmp_path / 'labels' / 'lichess999_000' / 'train').mkdir(parents=True)  # A job killed part-way.
  (tmp_path / 'labels' / 'lichess999_000' / 'train' / 'board_value_data.bagz').write_bytes(b'half')
  done = list(campaign_labels.label_chunks([chunk], tmp_path / 'labels', tmp_path, workers=1))
  assert done == [tmp_path / 'labels' / 'lichess999_000']
  manifest = json.loads((done[0] / 'manifest.json').read_text())
  assert manifest['command'][manifest['command'].index('--limit') + 1] == 'nodes=20000'
  assert manifest['games']['kept'] == 2 and manifest['engine']['mode'] == 'multipv'
  [run] = [json.loads(line) for line in (tmp_path / 'runs.jsonl').read_text().splitlines()]
  boards = manifest['splits']['train']['boards']
  assert (run['step'], run['chunk'], run['train_boards'], run['games']) == ('labels', 'lichess999_000', boards, 2)
  assert run['test_boards'] == manifest['splits']['test']['boards'] and run['core_hours'] > 0
  assert list(campaign_labels.label_chunks([chunk], tmp_path / 'labels', tmp_path)) == []  # Done: nothing to do.


@pytest.mark.engine
def test_a_signal_stops_the_label_job_with_its_engines_and_logs_nothing(stockfish, lichess_999, tmp_path):
  chunk = tmp_path / 'games' / 'lichess999_000.pgn'
  chunk.parent.mkdir()
  (tmp_path / 'logs').mkdir()
  chunk.write_text(campaign_games.chunk_texts(_games(lichess_999)[:20], 500)[0])  # Minutes of labels.
  script = (
    'import pathlib, sys\nfrom campaign import labels\nw = pathlib.Path(sys.argv[1])\n'
    'list(labels.label_chunks([w / "games" / "lichess999_000.pgn"], w / "labels", w, workers=1))\n'
  )
  proc = subprocess.Popen(
    [sys.executable, '-c', script, str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env()
  )
  campaign_process, deadline = psutil.Process(proc.pid), time.monotonic() + 300
  while time.monotonic() < deadline:  # Until the label job's engine runs.
    group = campaign_process.children(recursive=True)
    if any(alive(p) and 'stockfish' in p.name() for p in group):
      break
    time.sleep(0.1)
  assert len(group) >= 2, group  # searchless-annotate and its Stockfish.
  proc.send_signal(signal.SIGTERM)
  _, err = proc.communicate(timeout=60)
  out = tmp_path / 'labels' / 'lichess999_000'
  assert proc.returncode == 1 and err.splitlines()[-1] == (
    f'stopped by SIGTERM: {out} is unfinished and is labelled again by the next run'
  )
  deadline = time.monotonic() + 10
  while any(map(alive, group)) and time.monotonic() < deadline:
    time.sleep(0.1)
  assert not [p for p in group if alive(p)]  # No orphan labels on beside what runs next.
  assert not (out / 'manifest.json').exists() and not (tmp_path / 'runs.jsonl').exists()


@pytest.mark.slow
def test_train_and_evaluate_resume_and_log_their_cost(board_bag, tmp_path):
  shared = _shared_labels(board_bag, tmp_path)
  workdir = tmp_path / 'campaign'
  kwargs = dict(
    steps=['train', 'evaluate'],
    cpu_training=True,
    config_name='graph_tiny',
    sources=_no_sources(tmp_path),
    start_from='',
    overrides=[*SMALL, 'train.num_steps=2'],
    heldout_boards=5,
    puzzles=str(_few_puzzles(tmp_path)),
  )
  campaign.run(workdir, shared, **kwargs)
  campaign.run(workdir, shared, **{**kwargs, 'overrides': [*SMALL, 'train.num_steps=3']})
  runs = [json.loads(line) for line in (workdir / 'runs.jsonl').read_text().splitlines()]
  assert [(r['step'], r.get('steps', r.get('checkpoint_step'))) for r in runs] == [
    ('train', 2),
    ('evaluate', 2),
    ('train', 3),
    ('evaluate', 3),
  ]
  assert runs[0]['distinct_boards'] == 40 and all(r['core_hours'] > 0 for r in runs)
  curve = [json.loads(line) for line in (workdir / 'curve.jsonl').read_text().splitlines()]
  assert [c['heldout_boards'] for c in curve] == [5, 5] and curve[1]['train_core_hours'] > curve[0]['train_core_hours']
  low, high = curve[1]['puzzles_wilson95']
  assert low <= curve[1]['puzzles_solved'] / curve[1]['puzzles'] <= high
  assert campaign_log.campaign_points(curve) == curve and (workdir / 'curve.png').stat().st_size > 0
  assert campaign_log.training_hours(curve[1]) == curve[1]['train_wall_hours'] > 0
  readme = (workdir / 'README.md').read_text()
  assert f'--workdir {workdir} --shared {shared} --config graph_tiny' in readme and readme.count('| train |') == 2


@pytest.mark.slow
def test_a_model_trained_elsewhere_is_adopted_evaluated_and_started_from(board_bag, tmp_path):
  from searchless.training import train

  shared = _shared_labels(board_bag, tmp_path)
  workdir = tmp_path / 'campaign'
  kwargs = dict(
    config_name='graph_tiny',
    sources=_no_sources(tmp_path),
    start_from='',
    heldout_boards=5,
    puzzles=str(_few_puzzles(tmp_path)),
    cpu_training=True,
  )
  campaign.run(workdir, shared, steps=['train'], overrides=[*SMALL, 'train.num_steps=2'], **kwargs)
  with pytest.raises(ValueError, match='^the adopt step needs the model'):
    campaign.run(workdir, shared, steps=['adopt'], **kwargs)
  # A run elsewhere (as the GPU playbook makes on a GPU), exported as the adopt step takes it.
  train.train(configs.load('graph_tiny', [*SMALL, 'train.num_steps=3', f'data.train={board_bag}']), tmp_path / 'gpu')
  export = campaign_model.export_run(
    tmp_path / 'gpu', tmp_path / 'out' / 'wide', {'device': 'NVIDIA H200', 'cpu_cores': 16, 'models': 3, 'seconds': 420}
  )
  with pytest.raises(FileNotFoundError, match='gpu/train_summary.json: not an exported run'):
    campaign.run(workdir, shared, steps=['adopt'], model=str(tmp_path / 'gpu'), **kwargs)
  campaign.run(workdir, shared, steps=['adopt', 'evaluate'], model=str(export), **kwargs)
  assert campaign_model.latest_step(workdir / 'train_until_2') == 2 and not (workdir / 'train').exists()
  assert json.loads((workdir / 'adopted.json').read_text()) == {'model': 'adopted/wide'}
  runs = campaign_log.read_runs(workdir)
  assert [(r['step'], r.get('steps'), r.get('device'), r['core_hours']) for r in runs[1:]] == [
    ('train', 3, 'NVIDIA H200', 0.0),
    ('evaluate', None, None, runs[2]['core_hours']),
  ]
  assert runs[1]['device_hours'] > 0 and runs[1]['models_sharing_the_device'] == 3
  assert (runs[2]['model'], runs[2]['checkpoint_step']) == ('adopted/wide', 3)
  assert (workdir / 'eval' / 'wide' / 'puzzles' / 'summary.json').exists()
  assert campaign_log.totals(runs)['train_device_hours'] == round(runs[1]['device_hours'], 4)
  with pytest.raises(FileExistsError, match='wide was adopted already'):
    campaign.run(workdir, shared, steps=['adopt'], model=str(export), **kwargs)
  # The next train step is a new run that starts from the adopted parameters; then it is the campaign's model.
  campaign.run(workdir, shared, steps=['train'], overrides=[*SMALL, 'train.num_steps=1'], **kwargs)
  assert campaign_log.read_runs(workdir)[-1]['started_from'] == 'adopted/wide'
  summary = json.loads((workdir / 'train' / 'summary.json').read_text())
  assert f'train.init_from={workdir}/adopted/wide' in summary['overrides']
  assert campaign_model.current_model(workdir) == (workdir / 'train', 'train', 1)
  # A side model (e.g. a transformer from the same GPU run) is evaluated as it is, and the campaign's stays.
  campaign.run(workdir, shared, steps=['evaluate'], model=str(export), **kwargs)
  assert (campaign_log.read_curve(workdir)[-1]['model'], campaign_log.read_curve(workdir)[-1]['checkpoint_step']) == (
    str(export),
    3,
  )
  (adopted_point,) = campaign_log.campaign_points(campaign_log.read_curve(workdir))  # Not the side model's.
  # Its training hours count the device's wall-clock once (the adopt record's wall_seconds are the device's).
  assert (
    adopted_point['model'] == 'adopted/wide'
    and campaign_log.training_hours(adopted_point)
    == round((runs[0]['wall_seconds'] + 420) / 3600, 4)
    == adopted_point['train_wall_hours']
  )
  assert adopted_point['train_device_hours'] == round(420 / 3600, 4)
  assert campaign_model.current_model(workdir) == (workdir / 'train', 'train', 1)
  with pytest.raises(ValueError, match="is a graph model: pretrained-transformer ships the paper's architecture"):
    campaign_ship.ship(
      workdir,
      {**campaign_log.read_curve(workdir)[-1], 'puzzles_solved': 1000, 'puzzles': 1000},
      pathlib.Path(kwargs['puzzles']),
      {},
      strength.Protocol(puzzles=kwargs['puzzles']),
      model_dir=export,
      name='pretrained-transformer',
    )


def test_the_model_card_lists_the_whole_line_of_runs_that_made_the_model(tmp_path):
  """CPU runs, the GPU run adopted from them, the CPU runs since with their rates; an A/B's losing arm left out."""
  workdir = tmp_path / 'campaign'
  gpu = workdir / 'adopted' / 'gpu'
  gpu.mkdir(parents=True)
  experiment = configs.load('pretrained', ['data.train=unused'])
  (gpu / 'train_config.json').write_text(config_lib.to_json(configs.load('graph_tiny', ['data.train=unused'])))
  (gpu / 'train_summary.json').write_text(json.dumps({'step': 300, 'batch_size': 256, 'wall_seconds': 60}))
  (gpu / loading.EXPORT_METADATA).write_text(
    json.dumps({'device': 'NVIDIA H200', 'cpu_cores': 16, 'models': 1, 'seconds': 600})
  )
  cpu = lambda steps, seconds, **rates: {
    'step': 'train',
    'steps': steps,
    'wall_seconds': seconds,
    'core_hours': 1.0,
    **rates,
  }
  runs = [
    cpu(100, 3600),
    cpu(200, 3600),
    {'step': 'evaluate'},
    {'step': 'train', 'model': 'adopted/gpu', 'device': 'NVIDIA H200', 'steps': 300, 'wall_seconds': 600},
    cpu(10, 1800, learning_rate=1e-3, ema_decay=0.99),
    cpu(20, 1800, learning_rate=1e-3, ema_decay=0.999),
    cpu(25, 900, learning_rate=1e-3, ema_decay=0.999, superseded='lr_ab/lr1e-3'),
    cpu(24, 900, learning_rate=3e-4, ema_decay=0.999),
  ]
  assert campaign_card.training_lines(workdir / 'train', experiment, runs) == [
    '- First on 2 CPU cores: 200 steps in resumed runs, 2.0 h of wall-clock, 2.0 core-hours; then, from those '
    'parameters:',
    '- 300 steps of 256 boards on a lent NVIDIA H200 (600 s of wall-clock; 16 CPU cores feeding it), learning rate '
    '0.001, EMA 0.99, float32 compute (the GPU playbook).',
    "- Then, from those parameters (the campaign's `adopted/gpu`): 24 steps of 32 boards, learning rate 0.001 to "
    'step 20, then 0.0003, EMA 0.99 to step 10, then 0.999, on 2 CPU cores in resumed runs: 1.2 h of wall-clock, '
    '3.0 core-hours.',
  ]


def test_a_run_on_cpu_cores_is_adopted_with_its_core_hours_and_grown_models_say_so(tmp_path):
  """An A/B's winning arm (one CPU core, a model grown from the campaign's) adopted: core-hours, no accelerator hours;
  its card line says where it ran and that it was grown."""
  workdir, arm = tmp_path / 'campaign', tmp_path / 'grow_ab' / 'wide8'
  (workdir / 'train' / 'checkpoints' / '500' / loading.PARAMS_EMA).mkdir(parents=True)  # A step's parameters.
  arm.mkdir(parents=True)
  grown = configs.load(
    'pretrained', ['data.train=unused', 'train.init_from=/c/train', 'train.init_grow=True', 'model.widening_factor=8']
  )
  (arm / 'train_config.json').write_text(config_lib.to_json(grown))
  (arm / 'train_summary.json').write_text(json.dumps({'step': 4000, 'batch_size': 32, 'wall_seconds': 2401.5}))
  (arm / 'train_metrics.jsonl').write_text(json.dumps({'step': 4000, 'loss': 3.0, 'targets': 1000}) + '\n')
  (arm / loading.EXPORT_METADATA).write_text(
    json.dumps(
      {'device': campaign_model.CPU, 'cpu_cores': 1, 'models': 2, 'seconds': 2400, 'note': 'the A/B grow_ab/wide8'}
    )
  )
  record = campaign_model.adopt(workdir, arm, 1000)
  assert campaign_model.latest_step(workdir / 'train_until_500') == 500
  assert {k: record[k] for k in ('model', 'device', 'steps', 'wall_seconds', 'core_hours', 'device_hours')} == {
    'model': 'adopted/wide8',
    'device': 'CPU',
    'steps': 4000,
    'wall_seconds': 2400,
    'core_hours': 0.6667,
    'device_hours': 0.0,
  }
  assert campaign_log.totals([record])['train_device_hours'] == 0.0
  cpu = {'step': 'train', 'steps': 500, 'wall_seconds': 3600, 'core_hours': 2.0}
  assert campaign_card.training_lines(workdir / 'adopted' / 'wide8', grown, [cpu, record]) == [
    '- First on 2 CPU cores: 500 steps in resumed runs, 1.0 h of wall-clock, 2.0 core-hours; then, from those '
    'parameters:',
    '- 4,000 steps of 32 boards in a model grown from them (4 layers, MLPs 8 wide; `train.init_grow`: the same '
    'function at its first step) on 1 CPU core (2400 s of wall-clock), learning rate 0.0003, EMA 0.999, float32 '
    'compute. The A/B grow_ab/wide8.',
  ]
  # A chain: CPU runs, a GPU run adopted, CPU runs from it, the grown arm adopted, the campaign's run from it.
  gpu = workdir / 'adopted' / 'gpu'
  gpu.mkdir()
  (gpu / 'train_config.json').write_text(config_lib.to_json(configs.load('pretrained', ['data.train=unused'])))
  (gpu / 'train_summary.json').write_text(json.dumps({'step': 300, 'batch_size': 256, 'wall_seconds': 60}))
  (gpu / loading.EXPORT_METADATA).write_text(
    json.dumps({'device': 'NVIDIA H100', 'cpu_cores': 16, 'models': 1, 'seconds': 460})
  )
  runs = [
    cpu,
    {'step': 'train', 'model': 'adopted/gpu', 'device': 'NVIDIA H100', 'steps': 300, 'wall_seconds': 460},
    {**cpu, 'steps': 700, 'core_hours': 1.0},
    record,
    {**cpu, 'steps': 90, 'wall_seconds': 1800},
  ]
  lines = campaign_card.training_lines(workdir / 'train', configs.load('pretrained', ['data.train=unused']), runs)
  assert lines[1:3] == [
    '- 300 steps of 256 boards on a lent NVIDIA H100 (460 s of wall-clock; 16 CPU cores feeding it), learning rate '
    '0.0003, EMA 0.999, float32 compute (the GPU playbook).',
    "- Then, from those parameters (the campaign's `adopted/gpu`): 700 steps of 32 boards, learning rate 0.0003, EMA "
    '0.999, on 2 CPU cores in resumed runs: 1.0 h of wall-clock, 1.0 core-hours; then, from those parameters:',
  ]
  assert lines[0] == campaign_card.training_lines(workdir / 'adopted' / 'wide8', grown, runs)[0]
  assert lines[3:] == [
    campaign_card.training_lines(workdir / 'adopted' / 'wide8', grown, runs)[-1],
    "- Then, from those parameters (the campaign's `adopted/wide8`): 90 steps of 32 boards, learning "
    'rate 0.0003, EMA 0.999, on 2 CPU cores in resumed runs: 0.5 h of wall-clock, 2.0 core-hours.',
  ]


def test_a_side_model_started_from_a_shipped_one_has_that_models_lines_first(tmp_path, monkeypatch):
  """A GPU run from the shipped transformer (train.init_from its package folder): the card it replaces says how that
  model was made, and its own line says it went on from there."""
  from etils import epath

  monkeypatch.setattr(
    loading,
    'pretrained_dir',
    lambda name='pretrained': epath.Path(tmp_path / 'repo' / 'searchless' / loading.SHIPPED[name]),
  )
  shipped = tmp_path / 'repo' / 'searchless' / 'pretrained_transformer'
  shipped.mkdir(parents=True)
  (shipped / 'MODEL_CARD.md').write_text(
    '# card\n\n## Training\n\n- First, 10 steps on a CPU.\n- Then 20 more.\n\n## Measured strength\n\n- 5 puzzles.\n'
  )
  side = tmp_path / 'run2' / 'packed'
  side.mkdir(parents=True)
  (side / 'train_summary.json').write_text(json.dumps({'step': 300, 'batch_size': 256, 'wall_seconds': 470}))
  (side / loading.EXPORT_METADATA).write_text(
    json.dumps(
      {'device': 'NVIDIA H100', 'cpu_cores': 16, 'models': 2, 'seconds': 460, 'note': 'on boards carried as columns'}
    )
  )
  run = (
    '300 steps of 256 boards on a lent NVIDIA H100 (460 s of wall-clock, 2 models sharing it; 16 CPU cores '
    'feeding it), learning rate 0.001, EMA 0.99, float32 compute (the GPU playbook). On boards '
    'carried as columns.'
  )
  from_shipped = configs.load(
    'tiny_packed', ['data.train=unused', 'train.init_from=/elsewhere/searchless/pretrained_transformer']
  )
  assert campaign_card.training_lines(side, from_shipped, []) == [
    '- First, 10 steps on a CPU.',
    '- Then 20 more.',
    f'- Then, from those parameters (the `pretrained-transformer` they made) with a new optimiser: {run}',
  ]
  # From random parameters, or from a folder that only looks like a shipped model's: its own line alone.
  for init in ('', '/elsewhere/pretrained_transformer'):
    experiment = configs.load('tiny_packed', ['data.train=unused', f'train.init_from={init}'])
    assert campaign_card.training_lines(side, experiment, []) == [f'- {run}']


def test_a_side_model_is_named_by_its_path_with_the_steps_of_its_export_or_its_workdir(tmp_path):
  export, workdir, bare = (tmp_path / name for name in ('export', 'workdir', 'bare'))
  for directory, summary, step in ((export, 'train_summary.json', 19927), (workdir, 'summary.json', 6000)):
    directory.mkdir()
    (directory / summary).write_text(json.dumps({'step': step}))
  bare.mkdir()
  assert [campaign_model.side_model(d) for d in (export, workdir, bare)] == [
    (export, str(export), 19927),
    (workdir, str(workdir), 6000),
    (bare, str(bare), 0),
  ]


@pytest.mark.slow
@pytest.mark.engine
def test_ship_keeps_the_shipped_model_unless_beaten_and_else_exports_measures_and_installs(
  board_bag, stockfish, shared_data, tmp_path, monkeypatch
):
  import shutil
  from etils import epath

  shared = _shared_labels(board_bag, tmp_path)
  workdir, puzzles = tmp_path / 'campaign', _few_puzzles(tmp_path)
  campaign.run(
    workdir,
    shared,
    steps=['train', 'evaluate', 'ship'],
    cpu_training=True,
    config_name='graph_tiny',
    sources=_no_sources(tmp_path),
    start_from='',
    overrides=[*SMALL, 'train.num_steps=2'],
    heldout_boards=5,
    puzzles=str(puzzles),
  )
  ship = [json.loads(line) for line in (workdir / 'runs.jsonl').read_text().splitlines()][-1]
  shipped = json.loads((workdir / 'ship' / 'shipped.json').read_text())['result']
  assert ship['step'] == 'ship' and not ship['shipped_now'] and ship['shipped'] == [shipped['solved'], 10]
  assert not (workdir / 'ship' / '2').exists()  # Not beaten: nothing exported.
  # A candidate that solved everything beats it: exported, measured, carded and installed (into a copy of the
  # shipped model, where the package's would be).
  tree = tmp_path / 'tree' / 'searchless'
  shutil.copytree(str(loading.pretrained_dir('pretrained')), tree / 'pretrained')
  monkeypatch.setattr(loading, 'pretrained_dir', lambda name='pretrained': epath.Path(tree / loading.SHIPPED[name]))
  evaluation = {**campaign_log.read_curve(workdir)[-1], 'puzzles_solved': 1000, 'puzzles': 1000}
  sts = tmp_path / 'sts01_undermine.epd'
  sts.write_text(''.join((shared_data / 'epd' / 'sts01_undermine.epd').read_text().splitlines(True)[:2]))
  protocol = strength.Protocol(
    puzzles=str(puzzles), sts=str(sts), ladder=(1350,), games=2, opponent_limit='nodes=100', workers=1
  )
  done = campaign_ship.ship(
    workdir, evaluation, puzzles, campaign_log.totals(campaign_log.read_runs(workdir)), protocol, install=True
  )
  assert done['shipped_now'] and done['installed'] and done['checkpoint_step'] == 2
  installed = tree / 'pretrained'
  card = (installed / 'MODEL_CARD.md').read_text()
  assert card.startswith('# searchless pretrained model') and '40 distinct train boards' in card
  assert 'Dev puzzles at export: 1000/1000' in card and 'Against stockfish-elo1350' in card
  assert '- sts01_undermine (2 positions)' in card
  model_config, _, experiment = loading.load_model(str(installed))
  assert model_config.kind == 'graph' and model_config.num_layers == 1
  # The shipped config names its data relative to the campaign's folder: no path of this machine.
  assert experiment.data.train == 'boards/train_board_value_data.bag'


@pytest.mark.engine
def test_a_chunk_that_fails_to_label_is_one_error_naming_its_log(stockfish, tmp_path):
  chunk = tmp_path / 'games' / 'bfx3970_000.pgn'
  chunk.parent.mkdir()
  chunk.write_text('')
  (tmp_path / 'logs').mkdir()
  log = tmp_path / 'logs' / 'labels_bfx3970_000.log'
  with pytest.raises(ChildProcessError, match=f'^labelling {chunk} failed \\(exit 2\\): its output is in {log}$'):
    list(campaign_labels.label_chunks([chunk], tmp_path / 'labels', tmp_path, workers=1))
  assert log.read_text().strip() == f'error: no games in {chunk}: nothing to annotate'
  assert not (tmp_path / 'runs.jsonl').exists()


def test_two_campaign_processes_rewrite_the_readme_and_the_plot_at_once(tmp_path):
  """A label job and a training job of one campaign (one core each) rewrite README.md and curve.png after their
  steps: each through a temporary file of its own, so neither fails on the other's rename and no reader sees a part."""
  workdir = tmp_path / 'campaign'
  workdir.mkdir()
  campaign_log.log_run(workdir, {'step': 'labels', 'chunk': 'x_000', 'wall_seconds': 1.0, 'core_hours': 0.0005})
  point = {
    'step': 'evaluate',
    'checkpoint_step': 5,
    'model': 'train',
    'puzzles_solved': 3,
    'puzzles': 10,
    'puzzles_wilson95': [0.1, 0.6],
    'kendall_tau': 0.2,
    'action_accuracy': 0.3,
  }
  (workdir / 'curve.jsonl').write_text(
    json.dumps({**point, **campaign_log.totals(campaign_log.read_runs(workdir))}) + '\n'
  )
  script = (
    'import pathlib, sys\nfrom campaign import log\nw = pathlib.Path(sys.argv[1])\n'
    'for _ in range(int(sys.argv[2])):\n  log.write_readme(w, w, "campaign")\n'
    '  if int(sys.argv[3]): log.plot_curve(w)\n'
  )
  jobs = [
    subprocess.Popen(
      [sys.executable, '-c', script, str(workdir), n, plot], stderr=subprocess.PIPE, text=True, env=_env()
    )
    for n, plot in (('400', '0'), ('400', '0'), ('5', '1'))
  ]
  for job in jobs:
    assert job.wait(timeout=120) == 0, job.stderr.read()
  readme = (workdir / 'README.md').read_text()
  assert readme.startswith('# The strength campaign\n') and readme.endswith('| labels | chunk=x_000 | 1.0 | 0.0005 |\n')
  assert (workdir / 'curve.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
  assert sorted(p.name for p in workdir.iterdir()) == ['README.md', 'curve.jsonl', 'curve.png', 'runs.jsonl']


def _pgn_games(path):
  import chess.pgn

  with open(path) as f:
    return list(iter(lambda: chess.pgn.read_game(f), None))


@pytest.mark.slow
@pytest.mark.engine
def test_the_match_step_plays_stockfish_1350_from_the_named_openings_logs_the_score_and_resumes(
  model_checkpoint, shared_data, stockfish, tmp_path
):
  workdir = tmp_path / 'campaign'
  kwargs = dict(steps=['match'], sources=_no_sources(tmp_path), model=str(model_checkpoint), games=2, workers=1)
  campaign.run(workdir, shared_data.parent, **kwargs)
  match_dir = workdir / 'eval' / model_checkpoint.name / 'match'
  games = _pgn_games(match_dir / 'games.pgn')
  # One opening sampled from the named ones, played with each colour.
  assert sorted((g.headers['White'], g.headers['Black']) for g in games) == [
    ('searchless', 'stockfish-elo1350'),
    ('stockfish-elo1350', 'searchless'),
  ]
  assert [m.uci() for m in games[0].mainline_moves()][:4] == [m.uci() for m in games[1].mainline_moves()][:4]
  first = campaign_log.read_runs(workdir)[-1]
  assert first['opponent'] == 'stockfish:nodes=100000,elo=1350,name=stockfish-elo1350'
  # A random 2-layer model loses both; BayesElo puts it below the anchor.
  assert (first['step'], first['games'], first['wins'], first['draws'], first['losses'], first['score']) == (
    'match',
    2,
    0,
    0,
    2,
    0.0,
  )
  assert first['bayeselo'] < first['bayeselo95'][1] and first['bayeselo95'][0] < first['bayeselo'] < 1350
  assert first['model'] == str(model_checkpoint) and first['core_hours'] > 0
  assert 'matches against Stockfish: ' in (workdir / 'README.md').read_text()
  # A rerun keeps the measured match: nothing is played again.
  campaign.run(workdir, shared_data.parent, **kwargs)
  again = campaign_log.read_runs(workdir)[-1]
  keys = ('games', 'wins', 'draws', 'losses', 'score', 'bayeselo', 'bayeselo95')
  assert {k: again[k] for k in keys} == {k: first[k] for k in keys} and len(_pgn_games(match_dir / 'games.pgn')) == 2
  assert again['wall_seconds'] < first['wall_seconds']
  with pytest.raises(ValueError, match='--games must be >= 1'):
    campaign.run(workdir, shared_data.parent, **{**kwargs, 'games': 0})


def test_the_game_files_it_labels_are_data_it_reads(tmp_path):
  """A sources file names the game files (relative to --shared) and the chunk size: here the 50 sample games."""
  sources = tmp_path / 'sources.json'
  sources.write_text(
    json.dumps({'games_per_chunk': 20, 'sources': [{'name': 'sample', 'path': 'sample_games.pgn', 'shared_labels': 1}]})
  )
  files, per_chunk = campaign_games.read_sources(sources)
  todo = campaign_games.write_games(ROOT / 'searchless' / 'samples', tmp_path / 'games', files, per_chunk)
  # 50 games, 20 a chunk at most: a stride of 3, chunk i holds games i, i + 3, ...; the first is labelled already.
  assert [p.name for p in todo] == ['sample_001.pgn', 'sample_002.pgn']
  assert json.loads((tmp_path / 'games' / 'sample.json').read_text()) == {
    'source': 'sample_games.pgn',
    'chunks': 3,
    'games': 50,
  }
  chunks = [_games(tmp_path / 'games' / f'sample_{i:03d}.pgn') for i in range(3)]
  every = _games(ROOT / 'searchless' / 'samples' / 'sample_games.pgn')
  assert [len(c) for c in chunks] == [17, 17, 16] and chunks[1][0].strip() == every[1].strip()
  sources.write_text(json.dumps({'sources': [{'file': 'x.pgn'}]}))
  with pytest.raises(ValueError, match=f'^{sources}: not a sources file'):
    campaign_games.read_sources(sources)


def test_the_campaigns_config_is_its_own_found_by_name_before_the_packages():
  assert 'campaign_deep6' not in configs.names()  # Not shipped: the wheel holds the product only.
  assert pathlib.Path(campaign.config_file('campaign_deep6')) == ROOT / 'campaign' / 'configs' / 'campaign_deep6.py'
  config = configs.load(campaign.config_file('campaign_deep6'))
  assert (config.model.kind, config.model.num_layers, config.optim.ema_decay) == ('graph', 6, 0.99987)
  assert campaign.config_file('pretrained') == 'pretrained'  # The package's, by name.
  assert campaign.config_file('runs/x/campaign_deep6.py') == 'runs/x/campaign_deep6.py'  # A path, as it is.


def test_installing_a_model_leaves_out_orbaxs_commit_marker_and_it_loads(tmp_path):
  from searchless.model import network
  from searchless.model.config import ModelConfig

  config = configs.load('graph_tiny', [*SMALL, 'data.train=unused'])
  params = network.init_params(ModelConfig.from_config(config))
  export = pathlib.Path(str(loading.export(str(tmp_path / 'export'), params, config)))
  marker = export / loading.PARAMS_EMA / 'commit_success.txt'
  assert str(export) in marker.read_text()  # orbax's marker names the folder it wrote: a path of this machine.
  target = tmp_path / 'tree' / 'pretrained'
  target.mkdir(parents=True)
  (target / 'old.txt').write_text('the model before')
  campaign_ship.install_model(export, target)
  files = lambda root: sorted(p.relative_to(root) for p in root.rglob('*') if p.is_file())  # noqa: E731
  assert files(target) == [f for f in files(export) if f.name != 'commit_success.txt']
  assert loading.load_model(str(target))[0] == ModelConfig.from_config(config)
