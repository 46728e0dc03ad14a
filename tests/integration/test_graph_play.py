"""A trained graph checkpoint: saved and loaded, evaluated, played by the Player and through UCI."""

import json

import chess
import chess.engine
import numpy as np
import pytest

from searchless import configs
from searchless.evaluation import evaluate
from searchless.model import loading
from searchless.play import player as player_lib
from searchless.play import predictor as predictor_lib
from searchless.training import train

from helpers import play_legal_moves, uci_engine

SMALL = [
  'model.embedding_dim=16',
  'model.num_layers=1',
  'model.num_heads=2',
  'model.graph_edge_dim=8',
  'data.batch_size=8',
  'train.num_steps=4',
  'train.log_every=1',
  'train.ckpt_every=4',
  'train.eval_every=2',
  'train.eval_records=16',
]


@pytest.fixture(scope='module')
def graph_run(board_bag, tmp_path_factory):
  workdir = tmp_path_factory.mktemp('graph_run')
  config = configs.load('graph_tiny', SMALL + [f'data.train={board_bag}', f'data.eval={board_bag}'])
  state = train.train(config, workdir)
  return workdir, state


def test_training_logs_the_move_loss_mfu_and_evaluations(graph_run):
  workdir, state = graph_run
  lines = [json.loads(line) for line in (workdir / 'metrics.jsonl').read_text().splitlines()]
  steps = [r for r in lines if 'loss' in r]
  evals = [r for r in lines if 'eval_loss' in r]
  assert [r['step'] for r in steps] == [1, 2, 3, 4] and [r['step'] for r in evals] == [2, 4]
  assert all(r['mfu'] > 0 and r['targets'] > 8 for r in steps)  # Every real move of 8 boards is a target.
  assert steps[0]['loss'] > np.log(128)  # Moves' and the state value's log-losses together, from ~2 ln 128.
  assert evals[-1]['eval_boards'] == 16 and 0 <= evals[-1]['eval_action_accuracy'] <= 1
  assert int(state.step) == 4


def test_checkpoint_round_trip_and_a_config_that_does_not_fit(graph_run):
  workdir, state = graph_run
  model_config, params, experiment = loading.load_model(str(workdir))
  assert (model_config.kind, model_config.graph_edge_dim, experiment.model.kind) == ('graph', 8, 'graph')
  saved = {k: np.asarray(v) for k, v in _flat(params).items()}
  ema = {k: np.asarray(v) for k, v in _flat(state.params_ema).items()}
  assert saved.keys() == ema.keys() and all(np.array_equal(saved[k], ema[k]) for k in saved)
  config_file = workdir / 'checkpoints' / '4' / 'config' / 'config.json'
  text = config_file.read_text()
  config_file.write_text(text.replace('"graph_edge_dim": 8', '"graph_edge_dim": 16'))
  try:
    with pytest.raises(
      ValueError, match=r"do not fit their config: \['gateau_0'\]\['score'\] is \(2, 4\) there, \(2, 8\)"
    ):
      loading.load_model(str(workdir))
  finally:
    config_file.write_text(text)


def _flat(tree):
  return {f'{m}/{n}': v for m, leaves in tree.items() for n, v in leaves.items()}


def test_player_and_evaluation_use_the_packed_predictor(graph_run, board_bag):
  workdir, _ = graph_run
  player = player_lib.Player.load(str(workdir), compute_dtype='float32')
  assert isinstance(player.policy.predictor, predictor_lib.PackedPredictor)
  board = chess.Board('r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1')
  analysis = player.analyse(board)
  assert len(analysis.moves) == 48 and analysis.win_probs.shape == (48,)
  assert player.play(board) == analysis.moves[int(np.argmax(analysis.scores))]
  boards, _, _ = evaluate.load_boards(board_bag, 5)
  results = evaluate.evaluate(player.policy, boards, progress=False)
  assert len(results) == 5 and all({'action_accuracy', 'kendall_tau'} <= set(r['metrics']) for r in results)


def test_a_graph_checkpoint_plays_through_uci(graph_run):
  workdir, _ = graph_run
  with uci_engine(workdir, '--dtype', 'float32') as engine:
    board = play_legal_moves(engine, plies=4, seconds=0.2)
    infos = engine.analyse(board, chess.engine.Limit(depth=1), multipv=3)
    assert len(infos) == 3 and len({info['pv'][0] for info in infos}) == 3
    assert all(info['pv'][0] in board.legal_moves for info in infos)


def test_a_search_agent_runs_over_a_graph_checkpoint(graph_run):
  from searchless.play import agents

  back_rank = '6k1/5ppp/8/8/8/8/5PPP/3R2K1 w - - 0 1'
  workdir, _ = graph_run
  with agents.opened(f'search:{workdir},sims=8,batch=4,name=graph+mcts') as agent:
    assert agent.name == 'graph+mcts' and agent.play(chess.Board(back_rank)).uci() == 'd1d8'
    assert int(agent.last.visits.sum()) == 8
