"""Transformer priors through training and every consumer of a checkpoint: per-move steps, Player, UCI,
evaluation, puzzles, search and export."""

import json

import chess
import jax
import numpy as np
import pytest

from searchless import configs
from searchless.evaluation import evaluate
from searchless.evaluation import puzzles
from searchless.model import export
from searchless.model import loading
from searchless.model import network
from searchless.model.config import ModelConfig
from searchless.play import player as player_lib
from searchless.training import train

from helpers import play_legal_moves, uci_engine

SMALL = [
  'model.embedding_dim=16',
  'model.num_layers=2',
  'model.num_heads=2',
  'data.batch_size=8',
  'train.num_steps=3',
  'train.log_every=1',
  'train.ckpt_every=3',
  'train.eval_every=1000',
  'train.compute_dtype=float32',
]
OPTIONS = {
  'mover_view': ['model.mover_view=True'],
  'tied': ['model.move_squares=tied'],
  'untied': ['model.move_squares=untied'],
  'relative': ['model.square_bias=relative'],
  'open_lines': ['model.square_bias=open_lines'],
  'smolgen': ['model.smolgen=4'],
  'gather': ['model.move_gather=True'],
}
SETS = {
  'mover_view': ('mover_view', True),
  'tied': ('move_squares', 'tied'),
  'untied': ('move_squares', 'untied'),
  'relative': ('square_bias', 'relative'),
  'open_lines': ('square_bias', 'open_lines'),
  'smolgen': ('smolgen', 4),
  'gather': ('move_gather', True),
}


# Options that fit together train in one run; the alternatives (untied squares, open-line biases) in a second,
# for action values (the attention's biases do not depend on the head: the other policies train the first group).
GROUPS = {
  'action_value': [('mover_view', 'tied', 'relative', 'smolgen', 'gather'), ('untied', 'open_lines')],
  'behavioral_cloning': [('mover_view', 'relative', 'smolgen')],
  'state_value': [('mover_view', 'relative', 'smolgen')],
}
OWNED = {
  'tied': ('move_promotion', 'embeddings'),
  'untied': ('move_from_square', 'embeddings'),
  'relative': ('multi_head_dot_product_attention', 'square_bias'),
  'open_lines': ('multi_head_dot_product_attention', 'open_line_bias'),
  'smolgen': ('smolgen_generator', 'w'),
  'gather': ('move_gather', 'w'),
}


@pytest.mark.parametrize('policy', ['behavioral_cloning', 'state_value'])
@pytest.mark.parametrize('option', ['tied', 'untied', 'gather'])
def test_options_that_read_the_move_token_need_action_values(policy, option):
  what = 'move_gather reads' if option == 'gather' else 'move_squares embeds'
  with pytest.raises(ValueError, match=f"{what} the input's move token: it needs policy action_value, not '{policy}'"):
    ModelConfig.from_config(configs.load('tiny', SMALL + OPTIONS[option] + [f'policy={policy}']))


@pytest.mark.parametrize(
  'policy, group', [(policy, i) for policy in sorted(GROUPS) for i in range(len(GROUPS[policy]))]
)
def test_the_per_move_model_trains_a_step_with_each_prior(tmp_path, compat, policy, group):
  options = GROUPS[policy][group]
  config = configs.load(
    'tiny',
    SMALL
    + [o for option in options for o in OPTIONS[option]]
    + [f'policy={policy}', f'data.train={compat / f"{policy}_sample.bag"}', 'train.num_steps=1'],
  )
  state = train.train(config, tmp_path)
  lines = [json.loads(line) for line in (tmp_path / 'metrics.jsonl').read_text().splitlines()]
  assert int(state.step) == 1 and np.isfinite(lines[0]['loss'])
  model_config, params, _ = loading.load_model(str(tmp_path))
  assert [getattr(model_config, SETS[o][0]) for o in options] == [SETS[o][1] for o in options]
  initial = network.init_params(model_config)
  for option in set(options) - {'mover_view'}:  # Parameters each option owns moved in the step.
    name, leaf = OWNED[option]
    assert np.abs(np.asarray(params[name][leaf]) - np.asarray(initial[name][leaf])).max() > 0, option
  assert model_config.mover_view == ('mover_view' in options)


@pytest.fixture(scope='module')
def priors_run(board_bag, tmp_path_factory):
  workdir = tmp_path_factory.mktemp('priors_run')
  config = configs.load('tiny_packed_priors', SMALL + ['model.smolgen=4', f'data.train={board_bag}'])  # All 5 priors.
  train.train(config, workdir)
  return workdir


def test_the_checkpoint_keeps_its_priors(priors_run):
  model_config, params, experiment = loading.load_model(str(priors_run))
  assert (
    model_config.mover_view,
    model_config.move_squares,
    model_config.square_bias,
    model_config.smolgen,
    model_config.move_gather,
  ) == (True, 'tied', 'relative', 4, True)
  assert experiment.model.square_bias == 'relative' and 'move_promotion' in params and 'move_gather' in params


def test_player_evaluation_puzzles_and_search_use_them(priors_run, board_bag, shared_data, tmp_path):
  player = player_lib.Player.load(str(priors_run), compute_dtype='float32')
  board = chess.Board('r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R b KQkq - 0 1')
  analysis = player.analyse(board)
  assert len(analysis.moves) == 43 and all(m in board.legal_moves for m in analysis.moves)
  # The same position as White sees it from Black's side: the mover's view makes them one.
  mirrored = player.analyse(board.mirror())
  mirror_of = {m.uci(): p for m, p in zip(mirrored.moves, mirrored.win_probs)}
  np.testing.assert_allclose(
    analysis.win_probs,
    [
      mirror_of[m.uci()[0] + str(9 - int(m.uci()[1])) + m.uci()[2] + str(9 - int(m.uci()[3])) + m.uci()[4:]]
      for m in analysis.moves
    ],
    atol=1e-5,
  )
  boards, _, _ = evaluate.load_boards(board_bag, 4)
  assert len(evaluate.evaluate(player.policy, boards, progress=False)) == 4
  summary = puzzles.run(
    puzzles=str(shared_data / 'puzzles' / 'lichess_puzzles_dev.csv'),
    agent=f'checkpoint:{priors_run}',
    out=tmp_path / 'p',
    num=3,
  )
  assert summary['n'] == 3
  from searchless.play import agents

  with agents.opened(f'search:{priors_run},sims=8,batch=4') as agent:
    assert (
      agent.play(chess.Board('6k1/5ppp/8/8/8/8/5PPP/3R2K1 w - - 0 1'))
      in chess.Board('6k1/5ppp/8/8/8/8/5PPP/3R2K1 w - - 0 1').legal_moves
    )


def test_uci_plays_with_them(priors_run):
  with uci_engine(priors_run, '--dtype', 'float32') as engine:
    board = play_legal_moves(engine, plies=4, seconds=0.2)
    assert board.ply() == 4


def test_export_carries_them(priors_run, tmp_path):
  model_config, params, experiment = loading.load_model(str(priors_run))
  out = export.export(tmp_path / 'out', model_config, params, experiment)
  weights, saved = export.load_safetensors(out / export.WEIGHTS)
  assert saved == model_config and sorted(weights) == sorted(params)
  tokens = np.full((2, 77 + export.MOVE_SLOTS), -1, np.int32)
  tokens[:, :77] = 0
  tokens[0, 0] = 11  # Black to move: the mirrored path runs inside the exported function too.
  tokens[:, 77:80] = [[1, 2, 3], [4, 5, 6]]
  forward = export.load_forward(out / export.FORWARD)
  want = jax.jit(network.build(model_config).apply)(params, None, tokens)
  np.testing.assert_allclose(np.asarray(forward.call(tokens)), np.asarray(want), atol=1e-5)
  assert jax.tree.structure(weights) == jax.tree.structure(params)
