import chess

from searchless.core import moves


def test_vocabulary_is_the_reference_order(compat):
  reference = (compat / 'move_vocab.txt').read_text().split()
  assert len(reference) == moves.NUM_ACTIONS == 1968
  assert list(moves.ACTION_TO_MOVE) == reference
  assert all(moves.MOVE_TO_ACTION[m] == i for i, m in enumerate(reference))


def test_every_legal_move_of_real_games_is_in_the_vocabulary(lichess_999):
  from searchless.data import pgn

  count = 0
  for raw in list(pgn.iter_raw_games(str(lichess_999)))[:100]:
    for fen in pgn.parse_game(raw).fens:
      for move in chess.Board(fen).legal_moves:
        moves.move_to_action(move.uci())
        count += 1
  assert count > 100_000


def test_castling_and_promotions():
  assert moves.move_to_action('e1g1') == moves.MOVE_TO_ACTION['e1g1']
  assert moves.ACTION_TO_MOVE[-1] == 'h7g8n'
  try:
    moves.move_to_action('e1e1')
  except ValueError as e:
    assert 'e1e1' in str(e)
  else:
    raise AssertionError('e1e1 is not a move')
