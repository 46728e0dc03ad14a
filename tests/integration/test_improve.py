"""The self-improvement loop: self-play targets, fine-tuning from a checkpoint, and resuming after a kill."""

import json
import signal
import subprocess
import sys
import time

import chess
import numpy as np
import pytest

from searchless.core import bags
from searchless import configs
from searchless.model import loading
from searchless.training import improve
from searchless.training import train

from helpers import write_checkpoint

SMALL = [
  '--games',
  '3',
  '--sims',
  '4',
  '--min_visits',
  '1',
  '--max_plies',
  '12',
  '--steps',
  '3',
  '--batch_size',
  '8',
  '--match_games',
  '0',
  '--sample_plies',
  '4',
  '--opening_plies',
  '2',
  '--iterations',
  '2',
  '--no_progress',
]


@pytest.fixture(scope='module')
def start(tmp_path_factory):
  return str(write_checkpoint(tmp_path_factory.mktemp('start')))


def _cli(workdir, start, *extra):
  cmd = [
    sys.executable,
    '-m',
    'searchless.commands.improve',
    '--checkpoint',
    start,
    '--workdir',
    str(workdir),
    *SMALL,
    *extra,
  ]
  return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_the_loop_resumes_after_a_kill_and_keeps_its_games(tmp_path, start):
  games = tmp_path / 'run' / 'iteration_001' / improve.GAMES_FILE
  proc = _cli(tmp_path / 'run', start)
  deadline = time.monotonic() + 300
  while (not games.exists() or games.read_text().count('\n') < 1) and time.monotonic() < deadline:
    time.sleep(0.05)
  proc.send_signal(signal.SIGKILL)  # Mid self-play: one or two games written, maybe half a line.
  proc.wait()
  with open(games, 'a') as f:
    f.write('{"game": 9, "cut')  # What a kill in the middle of a write leaves.
  first = games.read_text().splitlines()[0]
  proc = _cli(tmp_path / 'run', start)
  out, err = proc.communicate(timeout=600)
  assert proc.returncode == 0, err[-3000:]
  lines = games.read_text().splitlines()
  assert lines[0] == first and [json.loads(line)['game'] for line in lines] == [0, 1, 2]
  summary = json.loads((tmp_path / 'run' / improve.SUMMARY_FILE).read_text())
  assert [e['iteration'] for e in summary['iterations']] == [1, 2]
  for entry in summary['iterations']:
    assert entry['games'] == 3 and sum(entry['results'].values()) == 3
    # The start is a per-move action-value model: one record per legal move of each searched board.
    records = list(
      bags.read_records(
        str(tmp_path / 'run' / f'iteration_{entry["iteration"]:03d}' / improve.BOARDS_FILE), 'action_value'
      )
    )
    first = chess.Board(records[0].fen)
    games = [
      json.loads(line)
      for line in (tmp_path / 'run' / f'iteration_{entry["iteration"]:03d}' / improve.GAMES_FILE)
      .read_text()
      .splitlines()
    ]
    target = next(t for g in games for t in g['boards'] if t['fen'] == records[0].fen)
    visited = [m for m, v in zip(target['moves'], target['visits']) if v >= 1]
    assert [r.move for r in records if r.fen == records[0].fen] == visited  # The searched moves only.
    assert set(visited) <= {m.uci() for m in first.legal_moves}
    assert len({r.fen for r in records}) <= entry['boards'] and records
    assert all(0 <= r.win_prob <= 1 for r in records)
  # Iteration 2 started from iteration 1's model, which moved away from the start.
  tuned = loading.load_params(summary['iterations'][0]['model'])
  initial = loading.load_params(start)
  assert any(not np.array_equal(a, b) for a, b in zip(_leaves(tuned), _leaves(initial)))
  # A third run has nothing left to do and says so in the same summary.
  again = _cli(tmp_path / 'run', start)
  again.communicate(timeout=600)
  assert again.returncode == 0
  assert json.loads((tmp_path / 'run' / improve.SUMMARY_FILE).read_text())['iterations'] == summary['iterations']


def _leaves(tree):
  import jax

  return [np.asarray(x) for x in jax.tree.leaves(tree)]


def test_a_workdir_of_another_start_is_refused(tmp_path, start):
  (tmp_path / improve.SUMMARY_FILE).write_text(json.dumps({'start': '/elsewhere', 'iterations': []}))
  result = subprocess.run(
    [
      sys.executable,
      '-m',
      'searchless.commands.improve',
      '--checkpoint',
      start,
      '--workdir',
      str(tmp_path),
      '--no_progress',
    ],
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert result.returncode != 0
  assert f"continues a run from '/elsewhere', not {start!r}; use a new --workdir" in result.stderr
  with pytest.raises(ValueError, match='games must be >= 1, got 0'):
    improve.ImproveConfig(games=0)


def test_targets_are_the_search_values_of_the_moves_it_searched(start):
  from searchless.play import player
  from searchless.play.search import agent as search_agent

  policy = player.load_policy(start, compute_dtype='float32')
  board = chess.Board()
  board.push_san('e4')
  result = search_agent.agent_for(policy, 'mcts', simulations=30).search(board)
  targets = improve.board_targets(board, result)
  model = policy.analyse(board)
  assert targets['fen'] == board.fen() and targets['moves'] == [m.uci() for m in model.moves]
  assert targets['visits'] == [int(v) for v in result.visits] and sum(targets['visits']) == 30
  for i, target in enumerate(targets['win_probs']):
    expected = (result.q[i] + 1) / 2 if result.visits[i] else model.win_probs[i]
    assert target == pytest.approx(expected, abs=1e-6)
  assert targets['value'] == pytest.approx(result.win_probability) and targets['best'] == result.move.uci()
  searched = [m for m, v in zip(targets['moves'], targets['visits']) if v >= 2]
  assert 0 < len(searched) < len(targets['moves'])
  per_move = improve.training_records('action_value', [targets], min_visits=2)
  assert [r.move for r in per_move] == searched  # Unsearched moves get no target.
  assert [r.win_prob for r in per_move] == [p for p, v in zip(targets['win_probs'], targets['visits']) if v >= 2]
  [board_record] = improve.training_records('board_value', [targets], min_visits=2)
  assert board_record.state_value == targets['value'] and sorted(board_record.moves) == sorted(searched)
  assert improve.training_records('behavioral_cloning', [targets])[0].move == result.move.uci()
  assert improve.training_records('state_value', [targets])[0].win_prob == targets['value']


def test_a_game_opens_randomly_then_searches_every_board(start):
  import random
  from searchless.play import player
  from searchless.play.search import agent as search_agent

  agent = search_agent.agent_for(player.load_policy(start, compute_dtype='float32'), 'mcts', simulations=4)
  targets, result, moves = improve.play_game(
    agent, random.Random(0), improve.ImproveConfig(max_plies=6, opening_plies=2)
  )
  assert len(moves) == 6 and result == '1/2-1/2' and len(targets) == 4  # Two random plies, then four searched.
  board = chess.Board()
  for uci, target in zip(moves, [None, None, *targets]):
    if target is not None:
      assert target['fen'] == board.fen()
    board.push_uci(uci)
  again = improve.play_game(agent, random.Random(0), improve.ImproveConfig(max_plies=6, opening_plies=2))
  assert again[2][:2] == moves[:2]  # The opening comes from the game's own random stream.


@pytest.mark.slow
def test_init_from_starts_training_from_a_checkpoint(tmp_path, compat):
  start = write_checkpoint(tmp_path / 'start', seed=5)
  small = [
    'model.embedding_dim=32',
    'model.num_layers=2',
    'model.num_heads=2',
    'data.batch_size=8',
    'train.num_steps=1',
    'train.ckpt_every=1',
    'train.log_every=1',
    'train.compute_dtype=float32',
    f'data.train={compat / "action_value_sample.bag"}',
    'optim.learning_rate=1e-12',
  ]
  state = train.train(configs.load('tiny', [*small, f'train.init_from={start}']), tmp_path / 'tuned')
  for a, b in zip(_leaves(state.params), _leaves(loading.load_params(str(start)))):
    np.testing.assert_allclose(a, b, atol=1e-6)
  fresh = train.train(configs.load('tiny', small), tmp_path / 'fresh')
  assert any(not np.allclose(a, b, atol=1e-3) for a, b in zip(_leaves(fresh.params), _leaves(state.params)))
  with pytest.raises(
    ValueError,
    match=r"does not fit this config's model: \['embed'\]\['embeddings'\] is "
    r'\(1968, 32\) there, \(1968, 16\) here',
  ):
    train.train(
      configs.load('tiny', [*small, 'model.embedding_dim=16', f'train.init_from={start}']), tmp_path / 'misfit'
    )
