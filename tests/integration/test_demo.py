"""The main job end to end at a miniature size: every artefact exists and agrees; a rerun continues."""

import csv
import json
import pathlib

import chess.pgn
import pytest

from searchless.commands import demo
from searchless.core import bags
from searchless.data import pgn
from searchless.model import loading

from helpers import SAMPLE_GAMES


def mini_args(games: list[pathlib.Path], run_dir: pathlib.Path) -> list[str]:
  return [
    '--input',
    *map(str, games),
    '--run_dir',
    str(run_dir),
    '--no_progress',
    '--workers',
    '1',
    '--annotate_args',
    '--mode multipv --limit nodes=5000 --state_value best_move --no_progress',
    '--train_args',
    (
      'train.num_steps=4 data.batch_size=16 model.embedding_dim=16 model.num_layers=1 '
      'model.num_heads=2 train.eval_every=2 train.log_every=1 train.ckpt_every=2 '
      'train.eval_records=500'
    ),
    '--puzzles',
    '',
    '--mine_limit',
    'nodes=1000',
    '--max_puzzles',
    '4',  # Mined from the test games.
    '--match_opponent',
    'stockfish:nodes=50,name=sf50',
    '--match_games',
    '2',
    '--match_max_plies',
    '16',
  ]


@pytest.mark.engine
def test_the_whole_job_at_a_miniature_size(tmp_path, stockfish, capsys):
  texts = [g.text.strip() for g in pgn.iter_raw_games(str(SAMPLE_GAMES))][:3]
  games = [tmp_path / 'a.pgn', tmp_path / 'b.pgn']  # Two inputs; with the default split 1 test game, 2 train.
  games[0].write_text('\n\n'.join(texts[:2]) + '\n')
  games[1].write_text(texts[2] + '\n')
  run_dir = tmp_path / 'run'
  report = demo.run(mini_args(games, run_dir))
  out = capsys.readouterr().out

  # 1. Data: the manifest's counts are the records in the bags.
  manifest = json.loads((run_dir / 'data' / 'manifest.json').read_text())
  assert manifest['games']['kept'] == 3
  for split in ('train', 'test'):
    av = bags.read_records(bags.find(str(run_dir / 'data' / split), 'action_value'), 'action_value')
    assert len(av) == manifest['splits'][split]['action_values'] > 0
  # 2. Training: 4 steps, the checkpoint loads, metrics logged.
  steps = [json.loads(line) for line in (run_dir / 'train' / 'metrics.jsonl').read_text().splitlines()]
  assert max(r['step'] for r in steps) == 4 and any('eval_loss' in r for r in steps)
  model_config, _, experiment = loading.load_model(str(run_dir / 'train'))
  assert model_config.embedding_dim == 16 and experiment.train.num_steps == 4
  # 3. Evaluation over the test split's complete boards.
  metrics = json.loads((run_dir / 'eval' / 'metrics.json').read_text())
  test_boards = manifest['splits']['test']['boards'] - manifest['splits']['test'].get('terminal', 0)
  assert metrics['boards'] + metrics['dropped_boards'] == test_boards
  assert len((run_dir / 'eval' / 'boards.jsonl').read_text().splitlines()) == metrics['boards']
  # 4-5. Puzzles mined from the test game, then solved.
  with open(run_dir / 'puzzles' / 'puzzles.csv') as f:
    mined = list(csv.DictReader(f))
  summary = json.loads((run_dir / 'puzzles' / 'summary.json').read_text())
  assert 0 < len(mined) <= 4 and summary['n'] == len(mined)
  assert f'accuracy: {summary["accuracy"]:.4f} ({summary["solved"]}/{summary["n"]})' in out
  # 6. The match: 2 games in the PGN and in the results.
  with open(run_dir / 'match' / 'games.pgn') as f:
    played = [g for g in iter(lambda: chess.pgn.read_game(f), None)]
  # Every pair of the fresh model, the pretrained one and Stockfish: 3 pairs of 2 games.
  assert len(played) == 6 and {g.headers['White'] for g in played} == {'searchless', 'pretrained', 'sf50'}
  results = json.loads((run_dir / 'match' / 'results.json').read_text())
  assert results['games'] == 6 and sum(s['points'] for s in results['scores'].values()) == 6.0
  assert [p['games'] for p in results['pairs']] == [2, 2, 2]
  # 3 and 5 for the pretrained model: the same test boards and puzzles.
  pretrained = json.loads((run_dir / 'eval_pretrained' / 'metrics.json').read_text())
  assert (pretrained['boards'], pretrained['dropped_boards']) == (metrics['boards'], metrics['dropped_boards'])
  assert json.loads((run_dir / 'puzzles_pretrained' / 'summary.json').read_text())['n'] == len(mined)
  # 7. The report and how to play.
  assert report == run_dir / 'report' / 'report.html' and report.exists()
  markdown = (run_dir / 'report' / 'report.md').read_text()
  assert '## Beside the pretrained model' in markdown and '| this run | pretrained |' in markdown
  assert f'searchless-uci --checkpoint {run_dir / "train"}' in out
  recorded = json.loads((run_dir / 'commands.json').read_text())
  assert list(recorded) == [
    'annotate',
    'train',
    'evaluate',
    'evaluate_pretrained',
    'mine',
    'puzzles',
    'puzzles_pretrained',
    'match',
    'analyse_game',
    'report',
  ]
  assert recorded['evaluate'] in out  # The command announced is the command kept.

  # A rerun continues: nothing is redone.
  before = (run_dir / 'train' / 'metrics.jsonl').read_text(), (run_dir / 'match' / 'games.pgn').read_text()
  demo.run(mini_args(games, run_dir))
  out = capsys.readouterr().out
  assert out.count('done already') == 9  # annotate, train, evaluate (x2), mine, puzzles (x2), match, analyse_game.
  assert ((run_dir / 'train' / 'metrics.jsonl').read_text(), (run_dir / 'match' / 'games.pgn').read_text()) == before


def test_unknown_preset_is_an_error(tmp_path):
  with pytest.raises(FileNotFoundError, match="no config named 'huge'"):
    demo.run(['--input', 'x.pgn', '--run_dir', str(tmp_path), '--config', 'huge'])


def test_no_progress_is_passed_on_to_the_steps_that_draw_progress(tmp_path):
  run_dir = tmp_path / 'run'
  (run_dir / 'data').mkdir(parents=True)
  (run_dir / 'data' / 'manifest.json').write_text('{}')  # Steps whose output exists are skipped: only recorded.
  (run_dir / 'train').mkdir()
  from searchless.core import artefacts

  artefacts.TrainingSummary(
    step=1,
    num_steps=1,
    complete=True,
    num_params=1,
    num_return_buckets=128,
    policy='action_value',
    batch_size=1,
    overrides=[],
    wall_seconds=0.0,
  ).write(run_dir / 'train' / artefacts.TrainingSummary.FILE)
  demo.run(['--input', str(SAMPLE_GAMES), '--run_dir', str(run_dir), '--no_progress', '--steps', 'annotate', 'train'])
  commands = json.loads((run_dir / 'commands.json').read_text())
  assert sorted(commands) == ['annotate', 'train']
  assert all('--no_progress' in command.split() for command in commands.values()), commands
