"""`notation.all_san`: every legal move in SAN, python-chess's `Board.san` character for character."""

import importlib.resources
import random

import chess
import chess.pgn
import pytest

from searchless.core import notation


def _same_as_python_chess(board: chess.Board) -> None:
  names = notation.all_san(board)
  assert set(names) == set(board.legal_moves)
  assert {m.uci(): names[m] for m in board.legal_moves} == {m.uci(): board.san(m) for m in board.legal_moves}


def test_every_move_of_the_sample_games():
  positions = 0
  with importlib.resources.files('searchless.samples').joinpath('sample_games.pgn').open() as f:
    while (game := chess.pgn.read_game(f)) is not None:
      board = game.board()
      for move in game.mainline_moves():
        board.push(move)
        _same_as_python_chess(board)
        positions += 1
  assert positions > 3000


@pytest.mark.parametrize(
  'fen, chess960, uci, san',
  [
    ('r4k2/8/8/8/8/8/8/4K2R w K - 0 1', False, 'e1g1', 'O-O+'),  # The rook gives check from f1.
    ('r2k4/8/8/8/8/8/8/R3K3 w Q - 0 1', False, 'e1c1', 'O-O-O+'),
    ('3k4/8/8/8/8/8/8/RK6 w A - 0 1', True, 'b1a1', 'O-O-O+'),  # Chess960: king takes rook, the rook to d1.
    ('5k2/8/8/8/8/8/8/4K1R1 w G - 0 1', True, 'e1g1', 'O-O+'),
    ('1nb1k3/rp3qbr/2p4n/1p5p/4Ppp1/3Q1P1B/PPP2K1P/1R4NR b - e3 0 28', False, 'f4e3', 'fxe3+'),  # En passant.
    ('2r1bn1r/p3k1pp/2p1P3/1pPp1p2/4P3/PNBP2q1/1b4RP/1N2RK2 w - d6 0 25', True, 'c5d6', 'cxd6+'),
    ('1n1q4/4nPk1/b7/p2p2Bp/P1pP3P/3rp3/1R1N4/2K3R1 w - - 6 56', False, 'f7f8b', 'f8=B+'),  # Promotions.
    ('4rb1r/pk3p2/b1nnp3/1pB4p/P1N1P3/1PP2PPN/3p3q/1K2RB1R b - - 0 27', False, 'd2e1r', 'dxe1=R#'),
    ('6k1/8/8/8/R6R/8/1N3N2/4K3 w - - 0 1', False, 'b2d3', 'Nbd3'),  # Rivals on a rank, then on a file.
    ('6k1/8/8/8/R6R/8/1N3N2/4K3 w - - 0 1', False, 'h4g4', 'Rhg4+'),
    ('7k/8/8/8/1N6/8/1N6/4K3 w - - 0 1', False, 'b4d3', 'N4d3'),
  ],
)
def test_checks_by_castling_en_passant_and_promotion_and_rivals(fen, chess960, uci, san):
  board = chess.Board(fen, chess960=chess960)
  assert notation.all_san(board)[chess.Move.from_uci(uci)] == san
  _same_as_python_chess(board)


def test_random_games_with_castling_en_passant_and_promotions_favoured():
  rng = random.Random(0)
  specials = 0
  for chess960 in (False, True):
    for _ in range(12):
      board = chess.Board.from_chess960_pos(rng.randrange(960)) if chess960 else chess.Board()
      while not board.is_game_over() and board.ply() < 160:
        _same_as_python_chess(board)
        legal = list(board.legal_moves)
        special = [m for m in legal if m.promotion or board.is_castling(m) or board.is_en_passant(m)]
        specials += bool(special)
        board.push(rng.choice(special) if special and rng.random() < 0.5 else rng.choice(legal))
  assert specials >= 50  # Positions that offered castling, en passant or a promotion.
