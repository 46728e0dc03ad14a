"""Search over the shipped model: the tests that load and play it (slow). The fast ones, on a stub model, and the
positions both use, are in tests/unit/test_search.py."""

import dataclasses

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


QUEENS_TO_MOVE = chess.Board('k7/8/8/8/3Q4/8/2Q5/7K b - - 0 1')  # 3 moves; after each, White has 53.


def _hurried_search(algo: str, seconds: float):
  """(a search of `algo` on `seconds`, its predictor): the shipped model with only the one shape a background
  warm-up compiles at once (one board, of fewer move slots than White's 53 moves after Black's), and no worker."""
  from searchless.model import loading
  from searchless.play import policy as policy_lib

  model_config, params, _ = loading.load_model('pretrained')
  predictor = predictor_lib.PackedPredictor(model_config, params, share=False)
  predictor.shapes.close()  # No worker: only what warm_up compiles now, and what the search itself compiles.
  predictor.warm_up(background=True)
  evaluator = evaluator_lib.Evaluator(policy_lib.make_policy('action_value', predictor))
  if algo == 'mcts':
    return mcts.Mcts(evaluator, mcts.MctsConfig(simulations=10**6, batch_size=4, seconds=seconds)), predictor
  config = alphabeta.AlphaBetaConfig(depth=alphabeta.MAX_DEPTH, seconds=seconds)
  return alphabeta.AlphaBeta(evaluator, config), predictor


@pytest.mark.slow
@pytest.mark.parametrize('algo', ['mcts', 'alphabeta'])
def test_a_timed_search_compiles_the_shape_its_leaves_need_when_it_has_the_time_and_goes_on(algo):
  """Every leaf needs a shape not compiled yet; a 5-second search has time for its compile (the one measured in
  the warm-up is its expected cost): it compiles it and searches on, its time spent."""
  from searchless.play import background_compile

  search, predictor = _hurried_search(algo, 5.0)
  ready = predictor.shapes.ready
  with background_compile.held():
    result = search.search(QUEENS_TO_MOVE)
  assert predictor.shapes.ready > ready  # Compiled within the search.
  assert result.move in QUEENS_TO_MOVE.legal_moves
  if algo == 'mcts':
    assert int(result.visits.sum()) > 0 and result.seconds >= 0.7 * 5.0, (result.visits, result.seconds)
  else:
    assert result.depth >= 2  # Deeper than the root's own move values (it may prove the mate and stop early).


@pytest.mark.slow
@pytest.mark.parametrize('algo', ['mcts', 'alphabeta'])
def test_a_timed_search_shorter_than_a_compile_compiles_nothing_and_ends_with_what_it_has(algo):
  """A budget shorter than the measured cost of a compile: the leaf whose shape is not compiled ends the search
  in its time (the shape is queued for the worker)."""
  from searchless.play import background_compile

  search, predictor = _hurried_search(algo, 1.0)
  cost = predictor.shapes.compile_cost()
  search.config = dataclasses.replace(search.config, seconds=cost / 2)
  ready = predictor.shapes.ready
  with background_compile.held():
    result = search.search(QUEENS_TO_MOVE)
  assert predictor.shapes.ready == ready  # Nothing compiled.
  assert result.move in QUEENS_TO_MOVE.legal_moves and result.seconds < cost
  if algo == 'mcts':
    assert int(result.visits.sum()) == 0  # Every leaf needed the shape: the root's priors decide, as without time.
  else:
    assert result.depth == 1
