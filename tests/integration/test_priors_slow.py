"""The transformer's structural priors: what each computes: the tests that build, train or play models (slow).

The fast ones, and the helpers both use, are in tests/unit/test_priors.py.
"""

import dataclasses

import chess
import chess.pgn
import jax
import numpy as np
import pytest

from searchless.core import moves
from searchless.core import tokenizer
from searchless.model import priors
from searchless.model import network

from unit.test_priors import BASE, KIWIPETE_BLACK


ALL = dict(mover_view=True, move_squares='untied', square_bias='relative', smolgen=4)


def _noisy(params, seed=3):
  """Parameters with every leaf moved off its initial value (zero biases included). NumPy's noise: JAX's, drawn leaf
  by leaf outside jit, compiled a kernel for each shape (seconds)."""
  rng = np.random.default_rng(seed)
  return jax.tree.map(lambda x: np.asarray(x) + 0.3 * rng.standard_normal(x.shape, np.float32), params)


@pytest.mark.slow
def test_each_option_adds_only_its_own_parameters_and_the_default_is_the_papers():
  default = network.init_params(BASE)
  # Names only: their shapes (traced, not compiled), as `network.init_params` says.
  names = lambda **kw: set(jax.eval_shape(lambda: network.init_params(dataclasses.replace(BASE, **kw))))
  assert sorted(default) == sorted(names(mover_view=True))
  added = lambda **kw: sorted(names(**kw) - set(default))
  assert added(move_squares='tied') == ['move_promotion']
  assert added(move_squares='untied') == ['move_from_square', 'move_promotion', 'move_to_square']
  biased = network.init_params(dataclasses.replace(BASE, square_bias='relative'))
  assert {k: {n: v.shape for n, v in biased[k].items()} for k in set(biased) - set(default)} == {
    'multi_head_dot_product_attention': {'square_bias': (2, 225), 'move_square_bias': (2, 2)},
    'multi_head_dot_product_attention_1': {'square_bias': (2, 225), 'move_square_bias': (2, 2)},
  }
  smolgen = network.init_params(dataclasses.replace(BASE, smolgen=4))
  assert {k: {n: v.shape for n, v in smolgen[k].items()} for k in set(smolgen) - set(default)} == {
    'smolgen_generator': {'w': (4, 4096), 'b': (4096,)},
    **{
      f'multi_head_dot_product_attention{layer}/{name}': shapes
      for layer in ('', '_1')
      for name, shapes in {
        'smolgen_compress': {'w': (16, 8)},
        'smolgen_summary': {'w': (64 * 8, 4), 'b': (4,)},
        'smolgen_summary_norm': {'scale': (4,), 'offset': (4,)},
        'smolgen_heads': {'w': (4, 2 * 4), 'b': (8,)},
        'smolgen_heads_norm': {'scale': (4,), 'offset': (4,)},
      }.items()
    },
  }
  # Zero biases (and a zero smolgen map) at first: the same function as without them.
  tokens = np.concatenate([tokenizer.tokenize(KIWIPETE_BLACK), [moves.MOVE_TO_ACTION['e7e5'], 0]])[None]
  plain = jax.jit(network.build(BASE).apply)(default, None, tokens.astype(np.int32))
  lines = network.init_params(dataclasses.replace(BASE, square_bias='open_lines'))
  assert {k: {n: v.shape for n, v in lines[k].items()} for k in set(lines) - set(default)} == {
    f'multi_head_dot_product_attention{layer}': {
      'square_bias': (2, 225),
      'move_square_bias': (2, 2),
      'open_line_bias': (2, 225),
    }
    for layer in ('', '_1')
  }
  gather = network.init_params(dataclasses.replace(BASE, move_gather=True))
  assert {k: {n: v.shape for n, v in gather[k].items()} for k in set(gather) - set(default)} == {
    **{f'move_gather{layer}': {'w': (32, 16)} for layer in ('', '_1')},
    **{f'move_gather_norm{layer}': {'scale': (32,), 'offset': (32,)} for layer in ('', '_1')},
  }
  for options, params in (
    (dict(square_bias='relative'), biased),
    (dict(square_bias='open_lines'), lines),
    (dict(smolgen=4), smolgen),
    (dict(move_gather=True), gather),
  ):
    with_bias = jax.jit(network.build(dataclasses.replace(BASE, **options)).apply)(
      {**params, **default}, None, tokens.astype(np.int32)
    )
    np.testing.assert_array_equal(np.asarray(plain), np.asarray(with_bias))


def _packed_row(board, legal):
  return np.concatenate([tokenizer.tokenize(board.fen()), [moves.MOVE_TO_ACTION[m.uci()] for m in legal], [-1]])


@pytest.mark.parametrize('move_attention,move_squares', [('self', 'untied'), ('moves', 'tied')])
@pytest.mark.slow
def test_with_every_prior_a_black_board_is_its_mirror_as_white(move_attention, move_squares):
  config = dataclasses.replace(
    BASE, packing='board', move_attention=move_attention, **{**ALL, 'move_squares': move_squares}
  )
  params = _noisy(network.init_params(config))
  board = chess.Board(KIWIPETE_BLACK)
  legal = list(board.legal_moves)
  mirrored = board.mirror()
  rows = np.stack(
    [
      _packed_row(board, legal),
      _packed_row(mirrored, [chess.Move.from_uci(priors._mirror_move(m.uci())) for m in legal]),
    ]
  )
  out = np.asarray(jax.jit(network.build(config).apply)(params, None, rows.astype(np.int32)))  # [2, M + 1, V]
  np.testing.assert_allclose(out[0, :-1], out[1, :-1], atol=1e-5)
  without = np.asarray(
    jax.jit(network.build(dataclasses.replace(config, mover_view=False)).apply)(params, None, rows.astype(np.int32))
  )
  assert np.abs(without[0, :-1] - without[1, :-1]).max() > 1e-2  # Not so without the mover's view.


@pytest.mark.slow
def test_per_move_models_see_black_as_white_and_behavioral_cloning_mirrors_its_moves_back():
  board = chess.Board(KIWIPETE_BLACK)
  mirrored = board.mirror()
  value = dataclasses.replace(BASE, **ALL)
  params = _noisy(network.init_params(value))
  move = moves.MOVE_TO_ACTION['e7e5']
  rows = np.array(
    [
      np.concatenate([tokenizer.tokenize(board.fen()), [move, 5]]),
      np.concatenate([tokenizer.tokenize(mirrored.fen()), [priors.MIRROR_ACTION[move], 5]]),
    ],
    np.int32,
  )
  out = np.asarray(jax.jit(network.build(value).apply)(params, None, rows))  # [2, 79, V]
  np.testing.assert_allclose(out[0], out[1], atol=1e-5)

  cloning = dataclasses.replace(BASE, output_size=moves.NUM_ACTIONS, max_sequence_length=79, mover_view=True)
  params = _noisy(network.init_params(cloning))
  out = np.asarray(jax.jit(network.build(cloning, last_only=True).apply)(params, None, rows[:, :78]))  # [2, 1968]
  np.testing.assert_allclose(out[0], out[1, priors.MIRROR_ACTION], atol=1e-5)
  assert out[0].argmax() != out[1].argmax()  # A real move distribution, per board.
