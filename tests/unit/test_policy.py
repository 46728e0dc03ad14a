"""Policies over a predictor: batched shapes, the three readings of the model, agreement with batch-1."""

import chess
import jax
import numpy as np
import pytest

from searchless.core import moves
from searchless.core import tokenizer
from searchless.core import values
from searchless.model import loading
from searchless.model import network
from searchless.play import policy as policy_lib
from searchless.play import predictor as predictor_lib
from helpers import write_checkpoint

# Boards with 20, 1 (forced), 0 (mate) and many (> 64) legal moves.
START = chess.Board()
FORCED = chess.Board('k7/8/8/8/8/8/r7/6rK w - - 0 1')  # In check: Kxg1 only.
MATED = chess.Board('rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3')
BUSY = chess.Board('r3k2r/pppq1ppp/2npbn2/2b1p3/2B1P3/2NPBN2/PPPQ1PPP/R3K2R w KQkq - 0 1')


@pytest.fixture(scope='module')
def av(model_checkpoint):
  model_config, params, _ = loading.load_model(str(model_checkpoint))
  return model_config, params


def batch1_action_values(model_config, params, board):
  """The reference engine's way: each legal move alone through the full model, last position (compiled once: op by
  op, each of the moves took every operation's dispatch)."""
  apply = jax.jit(network.build(model_config).apply)
  state = tokenizer.tokenize(board.fen()).astype(np.int32)
  _, centres = values.uniform_buckets(model_config.output_size)
  result = {}
  for move in board.legal_moves:
    sequence = np.concatenate([state, [moves.MOVE_TO_ACTION[move.uci()], 0]])[None]
    result[move.uci()] = float(np.exp(np.asarray(apply(params, None, sequence))[0, -1]) @ centres)
  return result


def test_boards_used_here_have_the_move_counts_they_claim():
  assert FORCED.legal_moves.count() == 1 and MATED.is_checkmate() and BUSY.legal_moves.count() > 40


def test_action_values_equal_one_move_at_a_time_through_the_full_model(av):
  predictor = predictor_lib.Predictor(*av)
  policy = policy_lib.make_policy('action_value', predictor)
  for board in (START, BUSY, FORCED):
    analysis = policy.analyse(board)
    expected = batch1_action_values(*av, board)
    assert [m.uci() for m in analysis.moves] == sorted(expected, key=moves.MOVE_TO_ACTION.get)
    np.testing.assert_allclose(analysis.win_probs, [expected[m.uci()] for m in analysis.moves], atol=2e-6)
    assert analysis.value == pytest.approx(max(expected.values()), abs=2e-6)
    assert analysis.best_move().uci() == max(expected, key=expected.get)


def test_predictor_pads_to_fixed_batch_shapes(av):
  predictor = predictor_lib.Predictor(*av, batch_buckets=(8, 32), share=False)  # Its own compiled shapes.
  sequences = np.zeros((45, 79), np.int32)
  sequences[:, :77] = tokenizer.tokenize(START.fen())
  sequences[:, 77] = np.arange(45)
  out = predictor(sequences)
  assert out.shape == (45, av[0].output_size)
  assert predictor.rows_run == 32 + 8 + 8  # 32 rows, 8 rows, then 5 padded to 8.
  np.testing.assert_allclose(predictor(sequences[:5]), out[:5], atol=1e-6)
  assert predictor.rows_run == 48 + 8
  # Shapes compiled: only the buckets, whatever the row counts.
  assert predictor._apply._cache_size() == 2


def test_analyse_many_equals_one_by_one(av):
  policy = policy_lib.make_policy('action_value', predictor_lib.Predictor(*av))
  boards = [START, BUSY, FORCED, MATED]
  together = policy.analyse_many(boards)
  for board, analysis in zip(boards, together):
    alone = policy.analyse(board)
    assert analysis.moves == alone.moves
    np.testing.assert_allclose(analysis.scores, alone.scores, atol=1e-6)
  assert together[3].moves == () and together[3].best_move() is None and together[3].value is None


def test_state_value_policy_flips_the_next_boards_value(tmp_path):
  workdir = write_checkpoint(tmp_path, 'state_value')
  model_config, params, _ = loading.load_model(str(workdir))
  policy = policy_lib.make_policy('state_value', predictor_lib.Predictor(model_config, params))
  analysis = policy.analyse(START)
  apply = jax.jit(network.build(model_config).apply)  # One program for the 21 boards, not op by op.
  _, centres = values.uniform_buckets(model_config.output_size)

  def value(board):
    sequence = np.concatenate([tokenizer.tokenize(board.fen()), [0]])[None].astype(np.int32)
    return float(np.exp(np.asarray(apply(params, None, sequence))[0, -1]) @ centres)

  assert analysis.value == pytest.approx(value(START), abs=2e-6)
  for move, win_prob in zip(analysis.moves, analysis.win_probs):
    board = START.copy()
    board.push(move)
    assert win_prob == pytest.approx(1.0 - value(board), abs=2e-6)  # Uniform centres: flip = 1 - v.
  assert analysis.log_probs.shape == (20, model_config.output_size)


def test_behavioral_cloning_renormalises_over_legal_moves(tmp_path):
  workdir = write_checkpoint(tmp_path, 'behavioral_cloning')
  model_config, params, _ = loading.load_model(str(workdir))
  assert model_config.output_size == moves.NUM_ACTIONS
  policy = policy_lib.make_policy('behavioral_cloning', predictor_lib.Predictor(model_config, params))
  analysis = policy.analyse(BUSY)
  sequence = np.concatenate([tokenizer.tokenize(BUSY.fen()), [0]])[None].astype(np.int32)
  full = np.asarray(jax.jit(network.build(model_config).apply)(params, None, sequence))[0, -1]  # [1968]
  legal = full[[moves.MOVE_TO_ACTION[m.uci()] for m in analysis.moves]]
  expected = np.exp(legal) / np.exp(legal).sum()
  np.testing.assert_allclose(analysis.scores, expected, rtol=1e-5)
  assert analysis.scores.sum() == pytest.approx(1.0) and analysis.win_probs is None and analysis.value is None


def test_policy_must_fit_the_model(av):
  predictor = predictor_lib.Predictor(*av)
  with pytest.raises(ValueError, match='behavioral_cloning policy does not fit a model with 128 outputs'):
    policy_lib.make_policy('behavioral_cloning', predictor)
  with pytest.raises(ValueError, match="unknown policy 'q_value'"):
    policy_lib.make_policy('q_value', predictor)


def test_published_checkpoint_reproduces_reference_log_probs_through_the_predictor(compat):
  with np.load(compat / 'reference_local_model.npz') as npz:
    sequences, expected = npz['sequences'], npz['last_log_probs']
  model_config, params, _ = loading.load_model(str(compat / 'reference_local_checkpoint'))
  np.testing.assert_allclose(predictor_lib.Predictor(model_config, params)(sequences), expected, atol=1e-5)


@pytest.mark.parametrize('kind', ['action_value', 'state_value', 'behavioral_cloning', 'packed'])
def test_legal_moves_given_in_any_order_change_nothing(kind, av, tmp_path):
  if kind == 'packed':
    model_config, params, _ = loading.load_model('pretrained')  # The shipped board-packed model.
    predictor = predictor_lib.PackedPredictor(model_config, params)
    kind = 'action_value'
  elif kind == 'action_value':
    predictor = predictor_lib.Predictor(*av)
  else:
    model_config, params, _ = loading.load_model(str(write_checkpoint(tmp_path, kind)))
    predictor = predictor_lib.Predictor(model_config, params)
  policy = policy_lib.make_policy(kind, predictor)
  boards = [START, BUSY, FORCED, MATED]
  generated = policy.analyse_many(boards)
  given = policy.analyse_many(boards, [list(board.legal_moves)[::-1] for board in boards])  # Not the policy's order.
  for mine, theirs in zip(given, generated, strict=True):
    assert mine.moves == theirs.moves and mine.fen == theirs.fen
    np.testing.assert_array_equal(mine.scores, theirs.scores)
  with pytest.raises(ValueError, match='analyse_many: 1 lists of legal moves for 4 boards'):
    policy.analyse_many(boards, [[]])
