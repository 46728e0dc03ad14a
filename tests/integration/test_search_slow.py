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
