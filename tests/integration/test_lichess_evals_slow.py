"""Imported labels: Lichess's own evaluations as labelled boards: the tests that build, train or play models (slow).

The fast ones, and the helpers both use, are in tests/unit/test_lichess_evals.py.
"""

import io

import chess
import chess.engine
import chess.pgn
import pytest

from searchless.data import lichess_evals
from searchless.data import pgn

from unit.test_lichess_evals import _mover


@pytest.mark.slow
def test_real_games_give_what_python_chess_reads_in_their_eval_comments(lichess_999):
  """Every evaluated game of the 999: state values and played-move values, checked against python-chess's own
  reading of the same comments (node.eval())."""
  labelled, games_with_evals = [], 0
  for raw in pgn.iter_raw_games(str(lichess_999)):
    game = pgn.parse_game(raw, with_evals=True)
    if not isinstance(game, pgn.Game) or not any(game.evals):
      continue
    games_with_evals += 1
    boards = list(lichess_evals.from_game(game))
    nodes = list(chess.pgn.read_game(io.StringIO(raw.text)).mainline())
    expected = []
    for index, fen in enumerate(game.fens):
      score = nodes[index - 1].eval() if index else None
      board = chess.Board(fen)
      if score is None or board.is_game_over():
        continue
      moves, probs = (), ()
      if index < len(nodes):
        after = nodes[index].board()
        if after.is_checkmate():
          moves, probs = (nodes[index].move.uci(),), (1.0,)
        elif nodes[index].eval() is not None:
          moves, probs = (nodes[index].move.uci(),), (_mover(nodes[index].eval(), board.turn),)
      expected.append((fen, _mover(score, board.turn), moves, probs))
    assert [(b.fen, b.state_value, b.moves, b.win_probs) for b in boards] == expected
    assert all(b.best_move is None and b.source == 'games' for b in boards)
    labelled += boards
  assert games_with_evals == 96 and len(labelled) == 5795
  # A game's last scored board has no scored move after it, unless that move mates.
  assert sum(1 for b in labelled if b.moves) == 5733
