"""The graph model (AlphaGateau): the tests that build, train or play models (slow).

The fast ones, and the helpers both use, are in tests/unit/test_graph.py.
"""

import dataclasses

import chess
import haiku as hk
import jax
import numpy as np
import pytest

from searchless import configs
from searchless.core import moves
from searchless.core import tokenizer
from searchless.model import board_graph
from searchless.model import graph
from searchless.model import network
from searchless.model.config import ModelConfig

from unit.test_graph import SMALL


KIWIPETE = 'r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1'


PROMOTIONS = '1r5k/P7/8/8/8/8/6pp/4K3 w - - 0 50'  # a7a8 / a7b8 in four pieces each.


@pytest.fixture(scope='module')
def small():
  params = network.init_params(SMALL)
  return params, jax.jit(network.build(SMALL).apply)


def _row(fen: str, board_moves) -> np.ndarray:
  return np.concatenate([tokenizer.tokenize(fen), [moves.MOVE_TO_ACTION[m.uci()] for m in board_moves]]).astype(
    np.int32
  )


class _Layer:
  """One Gateau layer (2 heads): its init and apply, each compiled as one program. Run op by op, every operation
  compiled a kernel of its own (seconds a test). The inputs but the parameters are the program's constants: the
  layer reads the groups' senders and masks as NumPy arrays while it is traced."""

  def __init__(self):
    self._layer = hk.without_apply_rng(hk.transform(lambda *a, **k: graph.Gateau(2, np.dtype('float32'))(*a, **k)))

  def init(self, rng, *args, **kwargs):
    return jax.jit(lambda key: self._layer.init(key, *args, **kwargs))(rng)

  def apply(self, params, *args, **kwargs):
    return jax.jit(lambda p: self._layer.apply(p, *args, **kwargs))(params)


@pytest.mark.slow
def test_node_update_is_permutation_equivariant():
  """Relabelling the nodes and reordering each node's edges relabels and reorders the outputs."""
  rng = np.random.default_rng(0)
  batch, nodes, slots, width, edge_width = 2, 7, 3, 8, 4
  senders = np.stack([rng.permutation(nodes)[:slots] for _ in range(nodes)]).astype(np.int32)  # A simple graph.
  mask = rng.random((nodes, slots)) < 0.7
  mask[:, 0] = True
  h = rng.normal(size=(batch, nodes, width)).astype(np.float32)
  e = rng.normal(size=(batch, nodes, slots, edge_width)).astype(np.float32)
  layer = _Layer()
  params = layer.init(jax.random.PRNGKey(0), h, [e], [board_graph.Group(senders, mask)])
  out_h, (out_e,) = layer.apply(params, h, [e], [board_graph.Group(senders, mask)])

  perm = rng.permutation(nodes)  # New node a is old node perm[a].
  inverse = np.argsort(perm)
  order = np.stack([rng.permutation(slots) for _ in range(nodes)])  # New slot k of new node a: old slot order[a, k].
  old_slot = order  # [N, K] per new node a
  new_group = board_graph.Group(inverse[senders[perm[:, None], old_slot]], mask[perm[:, None], old_slot])
  got_h, (got_e,) = layer.apply(params, h[:, perm], [e[:, perm[:, None], old_slot]], [new_group])
  np.testing.assert_allclose(got_h, np.asarray(out_h)[:, perm], rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(got_e, np.asarray(out_e)[:, perm[:, None], old_slot], rtol=1e-5, atol=1e-5)
  assert not np.allclose(got_h, out_h, atol=1e-3)  # The relabelling did change the node order.


@pytest.mark.slow
def test_regrouping_the_receivers_moves_their_slots_and_changes_nothing_else():
  """Receivers in two groups, each grid only as wide as its own in-degree: the one-grid layer's outputs."""
  rng = np.random.default_rng(1)
  batch, nodes, slots, width, edge_width = 2, 6, 4, 8, 4
  senders = np.stack([rng.permutation(nodes)[:slots] for _ in range(nodes)]).astype(np.int32)  # A simple graph.
  degree = np.array([4, 2, 4, 1, 3, 2])  # Real edges first, the rest padding.
  mask = np.arange(slots)[None] < degree[:, None]
  h = rng.normal(size=(batch, nodes, width)).astype(np.float32)
  e = rng.normal(size=(batch, nodes, slots, edge_width)).astype(np.float32)
  layer = _Layer()
  one = [board_graph.Group(senders, mask)]
  params = layer.init(jax.random.PRNGKey(0), h, [e], one)
  out_h, (out_e,) = (jax.tree.map(np.asarray, x) for x in layer.apply(params, h, [e], one))

  order = np.array([1, 3, 5, 4, 0, 2])  # New node a is old node order[a]: in-degrees <= 2, then 3-4.
  narrow, wide = order[:3], order[3:]
  to_new = np.argsort(order)
  two = [
    board_graph.Group(to_new[senders[narrow, :2]], mask[narrow, :2]),
    board_graph.Group(to_new[senders[wide]], mask[wide]),
  ]
  got_h, (narrow_e, wide_e) = (
    jax.tree.map(np.asarray, x) for x in layer.apply(params, h[:, order], [e[:, narrow, :2], e[:, wide]], two)
  )
  assert narrow_e.shape == (batch, 3, 2, edge_width)  # 18 slots in all, not 24.
  np.testing.assert_allclose(got_h, out_h[:, order], rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(narrow_e, out_e[:, narrow, :2], rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(wide_e, out_e[:, wide], rtol=1e-5, atol=1e-5)
  with pytest.raises(ValueError, match='each of the 6 nodes once as a receiver, got 9'):
    layer.apply(params, h, [e[:, narrow, :2], e], [two[0], board_graph.Group(senders, mask)])
  doubled = senders.copy()
  doubled[0, 1] = doubled[0, 0]  # Two edges from one sender into node 0.
  with pytest.raises(ValueError, match='two edges from one sender'):
    layer.apply(params, h, [e], [board_graph.Group(doubled, np.ones_like(mask))])


@pytest.mark.slow
def test_edges_from_a_table_and_edges_read_at_some_places_are_the_same_layer():
  """The first layer's `TabledEdges` (each slot a row of a table) and the last layer's `read` (the new edges at the
  move places only) compute what the layer on every slot's own edge does, at those places."""
  rng = np.random.default_rng(2)
  batch, nodes, slots, width, edge_width = 2, 6, 4, 8, 4
  senders = np.stack([rng.permutation(nodes)[:slots] for _ in range(nodes)]).astype(np.int32)
  mask = np.arange(slots)[None] < np.array([4, 2, 4, 1, 3, 2])[:, None]
  groups = [board_graph.Group(senders[:3], mask[:3]), board_graph.Group(senders[3:, :3], mask[3:, :3])]
  h = rng.normal(size=(batch, nodes, width)).astype(np.float32)
  table = rng.normal(size=(5, edge_width)).astype(np.float32)
  rows = [rng.integers(0, 5, size=(batch, *g.mask.shape)) for g in groups]
  edges = [table[r] for r in rows]  # [B, n, K, De] per group
  layer = _Layer()
  params = layer.init(jax.random.PRNGKey(0), h, edges, groups)
  out_h, out_e = (jax.tree.map(np.asarray, x) for x in layer.apply(params, h, edges, groups))
  tabled_h, tabled_e = (
    jax.tree.map(np.asarray, x) for x in layer.apply(params, h, graph.TabledEdges(table, rows), groups)
  )
  np.testing.assert_allclose(tabled_h, out_h, rtol=1e-5, atol=1e-5)
  for got, want in zip(tabled_e, out_e):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
  flat = np.concatenate([e.reshape(batch, -1, edge_width) for e in out_e], axis=1)  # [B, 12 + 9, De]
  places = np.array([[0, 20, 13], [5, 5, 12]])  # [B, M]: slots of both groups, one read twice.
  read = jax.tree.map(np.asarray, layer.apply(params, h, edges, groups, read=places))
  np.testing.assert_allclose(read[0], out_h, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(read[1], flat[np.arange(batch)[:, None], places], rtol=1e-5, atol=1e-5)
  assert read[1].shape == (batch, 3, edge_width)


@pytest.mark.slow
def test_inputs_are_the_board_in_the_movers_frame():
  board = chess.Board(KIWIPETE)
  x = jax.tree.map(np.asarray, board_graph.node_and_edge_inputs(_row(KIWIPETE, board.legal_moves)[None]))
  assert ''.join(board_graph.PIECES[p] for p in x['pieces'][0]) == ''.join(
    board_graph.PIECES[0] if board.piece_at(s) is None else board.piece_at(s).symbol() for s in chess.SQUARES
  )
  assert np.flatnonzero(x['castling'][0].any(axis=1)).tolist() == [chess.A1, chess.H1, chess.A8, chess.H8]
  assert x['en_passant'].sum() == 0 and x['clock'].tolist() == [0]
  legal_slots = {int(board_graph.SLOT_OF_ACTION[moves.MOVE_TO_ACTION[m.uci()]]) for m in board.legal_moves}
  assert set(np.flatnonzero(x['legal'][0]).tolist()) == legal_slots
  assert [(int(f), int(t)) for f, t in zip(x['from'][0], x['to'][0])] == [
    (m.from_square, m.to_square) for m in board.legal_moves
  ]
  # Lines are open when nothing stands strictly between their squares.
  open_of = lambda a, b: x['open'][0][board_graph.SLOT_OF_ACTION[moves.MOVE_TO_ACTION[a + b]]]
  assert open_of('e1', 'c1') == 1 and open_of('a1', 'a3') == 0  # a2 holds a pawn.
  black = chess.Board('rnbqkbnr/ppp1pppp/8/8/3pP3/8/PPPP1PPP/RNBQKBNR b Kq e3 0 3')
  xb = jax.tree.map(np.asarray, board_graph.node_and_edge_inputs(_row(black.fen(), black.legal_moves)[None]))
  assert np.flatnonzero(xb['en_passant'][0]).tolist() == [chess.E6]  # e3 seen from Black's side.
  assert np.flatnonzero(xb['castling'][0].any(axis=1)).tolist() == [chess.A1, chess.H8]  # Own q side, their K side.
  assert xb['pieces'][0][chess.D5] == board_graph.PIECES.index('P')  # Black's d4 pawn is the mover's pawn on d5.


@pytest.mark.slow
def test_a_board_and_its_colour_mirror_get_the_same_values(small):
  params, apply = small
  board = chess.Board(KIWIPETE)
  mirrored = board.mirror()
  mirrored_moves = [
    chess.Move(chess.square_mirror(m.from_square), chess.square_mirror(m.to_square), m.promotion)
    for m in board.legal_moves
  ]
  a = np.asarray(apply(params, None, _row(board.fen(), board.legal_moves)[None]))
  b = np.asarray(apply(params, None, _row(mirrored.fen(), mirrored_moves)[None]))
  np.testing.assert_array_equal(a, b)
  assert a.shape == (1, 48, 32)


@pytest.mark.slow
def test_the_edge_head_scores_exactly_the_given_moves(small):
  params, apply = small
  board = chess.Board(PROMOTIONS)
  legal = list(board.legal_moves)
  row = _row(PROMOTIONS, legal)
  out = np.asarray(apply(params, None, row[None]))[0]  # [M, V]
  assert out.shape == (len(legal), 32) and np.allclose(np.exp(out).sum(-1), 1.0, atol=1e-5)
  padded = np.concatenate([row, [-1] * 5])
  np.testing.assert_allclose(np.asarray(apply(params, None, padded[None]))[0, : len(legal)], out, atol=1e-6)
  reversed_row = np.concatenate([row[:77], row[77:][::-1]])
  np.testing.assert_allclose(np.asarray(apply(params, None, reversed_row[None]))[0], out[::-1], atol=1e-6)
  by_move = {m.uci(): out[i] for i, m in enumerate(legal)}
  assert not np.allclose(by_move['a7a8q'], by_move['a7a8n'], atol=1e-4)  # Same edge, different piece.
  assert not np.allclose(by_move['a7a8q'], by_move['a7b8q'], atol=1e-4)  # Different edges.


@pytest.mark.slow
def test_state_value_head_and_parameters(small):
  params, _ = small
  tokens = _row(KIWIPETE, chess.Board(KIWIPETE).legal_moves)[None]
  actions, state = jax.jit(network.build(SMALL, with_value=True).apply)(params, None, tokens)
  assert actions.shape == (1, 48, 32) and state.shape == (1, 32)
  assert {'value_in', 'value_out', 'move_in', 'move_out', 'inputs', 'gateau_1'} <= set(params)
  with pytest.raises(ValueError, match='only the graph model'):
    network.build(dataclasses.replace(SMALL, kind='transformer'), with_value=True)


@pytest.mark.slow
def test_without_open_lines_the_graph_is_the_graph_with_a_zero_open_flag(small):
  """The ablation `graph_open_lines=False` has no `open` table and computes what a zero table does."""
  params, apply = small
  ablated = dataclasses.replace(SMALL, graph_open_lines=False)
  ablated_params = network.init_params(ablated)
  assert set(ablated_params['inputs']) == set(params['inputs']) - {'open'}
  tokens = _row(KIWIPETE, chess.Board(KIWIPETE).legal_moves)[None]
  zeroed = {**params, 'inputs': {**params['inputs'], 'open': np.zeros_like(params['inputs']['open'])}}
  without = {**params, 'inputs': {k: v for k, v in params['inputs'].items() if k != 'open'}}
  out = np.asarray(jax.jit(network.build(ablated).apply)(without, None, tokens))
  np.testing.assert_array_equal(out, np.asarray(apply(zeroed, None, tokens)))
  assert not np.allclose(out, np.asarray(apply(params, None, tokens)), atol=1e-4)  # The flag is used when on.
  config = configs.load('graph_tiny', ['data.train=unused', 'model.graph_open_lines=False'])
  assert not ModelConfig.from_config(config).graph_open_lines
  with pytest.raises(ValueError, match='graph_open_lines is a graph option'):
    dataclasses.replace(SMALL, kind='transformer', packing='board', graph_open_lines=False)


@pytest.mark.slow
def test_graph_tiny_outputs_are_pinned_on_fixed_inputs():
  """What graph_tiny computes, pinned before its layer was rewritten for speed: the same function.

  Parameters are the seeded init plus seeded noise (so no layer-norm scale is 1 and no offset 0).
  """
  config = ModelConfig(
    kind='graph',
    embedding_dim=64,
    num_layers=4,
    num_heads=4,
    output_size=128,
    max_sequence_length=79,
    graph_edge_dim=32,
    seed=0,
  )
  fens = [KIWIPETE, KIWIPETE.replace(' w KQkq - 0 1', ' b KQkq - 3 1'), PROMOTIONS, chess.STARTING_FEN]
  rows, valid = [], []
  for fen in fens:
    actions = [moves.MOVE_TO_ACTION[m.uci()] for m in chess.Board(fen).legal_moves]
    rows.append(np.concatenate([tokenizer.tokenize(fen), actions, [-1] * (48 - len(actions))]))
    valid.append(len(actions))
  rng = np.random.default_rng(27)
  params = jax.tree.map(  # In NumPy: JAX's adds outside jit compile a kernel per shape.
    lambda p: np.asarray(p) + 0.2 * rng.standard_normal(p.shape).astype(np.float32), network.init_params(config)
  )
  action_values, state_values = (
    np.asarray(x) for x in jax.jit(network.build(config, with_value=True).apply)(params, None, np.array(rows, np.int32))
  )
  assert valid == [48, 43, 12, 20]
  np.testing.assert_allclose(
    [action_values[i, :n].sum() for i, n in enumerate(valid)],
    [-55477.469, -49229.75, -12737.309, -21326.688],
    rtol=1e-6,
  )
  np.testing.assert_allclose(
    [action_values[i, j, k] for i, j, k in [(0, 0, 0), (1, 5, 64), (2, 3, 127), (3, 19, 77)]],
    [-11.68081, -7.70469, -2.9911, -6.12822],
    atol=1e-4,
  )
  np.testing.assert_allclose(state_values[:, 64], [-8.38917, -7.40736, -8.52703, -8.33627], atol=1e-4)
  # Up to 2 boards run the edges as one [64, 36] grid, larger batches as three (`graph.ONE_GRID_ROWS`): the same
  # function.
  assert graph.ONE_GRID_ROWS == 2
  for part in (slice(0, 2), slice(2, 3)):
    got = jax.jit(network.build(config).apply)(params, None, np.array(rows[part], np.int32))
    np.testing.assert_allclose(np.asarray(got), action_values[part], rtol=1e-5, atol=1e-4)


def test_inference_runs_a_large_batch_in_passes_with_the_same_numbers(small):
  params, apply = small
  fens = [chess.STARTING_FEN, KIWIPETE, PROMOTIONS]
  rows = []
  for i in range(48):
    board = chess.Board(fens[i % 3])
    legal = list(board.legal_moves)[i % 5 :]
    rows.append(np.concatenate([_row(board.fen(), legal), np.full(48 - len(legal), -1, np.int32)]))
  rows = np.stack(rows)  # [48, 77 + 48]
  inference = network.jit_inference(SMALL)
  # 48 boards: three passes of `graph.PASS_ROWS` in one call (a loop in the compiled program); 20: one pass.
  assert graph.PASS_ROWS == 16
  assert 'while' in inference.lower(params, None, rows).as_text()
  assert 'while' not in inference.lower(params, None, rows[:20]).as_text()
  assert '__ynn_fusion' not in inference.lower(params, None, rows[:20]).compile().as_text()
  for batch in (rows, rows[:20]):
    np.testing.assert_allclose(
      np.asarray(inference(params, None, batch)), np.asarray(apply(params, None, batch)), rtol=1e-5, atol=1e-5
    )
