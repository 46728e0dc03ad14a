"""Search over the shipped model: the tests that load and play it (slow). The fast ones, on a stub model, and the
positions both use, are in tests/unit/test_search.py."""

import chess
import numpy as np
import pytest

from searchless.play import agents
from searchless.play import predictor as predictor_lib
from searchless.play.search import agent as search_agent
from searchless.play.search import alphabeta
from searchless.play.search import evaluator as evaluator_lib
from searchless.play.search import mcts

from unit.test_search import BACK_RANK, MATE_IN_2


@pytest.fixture(scope='module')
def small_checkpoints(tmp_path_factory):
  from helpers import write_checkpoint

  root = tmp_path_factory.mktemp('search_checkpoints')
  return {
    policy: str(write_checkpoint(root / policy, policy=policy))
    for policy in ('action_value', 'state_value', 'behavioral_cloning')
  }


@pytest.mark.slow
def test_the_shipped_model_with_search_finds_the_mate_in_2_it_misses_alone():
  from searchless.play import player

  policy = player.load_policy('pretrained-transformer', compute_dtype='float32')
  board = chess.Board(MATE_IN_2)
  assert policy.analyse(board).best_move().uci() == 'b1b6'
  agent = search_agent.agent_for(policy, 'mcts', simulations=256)  # 64 and 128 do not find it (b1g1, b1b6).
  assert agent.play(board).uci() == 'c6c7'
  deep = search_agent.agent_for(policy, 'alphabeta', depth=3)
  assert deep.play(board).uci() == 'c6c7' and deep.last.mate_in() == 2


@pytest.mark.slow
def test_search_runs_over_every_kind_of_checkpoint(small_checkpoints):
  from searchless.play import player

  board = chess.Board(BACK_RANK)
  policies = {k: player.load_policy(path, compute_dtype='float32') for k, path in small_checkpoints.items()}
  for kind, policy in policies.items():
    evaluator = evaluator_lib.Evaluator(policy)
    assert evaluator.has_values == (kind != 'behavioral_cloning')
    result = mcts.Mcts(evaluator, mcts.MctsConfig(simulations=12, batch_size=4)).search(board)
    assert int(result.visits.sum()) == 12 and result.move.uci() == 'd1d8', kind  # The mate, whatever the model.
    assert alphabeta.AlphaBeta(evaluator, alphabeta.AlphaBetaConfig(depth=2)).search(board).mate_in() == 1, kind
  # Behavioral cloning: its probabilities are the priors; without a value model every board reads as a draw.
  bc = evaluator_lib.Evaluator(policies['behavioral_cloning']).evaluate([chess.Board()])[0]
  analysis = policies['behavioral_cloning'].analyse(chess.Board())
  np.testing.assert_allclose(bc.priors, np.exp(analysis.log_probs) / np.exp(analysis.log_probs).sum(), rtol=1e-6)
  assert bc.value == 0.0 and bc.move_values is None
  # ... with one, its leaves get that model's value.
  paired = evaluator_lib.Evaluator(policies['behavioral_cloning'], value_policy=policies['state_value'])
  assert paired.evaluate([chess.Board()])[0].value == pytest.approx(
    2 * policies['state_value'].analyse(chess.Board()).value - 1
  )
  with pytest.raises(ValueError, match='value checkpoint must be an action-value or state-value one'):
    evaluator_lib.Evaluator(policies['behavioral_cloning'], value_policy=policies['behavioral_cloning'])


@pytest.mark.slow
def test_a_behavioral_cloning_spec_takes_a_value_checkpoint(small_checkpoints):
  spec = (
    f'search:{small_checkpoints["behavioral_cloning"]},value={small_checkpoints["state_value"]},'
    'sims=4,batch=1,name=bc+sv'
  )
  with agents.opened(spec) as agent:
    assert agent.name == 'bc+sv' and agent.play(chess.Board(BACK_RANK)).uci() == 'd1d8'
    assert agent.evaluator.value_policy is not None and agent.evaluator.value_policy.kind == 'state_value'


@pytest.mark.slow
def test_a_search_spec_is_ready_after_one_batch_shape_and_compiles_the_rest_in_the_background(tmp_path):
  from helpers import write_checkpoint

  # An architecture of its own: no other test of this process has compiled its shapes (predictors share them).
  checkpoint = write_checkpoint(
    tmp_path, overrides=('model.embedding_dim=24', 'model.num_layers=1', 'model.num_heads=2')
  )
  agent = agents.from_spec(f'search:{checkpoint},sims=8,batch=4')
  try:
    shapes = agent.evaluator.policy.predictor.shapes
    assert not shapes.wait(timeout=0)  # Still compiling: from_spec did not wait for every shape.
    assert agent.play(chess.Board()) in chess.Board().legal_moves
    assert shapes.wait(timeout=300) and len(shapes.ready) == len(predictor_lib.BATCH_BUCKETS)
  finally:
    agent.close()


@pytest.mark.slow
@pytest.mark.parametrize('algo', ['mcts', 'alphabeta'])
def test_a_timed_search_compiles_nothing_and_ends_with_what_it_has(algo):
  """A leaf whose moves need a shape not compiled yet ends a timed search (as its clock would) instead of compiling
  for seconds; the shape is queued for the worker."""
  from searchless.model import loading
  from searchless.play import background_compile
  from searchless.play import policy as policy_lib

  model_config, params, _ = loading.load_model('pretrained')
  predictor = predictor_lib.PackedPredictor(model_config, params, share=False)
  predictor.shapes.close()  # No worker: only what warm_up compiles now (one board of 48 move slots).
  predictor.warm_up(background=True)
  ready = predictor.shapes.ready
  hurried = policy_lib.make_policy('action_value', predictor)
  board = chess.Board('k7/8/8/8/3Q4/8/2Q5/7K b - - 0 1')  # 3 moves; after each, White has 53 (no shape fits).
  if algo == 'mcts':
    search = mcts.Mcts(evaluator_lib.Evaluator(hurried), mcts.MctsConfig(simulations=64, batch_size=4, seconds=5.0))
  else:
    search = alphabeta.AlphaBeta(evaluator_lib.Evaluator(hurried), alphabeta.AlphaBetaConfig(depth=3, seconds=5.0))
  with background_compile.held():
    result = search.search(board)
  assert predictor.shapes.ready == ready  # Nothing compiled.
  assert result.move in board.legal_moves and result.seconds < 1.0
  if algo == 'mcts':
    assert int(result.visits.sum()) == 0  # Every leaf needed the shape: the root's priors decide, as without time.
  else:
    assert result.depth == 1
