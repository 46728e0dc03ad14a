"""PGN parsing: the tests that build, train or play models (slow).

The fast ones, and the helpers both use, are in tests/unit/test_pgn.py.
"""

import chess
import chess.pgn
import pytest

from searchless.data import pgn


@pytest.mark.slow
def test_real_lichess_file_parses_completely(lichess_999):
  raws = list(pgn.iter_raw_games(str(lichess_999)))
  assert len(raws) == 999
  results = [pgn.parse_game(raw) for raw in raws]
  assert all(isinstance(r, pgn.Game) for r in results)
  assert sum(len(r.fens) for r in results) == 67291
  assert len({r.key for r in results}) == 999  # Lichess Site URLs.
  # Cross-check one game's boards against python-chess' own game reader.
  with open(lichess_999) as f:
    reference = chess.pgn.read_game(f)
  board = reference.board()
  expected = [board.fen()]
  for move in reference.mainline_moves():
    board.push(move)
    expected.append(board.fen())
  assert list(results[0].fens) == expected
  assert results[1].location == f'{lichess_999}:21'
