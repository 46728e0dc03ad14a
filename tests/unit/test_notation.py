"""`notation.all_san` (every legal move in SAN, python-chess's `Board.san` character for character) and
`notation.read_fen` (python-chess's `Board(fen)`, the same board)."""

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
    ('4k3/8/8/8/4N3/8/8/4R1K1 w - - 0 1', False, 'e4c3', 'Nc3+'),  # Discovered checks: off the rook's file,
    ('7k/8/8/8/8/8/1K6/B7 w - - 0 1', False, 'b2b3', 'Kb3+'),  # by the king,
    ('7k/8/8/8/8/8/1P6/B3K3 w - - 0 1', False, 'b2b3', 'b3+'),  # by a pawn;
    ('7k/8/8/8/8/8/1K6/B7 w - - 0 1', False, 'b2c3', 'Kc3'),  # along the bishop's line, none.
    ('k7/8/8/8/R7/8/8/4K3 w - - 0 1', False, 'a4a1', 'Ra1+'),  # The other king in check already (not a legal board).
  ],
)
def test_checks_discovered_or_by_castling_en_passant_and_promotion_and_rivals(fen, chess960, uci, san):
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


def _read_as_python_chess(fen: str) -> chess.Board | None:
  try:
    expected = chess.Board(fen)
  except ValueError as error:
    with pytest.raises(ValueError) as raised:
      notation.read_fen(fen)
    assert str(raised.value) == str(error)
    return None
  board = notation.read_fen(fen)
  assert board == expected and board.fen() == expected.fen()
  seen = (board.castling_rights, board.ep_square, board.promoted, board.occupied_co, board.chess960, board.status())
  assert seen == (
    expected.castling_rights,
    expected.ep_square,
    expected.promoted,
    expected.occupied_co,
    expected.chess960,
    expected.status(),
  )
  assert list(board.legal_moves) == list(expected.legal_moves)
  return board


def test_read_fen_reads_every_position_of_the_sample_games_as_python_chess():
  positions = 0
  with importlib.resources.files('searchless.samples').joinpath('sample_games.pgn').open() as f:
    while (game := chess.pgn.read_game(f)) is not None:
      board = game.board()
      for move in game.mainline_moves():
        board.push(move)
        assert _read_as_python_chess(board.fen()) is not None
        positions += 1
  assert positions > 3000


@pytest.mark.parametrize(
  'fen',
  [
    'r3k1r1/8/8/8/8/8/8/1R2K2R w KQkq - 0 1',  # KQkq read by the rooks on the board: b1, h1, a8's none, g8.
    '1r2k2r/8/8/8/8/8/8/R3K1R1 b Qk - 5 9',
    '4k3/8/8/8/8/8/8/4K3 w KQkq e3 0 0',  # Rights without rooks, an en passant square without a pawn, move 0.
    'PPPPPPPP/8/8/8/8/8/8/pppppppp b - - 99 1000000',  # Read, though not a legal position.
    'rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -',  # Fewer fields,
    'rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR',
    '4k3/8/8/8/8/8/8/4K3 w HAha - 0 1',  # Shredder-FEN letters,
    'rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBN~R w KQkq - 0 1',  # a promoted piece: python-chess's to read.
    'rnbqkbnr/pppppppp/44/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1',  # Errors: python-chess's own.
    'rnbqkbnr/ppppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1',
    'rnbqkbnr/ppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1',
    '8/8/8/8/8/8/8/8/ w - - 0 1',
    '17/8/8/8/8/8/8/8 w - - 0 1',
    '4k3/8/8/8/8/8/8/4K3 x - - 0 1',
    '4k3/8/8/8/8/8/8/4K3 w kK - 0 1',
    '4k3/8/8/8/8/8/8/4K3 w - e9 0 1',
    '4k3/8/8/8/8/8/8/4K3 w - - -1 1',
    '4k3/8/8/8/8/8/8/4K3 w - - 0 1 extra',
  ],
)
def test_read_fen_reads_odd_fens_and_refuses_bad_ones_as_python_chess(fen):
  _read_as_python_chess(fen)
