"""Board packing: one sequence per board, in training and play: the tests that build, train or play models (slow).

The fast ones, and the helpers both use, are in tests/unit/test_packing.py.
"""

import dataclasses
import json
import os
import subprocess
import sys

import chess
import jax
import numpy as np
import pytest

from searchless.core import bags
from searchless import configs
from searchless.core import moves as moves_lib
from searchless.core import records
from searchless.core import tokenizer
from searchless.core import values
from searchless.data import boards as boards_lib
from searchless.data import packing
from searchless.data import sequences as sequences_lib
from searchless.model import network
from searchless.model.config import ModelConfig
from searchless.play import policy as policy_lib
from searchless.training import step as step_lib
from searchless.training import train

from unit.test_packing import (
  MIDDLEGAME,
  ONE_MOVE,
  SMALL,
  TINY_PACKED,
  _convert,
  _packed_config,
)
from unit import test_packing as unit_tests

packed_checkpoint = unit_tests.packed_checkpoint  # A fixture of the fast tests.
small_model = unit_tests.small_model  # A fixture of the fast tests.


MOST_MOVES = 'R6R/3Q4/1Q4Q1/4Q3/2Q4Q/Q4Q2/pp1Q4/kBNN1KB1 w - - 0 1'  # 218 legal moves, the most known.


@pytest.mark.slow
def test_converter_takes_state_values_and_rejects_incomplete_boards(tmp_path, compat):
  av = bags.read_records(str(compat / 'action_value_sample.bag'), 'action_value')
  fens = list(dict.fromkeys(r.fen for r in av))
  shuffled = av[1::2] + av[::2]  # Records of one board far apart.
  bags.write_records(str(tmp_path / 'av.bag'), 'action_value', shuffled)
  bags.write_records(str(tmp_path / 'sv.bag'), 'state_value', [(fen, 0.125) for fen in fens])
  summary = _convert(tmp_path / 'av.bag', tmp_path / 'ok', '--to', 'board', '--state_values', tmp_path / 'sv.bag')
  boards = bags.read_records(str(tmp_path / 'ok' / 'board_value_data.bag'), 'board_value')
  assert summary['bad_boards'] == 0 and len(boards) == 57 and {b.state_value for b in boards} == {0.125}

  missing = [
    r for r in av if not (r.fen == fens[3] and r.move == min(m.uci() for m in chess.Board(fens[3]).legal_moves))
  ]
  bags.write_records(str(tmp_path / 'bad.bag'), 'action_value', missing)
  with pytest.raises(
    ValueError,
    match=r"1 board\(s\) of .*bad.bag' have moves that are not exactly their legal moves"
    rf" \(first: '{fens[3]}': missing [a-h][1-8][a-h][1-8]\)",
  ):
    _convert(tmp_path / 'bad.bag', tmp_path / 'bad', '--to', 'board')
  assert not (tmp_path / 'bad' / 'board_value_data.bag').exists()
  assert len((tmp_path / 'bad' / 'bad_boards.jsonl').read_text().splitlines()) == 1
  skipped = _convert(tmp_path / 'bad.bag', tmp_path / 'skip', '--to', 'board', '--skip_bad_boards')
  assert skipped['bad_boards'] == 1 and skipped['outputs']['board_value']['records'] == 56


@pytest.mark.slow
def test_converter_cli_errors_are_one_line(tmp_path, compat):
  run = lambda *argv: subprocess.run(
    [sys.executable, '-m', 'searchless.pipelines.convert', *map(str, argv)], capture_output=True, text=True, timeout=300
  )
  wrong = run(compat / 'state_value_sample.bag', tmp_path / 'x', '--to', 'board')
  assert wrong.returncode == 2
  assert (
    wrong.stderr.strip()
    .splitlines()[-1]
    .startswith("error: policy 'action_value' needs action_value records, but record 0 of")
  )
  assert 'is a state_value record' in wrong.stderr
  missing = run(tmp_path / 'nothing.bag', tmp_path / 'x', '--to', 'chessbench')
  assert missing.returncode == 2 and missing.stderr.strip().splitlines()[-1].startswith('error: cannot open bag')


def _row(fen, actions, slots):
  return np.concatenate([tokenizer.tokenize(fen), actions, [-1] * (slots - len(actions))]).astype(np.int32)


@pytest.mark.parametrize('fen', [MIDDLEGAME, MOST_MOVES, ONE_MOVE])
@pytest.mark.slow
def test_packed_logits_equal_each_move_alone(small_model, fen):
  config, params = small_model
  packed = jax.jit(network.build(dataclasses.replace(config, packing='board')).apply)
  actions = [moves_lib.MOVE_TO_ACTION[m.uci()] for m in chess.Board(fen).legal_moves]
  assert len(actions) in (43, 218, 1)
  slots = max(16, -(-len(actions) // 16) * 16 + 16)  # Always some padded slots.
  other = _row(MIDDLEGAME, [moves_lib.MOVE_TO_ACTION['e1g1']], slots)  # A second board in the batch.
  together = packed(params, None, np.stack([_row(fen, actions, slots), other]))  # [2, M, V]
  alone = np.stack([packed(params, None, _row(fen, [a], 1)[None])[0, 0] for a in actions])  # [m, V]
  np.testing.assert_allclose(together[0, : len(actions)], alone, atol=2e-5)
  np.testing.assert_allclose(np.exp(together).sum(-1), 1.0, atol=1e-5)
  assert together.shape == (2, slots, 128)


@pytest.mark.slow
def test_one_block_packed_model_is_the_per_move_model(small_model):
  """With one block nothing the board computes depends on the move: both models agree."""
  config, params = small_model
  config = dataclasses.replace(config, num_layers=1)
  params = network.init_params(config)
  actions = [moves_lib.MOVE_TO_ACTION[m.uci()] for m in chess.Board(MIDDLEGAME).legal_moves]
  packed_config = dataclasses.replace(config, packing='board')
  packed = jax.jit(network.build(packed_config).apply)(params, None, _row(MIDDLEGAME, actions, 48)[None])
  sequences = np.stack([np.concatenate([tokenizer.tokenize(MIDDLEGAME), [a, 0]]) for a in actions]).astype(np.int32)
  per_move = jax.jit(network.build(config, last_only=True).apply)(params, None, sequences)
  np.testing.assert_allclose(packed[0, : len(actions)], per_move, atol=1e-5)


@pytest.mark.slow
def test_packed_variants(small_model):
  config, params = small_model
  actions = [moves_lib.MOVE_TO_ACTION[m.uci()] for m in chess.Board(MIDDLEGAME).legal_moves]
  row = _row(MIDDLEGAME, actions, 48)
  # Jitted: op by op, each call took seconds.
  moves_view = jax.jit(network.build(dataclasses.replace(config, packing='board', move_attention='moves')).apply)
  joint = jax.jit(network.build(dataclasses.replace(config, packing='board', joint_layers=1)).apply)
  plain_apply = jax.jit(network.build(dataclasses.replace(config, packing='board')).apply)
  plain = plain_apply(params, None, row[None])
  # One real move: seeing every real move is seeing itself, so the masked attention of the
  # 'moves' variant and the default's mask-free board-and-self attention must agree.
  lone = _row(MIDDLEGAME, actions[:1], 16)[None]
  np.testing.assert_allclose(moves_view(params, None, lone)[0, 0], plain_apply(params, None, lone)[0, 0], atol=2e-5)
  for apply in (moves_view, joint):
    out = apply(params, None, row[None])
    assert np.abs(out - plain)[0, : len(actions)].max() > 1e-3  # The moves now see each other.
    # Padded slots change nothing: same output with fewer of them.
    np.testing.assert_allclose(apply(params, None, _row(MIDDLEGAME, actions, 43)[None])[0], out[0, :43], atol=2e-5)
  with pytest.raises(ValueError, match='joint_layers must be in'):
    dataclasses.replace(config, packing='board', joint_layers=3)
  with pytest.raises(ValueError, match='packing must be one of'):
    dataclasses.replace(config, packing='row')


@pytest.mark.parametrize('loss', ['log_loss', 'hl_gauss'])
@pytest.mark.slow
def test_packed_loss_is_the_per_move_loss_over_the_real_moves(board_bag, loss):
  """One block: the packed model's outputs are the per-move model's, so the losses agree exactly."""
  one_block = ['model.num_layers=1', f'loss.kind={loss}', 'data.train=unused']
  packed_config = configs.load(TINY_PACKED, SMALL + one_block)
  per_move_config = configs.load('tiny', SMALL + one_block)
  params = network.init_params(ModelConfig.from_config(per_move_config))
  boards = bags.read_records(board_bag, 'board_value')[:5]  # 5 boards, 24-45 moves each, 64 slots.
  edges, _ = values.uniform_buckets(128)
  rows = packing.packed_rows(boards, 64, edges)  # [5, 77 + 128]
  raw = [records.encode('action_value', av) for b in boards for av in boards_lib.to_chessbench(b)['action_value']]
  sequences = sequences_lib.to_sequences('action_value', raw, 128)  # [sum M, 79]
  # Each loss compiled as one program (op by op, every operation compiled a kernel of its own: seconds).
  packed_fn = jax.jit(step_lib.make_loss_fn(network.build(ModelConfig.from_config(packed_config)).apply, packed_config))
  per_move_fn = jax.jit(
    step_lib.make_loss_fn(network.build(ModelConfig.from_config(per_move_config)).apply, per_move_config)
  )
  (packed_loss, packed_count), (per_move_loss, per_move_count) = packed_fn(params, rows), per_move_fn(params, sequences)
  assert int(packed_count) == int(per_move_count) == len(raw) == sum(len(b.moves) for b in boards)
  assert float(packed_loss) == pytest.approx(float(per_move_loss), rel=1e-5)


@pytest.mark.slow
def test_packed_training_on_eight_cpu_devices_matches_one(tmp_path, board_bag):
  def run(name, *extra, env=None):
    cmd = [
      sys.executable,
      '-m',
      'searchless.commands.train',
      '--config',
      TINY_PACKED,
      '--workdir',
      str(tmp_path / name),
      '--data',
      board_bag,
      *SMALL,
      'train.num_steps=4',
      *extra,
    ]
    result = subprocess.run(cmd, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return [json.loads(l) for l in (tmp_path / name / 'metrics.jsonl').read_text().splitlines()]

  one = run('one')
  eight = run('eight', 'train.fsdp=2', env={'XLA_FLAGS': '--xla_force_host_platform_device_count=8'})
  np.testing.assert_allclose([r['loss'] for r in eight], [r['loss'] for r in one], rtol=2e-5)
  assert {r['devices'] for r in eight} == {8} and [r['targets'] for r in eight] == [r['targets'] for r in one]


@pytest.mark.slow
def test_packed_training_learns_and_evaluates_every_move(tmp_path, board_bag):
  config = _packed_config(
    board_bag,
    'train.num_steps=60',
    'optim.learning_rate=3e-3',
    'train.log_every=20',
    'data.num_records=8',
    f'data.eval={board_bag}',
    'train.eval_every=60',
  )
  train.train(config, tmp_path)
  log = [json.loads(l) for l in (tmp_path / 'metrics.jsonl').read_text().splitlines()]
  losses = [r['loss'] for r in log if 'loss' in r]
  assert losses[0] > 3.0 and losses[-1] < 1.5 and losses == sorted(losses, reverse=True)
  train_boards = bags.read_records(board_bag, 'board_value')
  moves_per_step = sum(len(b.moves) for b in train_boards[:8])  # The 8 boards, every step.
  ratios = [r['targets_per_s'] / r['examples_per_s'] * 8 for r in log if 'loss' in r]
  assert ratios == pytest.approx([moves_per_step] * 3, rel=1e-6) and moves_per_step == 221
  evaluation = [r for r in log if 'eval_loss' in r][-1]
  assert evaluation['eval_boards'] == 57 and 0 < evaluation['eval_loss'] < 6
  assert evaluation['eval_action_accuracy'] * 57 == round(evaluation['eval_action_accuracy'] * 57)


@pytest.mark.slow
def test_packed_policy_scores_a_board_in_one_pass_like_its_moves_alone(packed_checkpoint):
  from searchless.model import loading
  from searchless.play import player as player_lib

  player = player_lib.Player.load(str(packed_checkpoint), compute_dtype='float32')
  assert isinstance(player.policy, policy_lib.PackedActionValuePolicy)
  boards = [chess.Board(MIDDLEGAME), chess.Board(MOST_MOVES), chess.Board(ONE_MOVE), chess.Board()]
  before = player.policy.predictor.rows_run
  together = player.policy.analyse_many(boards)
  assert player.policy.predictor.rows_run - before == 4  # One row each: 48, 256, 16 and 32 move slots.
  player.policy.analyse_many([chess.Board()] * 3)
  assert player.policy.predictor.rows_run - before == 4 + 4  # 3 boards of 32 slots: one call of 4 rows.
  model_config, params, _ = loading.load_model(str(packed_checkpoint))
  apply = jax.jit(network.build(model_config).apply)
  for board, analysis in zip(boards, together):
    legal = policy_lib.ordered_legal_moves(board)
    assert analysis.moves == tuple(legal)
    alone = np.stack(
      [apply(params, None, _row(board.fen(), [moves_lib.MOVE_TO_ACTION[m.uci()]], 1)[None])[0, 0] for m in legal]
    )
    np.testing.assert_allclose(analysis.log_probs, alone, atol=2e-5)
    assert player.play(board) in legal
  with pytest.raises(ValueError, match='was trained for the action_value policy; the state_value policy'):
    player_lib.Player.load(str(packed_checkpoint), policy='state_value')


@pytest.mark.slow
def test_packed_checkpoint_through_evaluate_and_agents(packed_checkpoint, compat, tmp_path, board_bag):
  from searchless.evaluation import evaluate
  from searchless.play import agents

  summary = evaluate.run(
    str(packed_checkpoint),
    str(compat / 'action_value_sample.bag'),
    str(tmp_path / 'av'),
    dtype='float32',
    progress=False,
  )
  assert summary['boards'] == 57 and summary['policy'] == 'action_value' and 0 <= summary['action_accuracy'] <= 1
  on_boards = evaluate.run(str(packed_checkpoint), board_bag, str(tmp_path / 'boards'), dtype='float32', progress=False)
  for key in ('boards', 'dropped_boards', 'action_accuracy', 'kendall_tau', 'log_loss', 'l2_win_prob'):
    assert on_boards[key] == pytest.approx(summary[key], rel=1e-9), key  # The same boards either way.
  agent = agents.from_spec(f'checkpoint:{packed_checkpoint}')
  try:
    assert agent.play(chess.Board(MIDDLEGAME)) in chess.Board(MIDDLEGAME).legal_moves
  finally:
    agent.close()
