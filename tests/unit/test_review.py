"""The game review (`searchless.play.review`): Lichess's accuracy against values worked out by hand, the marks
at the page's thresholds, and the views it reads."""

import chess
import pytest

from searchless.play import review

SCHOLARS = ['e2e4', 'e7e5', 'd1h5', 'b8c6', 'f1c4', 'g8f6', 'h5f7']
# The model's view of each position (the mover's win probability, its best move, the played move's), the mate last.
VIEWS = [
  review.PositionView(0.52, 'e2e4', 0.52),  # e4, the best: 100.
  review.PositionView(0.50, 'e7e5', 0.47),  # e5 loses 3 points: no mark.
  review.PositionView(0.55, 'g1f3', 0.48),  # Qh5 loses 7: an inaccuracy.
  review.PositionView(0.55, 'b8c6', 0.55),  # Nc6, the best.
  review.PositionView(0.60, 'd2d3', 0.49),  # Bc4 loses 11: a mistake.
  review.PositionView(0.70, 'g7g6', 0.20),  # Nf6 loses 50: a blunder.
  review.PositionView(0.99, 'h5f7', 1.00),  # Qxf7#, better than the position's value: 100.
  review.terminal_view(chess.Board('r1bqkb1r/pppp1Qpp/2n2n2/4p3/2B1P3/8/PPPP1PPP/RNB1K1NR b KQkq - 0 4')),
]


def test_the_accuracy_of_a_short_game_is_lichess_formula_worked_by_hand():
  game = review.review(chess.STARTING_FEN, SCHOLARS, VIEWS)
  moves = game['moves']
  assert [m['san'] for m in moves] == ['e4', 'e5', 'Qh5', 'Nc6', 'Bc4', 'Nf6', 'Qxf7#']
  assert [m['drop'] for m in moves] == [0.0, 0.03, 0.07, 0.0, 0.11, 0.5, 0.0]
  # 103.1668100711649 e^(-0.04354415386753951 d) - 3.166924740191411 + 1 for d = 3, 7, 11, 50 points.
  assert [m['accuracy'] for m in moves] == [100.0, 88.37, 73.89, 100.0, 61.74, 9.53, 100.0]
  assert [m['mark'] for m in moves] == [None, None, 'inaccuracy', None, 'mistake', 'blunder', None]
  assert moves[2]['best'] == {'uci': 'g1f3', 'san': 'Nf3'} and moves[2]['color'] == 'white' and moves[2]['ply'] == 3
  # White's win% by position: 52 50 55 45 60 30 99 100 (mated Black: 0 for the mover). 7 moves: windows of 2
  # positions, weights |a - b| / 2 within [0.5, 12]: 1 2.5 5 7.5 12 12 0.5.
  # White: accuracies 100 73.89 61.74 100, weights 1 5 12 0.5: weighted 68.124, harmonic 80.433, mean 74.28.
  # Black: accuracies 88.37 100 9.53, weights 2.5 7.5 12: weighted 49.330, harmonic 23.758, mean 36.54.
  assert game['players'] == {
    'white': {'accuracy': 74.28, 'moves': 4, 'blunder': 0, 'mistake': 1, 'inaccuracy': 1},
    'black': {'accuracy': 36.54, 'moves': 3, 'blunder': 1, 'mistake': 0, 'inaccuracy': 0},
  }
  assert review.volatility_weights([52, 50, 55, 45, 60, 30, 99, 100]) == [1.0, 2.5, 5.0, 7.5, 12.0, 12.0, 0.5]


def test_long_games_use_wider_windows_and_the_first_one_repeats():
  # 30 moves (31 positions): windows of 3 positions. Move 0's window is the first one again (lila's List.fill of
  # windowSize - 2 copies), move k's starts at position k - 1. Windows holding the 53: sd sqrt(2).
  percents = [50.0, 53.0] + [50.0] * 29
  weights = review.volatility_weights(percents)
  assert weights == [pytest.approx(2**0.5)] * 3 + [0.5] * 27


@pytest.mark.parametrize(
  ('drop', 'expected'),
  [(0.0, None), (0.049999, None), (0.05, 'inaccuracy'), (0.099999, 'inaccuracy'), (0.1, 'mistake'), (0.15, 'blunder')],
)
def test_marks_are_the_pages_thresholds(drop, expected):
  # The page's thresholds (index.html's footer: inaccuracy 5, mistake 10, blunder 15 points of win%).
  assert review.mark(drop) == expected


def test_a_drop_at_a_threshold_after_rounding_is_marked():
  # 0.6 - 0.45 is 0.14999999999999997 in floats: rounded to 6 decimals first, it is the blunder it reads as.
  views = [review.PositionView(0.6, 'e2e4', 0.45), review.PositionView(0.5, 'e7e5', None)]
  assert review.review(chess.STARTING_FEN, ['d2d4'], views)['moves'][0]['mark'] == 'blunder'


def test_a_game_without_moves_has_no_accuracy():
  game = review.review(chess.STARTING_FEN, [], [review.PositionView(0.5, 'e2e4', None)])
  assert game == {
    'moves': [],
    'players': {
      color: {'accuracy': None, 'moves': 0, 'blunder': 0, 'mistake': 0, 'inaccuracy': 0} for color in ('white', 'black')
    },
  }


def test_views_of_a_server_answer():
  answer = {
    'value': 0.6,
    'best': {'uci': 'e2e4', 'san': 'e4', 'win': 0.6},
    'moves': [{'uci': 'e2e4', 'san': 'e4', 'win': 0.6}, {'uci': 'a2a3', 'san': 'a3', 'win': 0.4}],
  }
  assert review.view_of_answer(answer, 'a2a3') == review.PositionView(0.6, 'e2e4', 0.4)
  with pytest.raises(ValueError, match='behavioral-cloning'):
    review.view_of_answer({'value': None, 'best': None, 'moves': []}, None)
  with pytest.raises(ValueError, match='2 position views for 2 moves'):
    review.review(chess.STARTING_FEN, ['e2e4', 'e7e5'], VIEWS[:2])
