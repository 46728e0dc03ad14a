"""The transformer's structural priors (mover's view, move squares, square biases): what each computes."""

import dataclasses

import chess
import chess.pgn
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from searchless.core import moves
from searchless.core import tokenizer
from searchless.model import priors
from searchless.model.config import ModelConfig

BASE = ModelConfig(embedding_dim=16, num_layers=2, num_heads=2, output_size=128, max_sequence_length=79)
KIWIPETE_BLACK = 'r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R b KQkq a3 0 1'


def _boards(lichess_999, count):
  """The first `count` positions of the real 999-game file, after each move (both sides to move)."""
  boards = []
  with open(lichess_999) as stream:
    while len(boards) < count:
      game = chess.pgn.read_game(stream)
      board = game.board()
      for move in game.mainline_moves():
        board.push(move)
        boards.append(board.copy(stack=False))
  return boards[:count]


def test_the_mover_view_of_real_boards_is_python_chess_mirror(lichess_999):
  boards = _boards(lichess_999, 300)
  assert {b.turn for b in boards} == {chess.WHITE, chess.BLACK}
  tokens = np.stack(
    [
      np.concatenate(
        [tokenizer.tokenize(b.fen()), [moves.MOVE_TO_ACTION[m.uci()] for m in list(b.legal_moves)[:3]] + [-1] * 3]
      )
      for b in boards
      if b.legal_moves.count() >= 3
    ]
  ).astype(np.int32)  # [N, 77 + 6]
  viewed, black = priors.mover_view(tokens, 77)
  viewed = np.asarray(viewed)
  for row, board, is_black in zip(viewed, [b for b in boards if b.legal_moves.count() >= 3], np.asarray(black)):
    seen = board.mirror() if board.turn == chess.BLACK else board
    assert is_black == (board.turn == chess.BLACK)
    assert row[:77].tolist() == tokenizer.tokenize(seen.fen()).tolist()
    expected_moves = [
      moves.MOVE_TO_ACTION[priors._mirror_move(m.uci()) if is_black else m.uci()] for m in list(board.legal_moves)[:3]
    ]
    assert row[77:].tolist() == expected_moves + [-1] * 3


def test_castling_rights_and_en_passant_are_mirrored():
  for fen, seen in [
    ('r3k2r/8/8/8/3Pp3/8/8/R3K2R b Kq d3 0 1', 'r3k2r/8/8/3pP3/8/8/8/R3K2R w Qk d6 0 1'),
    ('4k3/8/8/8/8/8/8/4K3 b - - 12 80', '4k3/8/8/8/8/8/8/4K3 w - - 12 80'),
    ('r3k3/8/8/8/8/8/8/4K2R b Qk - 0 1', '4k2r/8/8/8/8/8/8/R3K3 w Kq - 0 1'),
  ]:
    viewed, _ = priors.mover_view(tokenizer.tokenize(fen)[None].astype(np.int32), 77)
    assert ''.join(tokenizer.CHARACTERS[t] for t in np.asarray(viewed[0])) == tokenizer.fen_to_characters(seen)


def test_every_move_mirrors_into_the_vocabulary_and_back():
  assert sorted(priors.MIRROR_ACTION.tolist()) == list(range(moves.NUM_ACTIONS))
  assert (priors.MIRROR_ACTION[priors.MIRROR_ACTION] == np.arange(moves.NUM_ACTIONS)).all()
  e2e4 = moves.MOVE_TO_ACTION['e2e4']
  assert (priors.FROM_SQUARE[e2e4], priors.TO_SQUARE[e2e4], priors.PROMOTION[e2e4]) == (52, 36, 0)  # a8 = 0.
  assert priors.PROMOTION[moves.MOVE_TO_ACTION['b7a8n']] == 4


def test_geometry_classes_and_move_squares():
  inputs = np.zeros((1, 80), np.int32)
  inputs[0, 78:] = [moves.MOVE_TO_ACTION['e2e4'], moves.MOVE_TO_ACTION['g1f3']]
  geo = priors.geometry(inputs, square_bias='relative', smolgen=0)
  assert geo.displacement.shape == (80, 80)
  a8, b7, h1 = 2, 2 + 9, 2 + 63
  assert geo.displacement[a8, b7] == (1 + 7) * 15 + (1 + 7)  # One row down, one file right.
  assert geo.displacement[h1, a8] == 0 and geo.displacement[a8, h1] == 224 and geo.displacement[a8, a8] == 112
  assert (geo.displacement[:2] == 225).all() and (geo.displacement[:, 66:] == 225).all()  # Not squares: no bias.
  assert np.asarray(geo.move_squares[0, 78:]).tolist() == [[2 + 52, 2 + 36], [2 + 62, 2 + 45]]
  assert (np.asarray(geo.move_squares[0, :78]) == -1).all()
  assert geo.open_lines is None


def test_a_move_token_gathers_its_from_and_to_squares_states():
  inputs = np.zeros((2, 80), np.int32)
  inputs[:, 78:] = [[moves.MOVE_TO_ACTION['e2e4'], moves.MOVE_TO_ACTION['g1f3']], [moves.MOVE_TO_ACTION['a7a8q'], 0]]
  h = np.asarray(jax.random.normal(jax.random.PRNGKey(0), (2, 80, 8)))
  model = hk.without_apply_rng(hk.transform(lambda h, inputs: priors.gather_move_squares(jnp.asarray(h), inputs)))
  params = model.init(None, h, inputs)
  np.testing.assert_array_equal(model.apply(params, h, inputs), h)  # Zero at first: the model without it.
  w = np.asarray(jax.random.normal(jax.random.PRNGKey(1), (16, 8)))
  out = np.asarray(model.apply({**params, 'move_gather': {'w': w}}, h, inputs))
  norm = lambda x: (x - x.mean()) / np.sqrt(x.var() + 1e-5)
  squares = {'e2': 2 + 52, 'e4': 2 + 36, 'g1': 2 + 62, 'f3': 2 + 45, 'a7': 2 + 8, 'a8': 2, 'a1': 2 + 56, 'b1': 2 + 57}
  cases = ((0, 0, ('e2', 'e4')), (0, 1, ('g1', 'f3')), (1, 0, ('a7', 'a8')), (1, 1, ('a1', 'b1')))  # Action 0: a1b1.
  for board, slot, (a, b) in cases:
    want = h[board, 78 + slot] + norm(np.concatenate([h[board, squares[a]], h[board, squares[b]]])) @ w
    np.testing.assert_allclose(out[board, 78 + slot], want, rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(out[:, :78], h[:, :78])  # Only the move tokens change.


def test_open_lines_are_python_chess_rays_with_no_piece_between(lichess_999):
  boards = [chess.Board(KIWIPETE_BLACK), *_boards(lichess_999, 40)[::8]]
  tokens = np.stack([tokenizer.tokenize(board.fen()) for board in boards])  # [B, 77]
  lines = np.asarray(priors.open_lines(tokens[:, 1:65]))  # [B, 64, 64]
  square = lambda index: chess.square(index % 8, 7 - index // 8)  # a8 = 0.
  for board, got in zip(boards, lines):
    want = [
      [
        float(
          a != b and bool(chess.ray(square(a), square(b))) and not chess.between(square(a), square(b)) & board.occupied
        )
        for b in range(64)
      ]
      for a in range(64)
    ]
    np.testing.assert_array_equal(got, want)
  assert lines[0].sum() == 666  # Kiwipete: 333 open pairs, each counted both ways.


def test_open_line_biases_are_added_where_a_line_is_open_only():
  board = chess.Board(KIWIPETE_BLACK)
  inputs = np.pad(tokenizer.tokenize(board.fen())[None], ((0, 0), (1, 2))).astype(
    np.int32
  )  # [1, 80]: shifted, 2 moves.

  def bias(inputs):
    geo = priors.geometry(inputs, square_bias='open_lines', smolgen=0)
    return priors.attention_bias(geo, jnp.zeros((1, 80, 8)), 2, 0, 80)

  model = hk.without_apply_rng(hk.transform(bias))
  params = model.init(None, inputs)
  assert {name: v.shape for name, v in params['~'].items()} == {
    'square_bias': (2, 225),
    'move_square_bias': (2, 2),
    'open_line_bias': (2, 225),
  }
  classes = np.arange(225, dtype=np.float32)
  params = {'~': {**params['~'], 'open_line_bias': np.stack([classes, -classes])}}
  out = np.asarray(model.apply(params, inputs))  # [1, 2, 80, 80]
  lines = np.asarray(priors.open_lines(inputs[:, 2:66]))[0]
  np.testing.assert_array_equal(out[0, 0, 2:66, 2:66], lines * priors.SQUARE_DISPLACEMENT)
  np.testing.assert_array_equal(out[0, 1, 2:66, 2:66], -lines * priors.SQUARE_DISPLACEMENT)
  assert not out[:, :, :2].any() and not out[:, :, 66:].any() and not out[:, :, :, 66:].any()
  e8, e1 = 4, 60
  assert out[0, 0, 2 + e1, 2 + e8] == 0 and out[0, 0, 2 + e8, 2 + 5] == (0 + 7) * 15 + (1 + 7)  # Blocked; e8-f8 open.


def test_options_are_refused_where_they_do_not_apply():
  with pytest.raises(ValueError, match="move_squares must be one of \\('none', 'tied', 'untied'\\), got 'both'"):
    dataclasses.replace(BASE, move_squares='both')
  with pytest.raises(ValueError, match="square_bias must be one of \\('none', 'relative', 'open_lines'\\), got 'shaw'"):
    dataclasses.replace(BASE, square_bias='shaw')
  with pytest.raises(ValueError, match='model.smolgen must be >= 0, got -1'):
    dataclasses.replace(BASE, smolgen=-1)
  for option in (dict(mover_view=True), dict(smolgen=8), dict(move_gather=True)):
    with pytest.raises(ValueError, match='transformer options'):
      dataclasses.replace(BASE, kind='graph', **option)
