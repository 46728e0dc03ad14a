"""Board metrics: hand-computed cases, and parity with the reference evaluator."""

import math

import numpy as np
import pytest

from searchless.evaluation import metrics
from searchless.core import values

KINGS = '7k/8/8/8/8/8/8/K7 w - - 0 1'  # White king a1: a2, b1, b2.


def test_group_boards_by_fen_in_reference_order_and_drops_partial_boards():
  records = [(KINGS, 'a1b2', 0.3), (KINGS, 'a1a2', 0.1), (KINGS, 'a1b1', 0.2)]
  boards, dropped = metrics.group_boards(records)
  assert dropped == 0 and len(boards) == 1
  board = boards[0]
  from searchless.core import moves

  expected = sorted(['a1b2', 'a1a2', 'a1b1'], key=moves.MOVE_TO_ACTION.get)  # The reference order.
  assert expected != ['a1b2', 'a1a2', 'a1b1']
  assert board.moves == tuple(expected)
  by_move = {'a1b2': (0.3, 0), 'a1a2': (0.1, 1), 'a1b1': (0.2, 2)}
  np.testing.assert_array_equal(board.win_probs, [by_move[m][0] for m in expected])
  np.testing.assert_array_equal(board.records, [by_move[m][1] for m in expected])


def test_group_boards_counts_missing_repeated_and_illegal():
  full = [(KINGS, m, 0.5) for m in ('a1a2', 'a1b1', 'a1b2')]
  other = '7k/8/8/8/8/8/8/1K6 w - - 0 1'
  missing = [(other, 'b1a1', 0.5)]
  repeated = [('k7/8/8/8/8/8/8/7K w - - 0 1', m, 0.5) for m in ('h1g1', 'h1g2', 'h1h2', 'h1h2')]
  bad_fen = [('not a fen', 'e2e4', 0.5)]
  boards, dropped = metrics.group_boards(full + missing + repeated + bad_fen)
  assert [b.fen for b in boards] == [KINGS] and dropped == 3


def test_interleaved_records_of_a_board_are_grouped():
  a, b = '7k/8/8/8/8/8/8/K7 w - - 0 1', '7k/8/8/8/8/8/8/7K w - - 0 1'
  records = [(a, 'a1a2', 0.1), (b, 'h1g1', 0.2), (a, 'a1b1', 0.3), (b, 'h1g2', 0.4), (a, 'a1b2', 0.5), (b, 'h1h2', 0.6)]
  boards, dropped = metrics.group_boards(records)
  assert [x.fen for x in boards] == [a, b] and dropped == 0


def test_kendall_tau_b_on_values_with_ties():
  # x = (1, 2, 3), y = (1, 1, 2): pairs (1,2): x+ y0 -> tie in y; (1,3): +,+ concordant; (2,3): +,+ concordant.
  # tau-b = (C - D) / sqrt((n0 - n1)(n0 - n2)) = 2 / sqrt(3 * 2) = 0.816496...
  assert metrics.kendall_tau_b(np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0, 2.0])) == pytest.approx(2 / math.sqrt(6))
  assert metrics.kendall_tau_b(np.array([3.0, 2.0, 1.0]), np.array([1.0, 2.0, 3.0])) == pytest.approx(-1.0)
  assert math.isnan(metrics.kendall_tau_b(np.array([0.5]), np.array([0.5])))
  assert math.isnan(metrics.kendall_tau_b(np.array([0.2, 0.2]), np.array([0.1, 0.3])))
  # The mean leaves undefined boards out.
  assert metrics.kendall_tau([np.array([1.0, 2.0]), np.array([0.5])], [np.array([1.0, 2.0]), np.array([0.5])]) == 1.0


def test_reference_argsort_tau_is_not_a_rank_correlation_of_values():
  stockfish = np.array([0.25, 0.35, 0.05, 0.45])
  predicted = np.array([0.1, 0.4, 0.2, 0.3])
  # On the values, pairs (i < j): (0,1) C, (0,2) D, (0,3) C, (1,2) C, (1,3) D, (2,3) C -> (4 - 2) / 6.
  assert metrics.kendall_tau_b(predicted, stockfish) == pytest.approx(1 / 3)
  # The reference: tau between argsort(pred) = (0, 2, 3, 1) and argsort(sf) = (2, 0, 1, 3):
  # (0,1) D, (0,2) D, (0,3) C, (1,2) C, (1,3) D, (2,3) D -> (2 - 4) / 6: the sign flips.
  assert metrics.kendall_tau_reference_argsort(predicted, stockfish) == pytest.approx(-1 / 3)
  assert metrics.kendall_tau_reference_argsort(np.array([0.7]), np.array([0.1])) == 1.0


def _one_hot_log_probs(buckets, num_buckets=4, mass=0.7):
  """Each row puts `mass` on its bucket and spreads the rest evenly."""
  probs = np.full((len(buckets), num_buckets), (1 - mass) / (num_buckets - 1))
  probs[np.arange(len(buckets)), buckets] = mass
  return np.log(probs)


def test_action_value_board_metrics_by_hand():
  # 4 buckets: edges 0.25, 0.5, 0.75; centres 0.125, 0.375, 0.625, 0.875.
  stockfish = np.array([0.9, 0.1, 0.6])  # Buckets 3, 0, 2.
  log_probs = _one_hot_log_probs([2, 0, 3])  # Predicts bucket 2, 0, 3.
  m = metrics.board_metrics('action_value', log_probs, stockfish)
  _, centres = values.uniform_buckets(4)
  predicted = np.exp(log_probs) @ centres
  # Predicted best is move 2 (bucket 3), Stockfish's best is move 0: a miss.
  assert m['action_accuracy'] == 0.0
  p_other = 0.1
  expected_log_loss = -(math.log2(p_other) + math.log2(0.7) + math.log2(p_other)) / 3
  assert m['log_loss'] == pytest.approx(expected_log_loss)
  assert m['l2_win_prob'] == pytest.approx(np.mean((predicted - stockfish) ** 2))
  entropy = -(0.7 * math.log2(0.7) + 3 * 0.1 * math.log2(0.1))
  assert m['entropy'] == pytest.approx(entropy)
  # Predicted order 1 < 0 < 2, Stockfish 1 < 2 < 0: 2 concordant pairs, 1 discordant.
  assert m['kendall_tau'] == pytest.approx(1 / 3)
  assert 'consistency' not in m


def test_state_value_adds_consistency_and_needs_the_value():
  stockfish = np.array([0.9, 0.1])
  log_probs = _one_hot_log_probs([3, 0])
  _, centres = values.uniform_buckets(4)
  best_next = (np.exp(log_probs) @ centres).max()
  m = metrics.board_metrics('state_value', log_probs, stockfish, value=0.5)
  assert m['consistency'] == pytest.approx((0.5 - best_next) ** 2)
  assert m['action_accuracy'] == 1.0
  with pytest.raises(ValueError, match='board value'):
    metrics.board_metrics('state_value', log_probs, stockfish)


def test_behavioral_cloning_board_metrics_by_hand():
  stockfish = np.array([0.2, 0.8, 0.5])
  log_probs = np.log(np.array([0.5, 0.3, 0.2]))
  m = metrics.board_metrics('behavioral_cloning', log_probs, stockfish)
  assert m['action_accuracy'] == 0.0
  assert m['log_loss'] == pytest.approx(-math.log2(0.3))
  assert m['entropy'] == pytest.approx(-(0.5 * math.log2(0.5) + 0.3 * math.log2(0.3) + 0.2 * math.log2(0.2)))
  assert m['kendall_tau'] == pytest.approx(-1 / 3)
  assert 'l2_win_prob' not in m


def test_summarise_leaves_nan_out_and_counts():
  per_board = [{'action_accuracy': 1.0, 'kendall_tau': float('nan')}, {'action_accuracy': 0.0, 'kendall_tau': 0.5}]
  s = metrics.summarise(per_board)
  assert s == {'action_accuracy': 0.5, 'kendall_tau': 0.5, 'boards': 2, 'kendall_tau_boards': 1}


def test_action_accuracy_counts_ties_for_best_as_hits():
  assert metrics.action_accuracy([np.array([0.1, 0.9, 0.2])], [np.array([0.4, 0.6, 0.6])]) == 1.0
  assert metrics.action_accuracy([np.array([0.9, 0.1, 0.2])], [np.array([0.4, 0.6, 0.6])]) == 0.0
