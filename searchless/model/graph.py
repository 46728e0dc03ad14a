"""The graph predictor (AlphaGateau, Rigaux & Kashima 2024): squares as nodes, moves as edges.

The graph, its edges' layout and a board's node and edge inputs are `searchless.model.board_graph`.

Layers are GATEAU (GATv2 with edge features, the edges updated too), pre-
LayerNorm and residual, each followed by a SwiGLU MLP on the nodes:

    z_ij   = W_s h_i + W_r h_j + W_e e_ij              (width De, per head; edge i -> j)
    a_ij   = softmax_{i into j}( w . LeakyReLU(z_ij) )
    h_j   += W_o [sum_i a_ij V h_i ; sum_i a_ij W_e e_ij]
    e_ij  += U GELU(z_ij)

The input is exactly the board-packed transformer's row, ``[B, 77 + M]``
(77 FEN tokens, M move tokens, -1 in unused slots), and the output is the
same, ``[B, M, V]`` log-probabilities of each move's value bucket, read from
the move's edge (its final features, its two squares' node features and its
promotion piece). With ``with_value`` the model also returns the board's
state value ``[B, V]`` from the mean of its nodes. So the trainer, loader,
checkpoints, `PackedPredictor`, Player and UCI engine take it as they are.

Two economies leave the function as it is: an edge's input is one of 264 rows
(its type, open line and legality), so the first layer projects those rows once
(`TabledEdges`), not every slot; and the last layer's new edges are read at the
move slots only, so it makes them there alone (`Gateau`'s `read`).

>>> from searchless.model import network
>>> cfg = ModelConfig(kind='graph', embedding_dim=16, num_layers=2, num_heads=2,
...                   output_size=128, max_sequence_length=79, graph_edge_dim=8)
>>> params = network.init_params(cfg)
>>> network.num_params(params)
15968
>>> tokens = np.zeros((2, 77 + 3), np.int32); tokens[:, -1] = -1  # 2 boards, 3 move slots, 1 unused.
>>> jax.jit(network.build(cfg).apply)(params, None, tokens).shape  # [B, M, V]
(2, 3, 128)
"""

import math
from typing import Any, NamedTuple, Sequence

import chess
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from searchless.core import moves
from searchless.core import tokenizer
from searchless.model import board_graph
from searchless.model import layers
from searchless.model.config import ModelConfig


# Batches of up to `ONE_GRID_ROWS` boards run the edges as one [64, 36] grid (`board_graph.ONE_GRID`), larger
# ones as the three grids. In small batches the tensors fit the caches and the number of kernels is what
# costs, and three grids take 1.6-1.8x as long to compile (1.7 against 2.7 s for a forward pass, 4.6
# against 8.4 s for a gradient), which a UCI engine's first move and every test pay. Measured on 2 idle
# cores (XLA:CPU), graph_tiny, one grid against three, gradient / forward pass in ms: 1 board 8.7 / 2.5
# against 8.9 / 1.8; 2 boards (the campaign's micro-batches) 9.5 / 2.5 against 11.8 / 3.1; 4 boards
# 32.2 / 4.2 against 29.7 / 3.5; 32 boards 252 / 46 against 209 / 36.
ONE_GRID_ROWS = 2

# Boards per pass in inference (`network.jit_inference`): a larger batch runs in passes of this many. Measured
# on 2 idle cores (XLA:CPU), the shipped model's forward pass at 48 move slots: 16 boards 17.5 ms, 32 boards 44.6
# ms, 64 boards 99 ms (4 x 16 one after the other: 73 ms).
PASS_ROWS = 16

# The modules of a layer that write into the node and edge streams (`Gateau`'s `out` and `edge_out`, the MLP's
# down projection `linear_2`): at zero the layer is the identity (`training.grow` starts new layers so).
RESIDUAL_WRITERS = ('out', 'edge_out', 'linear_2')


def _one_grid(boards: Any) -> bool:
  """Whether a pass of `boards` boards runs the one grid: a concrete batch of at most `ONE_GRID_ROWS`.

  A symbolic batch (an exported forward function, `model.export`) serves every size: the three grids.
  """
  return isinstance(boards, int) and boards <= ONE_GRID_ROWS


class _LayerNormParameters(hk.Module):
  """The scale and offset of an `hk.LayerNorm` over the last axis (the same names and initial values)."""

  def __call__(self, width: int) -> tuple[jax.Array, jax.Array]:
    scale = hk.get_parameter('scale', (width,), jnp.float32, init=jnp.ones)
    offset = hk.get_parameter('offset', (width,), jnp.float32, init=jnp.zeros)
    return scale, offset


class _LinearWeights(hk.Module):
  """The weights of an `hk.Linear` without bias (the same name, shape and initialiser)."""

  def __call__(self, fan_in: int, fan_out: int) -> jax.Array:
    init = hk.initializers.TruncatedNormal(1.0 / np.sqrt(fan_in))
    return hk.get_parameter('w', (fan_in, fan_out), jnp.float32, init=init)


def _normalized(x: jax.Array) -> jax.Array:
  """`hk.LayerNorm`'s normalisation over the last axis (float32, epsilon 1e-5), without scale and offset."""
  x = x.astype(jnp.float32)
  mean = jnp.mean(x, axis=-1, keepdims=True)
  variance = jnp.var(x, axis=-1, keepdims=True)
  return (x - mean) * jax.lax.rsqrt(variance + 1e-5)


def _slot_of_sender(group: board_graph.Group, num_nodes: int) -> np.ndarray:
  """[n, N]: the slot of the edge from node m into the group's receiver i, or K (past the slots) where none."""
  receivers, slots = group.mask.shape
  index = np.full((receivers, num_nodes), slots)
  i, k = np.nonzero(group.mask)
  if len(np.unique(i * num_nodes + group.senders[i, k])) != len(i):
    raise ValueError('a receiver has two edges from one sender: the graph must be simple')
  index[i, group.senders[i, k]] = k
  return index


class Gateau(hk.Module):
  """One GATEAU layer: GATv2 attention with edge features, nodes and edges updated (pre-LN, residual).

  Edges are grouped by receiver (`Group`): group g's receivers are the next n_g
  nodes, and ``edges[g]`` [B, n_g, K_g, De] holds their incoming edges, slot k of
  its i-th receiver being the edge from node ``senders[i, k]``, real where
  ``mask[i, k]``. Any simple graph fits (no two edges from one sender into one
  receiver), in any grouping: relabelling the nodes (and reordering each node's
  edges) relabels the outputs, and regrouping the receivers only moves their slots.
  """

  def __init__(self, num_heads: int, compute_dtype: jnp.dtype, name: str | None = None):
    super().__init__(name=name)
    self._num_heads = num_heads
    self._compute_dtype = compute_dtype

  def __call__(
    self,
    h: jax.Array,
    edges: Sequence[jax.Array] | 'TabledEdges',
    groups: Sequence[board_graph.Group],
    *,
    read: jax.Array | None = None,
  ) -> tuple[jax.Array, tuple[jax.Array, ...] | jax.Array]:
    """h [B, N, D], edges [B, n_g, K_g, De] per group -> (h [B, N, D], edges [B, n_g, K_g, De] per group).

    `edges` may be `TabledEdges` (rows of a table and each slot's row, per group): the same layer, its edge
    projection made once per row instead of once per slot. With `read` ([B, M] places in the groups' slots
    flattened one after the other) the new edges are made only there: (h, edges [B, M, De]).
    """
    batch, num_nodes, width = h.shape
    if sum(len(g.mask) for g in groups) != num_nodes:
      raise ValueError(
        f'the groups must hold each of the {num_nodes} nodes once as a receiver, got {sum(len(g.mask) for g in groups)}'
      )
    tabled = edges if isinstance(edges, TabledEdges) else None
    edge_width = (tabled.table if tabled else edges[0]).shape[-1]
    heads = self._num_heads
    dtype = self._compute_dtype
    hn = layers.layer_norm(h).astype(dtype)  # [B, N, D]
    # The edges' LayerNorm is folded into the one linear map that reads it: LN(e) W = norm(e) (scale W) + offset W.
    # The same function and parameters (`layer_norm_1`, `edge`), but no [B, n, K, De] scale and offset passes
    # (about 10% of a training step on XLA:CPU).
    edge_scale, edge_offset = _LayerNormParameters(name='layer_norm_1')(edge_width)
    sender_w = _LinearWeights(name='sender')(width, edge_width)  # [D, De]
    receiver_w = _LinearWeights(name='receiver')(width, edge_width)
    edge_w = _LinearWeights(name='edge')(edge_width, edge_width)  # [De, De]
    project = lambda e: (
      _normalized(e).astype(dtype) @ (edge_scale[:, None] * edge_w).astype(dtype) + (edge_offset @ edge_w).astype(dtype)
    )  # [..., De]: LN(e) W_e.
    split = lambda x: x.reshape(*x.shape[:-1], heads, x.shape[-1] // heads)  # [..., H, De/H]
    score = hk.get_parameter(
      'score',
      (heads, edge_width // heads),
      jnp.float32,
      init=hk.initializers.TruncatedNormal(1.0 / math.sqrt(edge_width // heads)),
    )
    value_w = _LinearWeights(name='value')(width, width)  # [D, D]
    # The three node projections as one matmul (the same weights, names and initial values as their hk.Linear;
    # fewer, larger kernels: 3% of a training step on XLA:CPU, RESULTS "Where a micro-batched graph step goes").
    projected = hn @ jnp.concatenate([sender_w, receiver_w, value_w], axis=1).astype(dtype)  # [B, N, 2 De + D]
    to_sender, to_receiver = projected[..., :edge_width], projected[..., edge_width : 2 * edge_width]
    value = split(projected[..., 2 * edge_width :])  # [B, N, H, D/H]
    if tabled:  # Each slot's edge and its projection are rows of the table: R rows projected, not S slots.
      edges = [tabled.table[rows] for rows in tabled.rows]
      from_table = project(tabled.table)  # [R, De]
    pooled, zs, start = [], [], 0
    for g, (e, group) in enumerate(zip(edges, groups)):
      count = len(group.mask)
      from_edge = from_table[tabled.rows[g]] if tabled else project(e)  # [B, n, K, De]
      z = to_sender[:, group.senders] + to_receiver[:, start : start + count, None] + from_edge  # [B, n, K, De]
      start += count
      # Each head's score: a product and a sum over its De/H features, fused with LeakyReLU in one pass over z
      # (as a [De, H] block-diagonal matmul it was a pass of its own: 9% of an inference pass of 16 boards).
      logits = jnp.sum(
        split(jax.nn.leaky_relu(z, 0.2).astype(jnp.float32) * score.reshape(-1)), axis=-1
      )  # [B, n, K, H]
      logits = jnp.where(jnp.asarray(group.mask)[None, :, :, None], logits, jnp.finfo(jnp.float32).min)
      weights = jax.nn.softmax(logits, axis=2).astype(dtype)  # Over each receiver's incoming edges.
      # Node messages through a dense [n, N] attention matrix per head (no [B, n, K, D] gather): A[j, i] = the
      # weight of edge i -> j, read from the weights by a fixed index (an empty slot's 0 where there is no edge).
      # As a product with the one-hot incidence [n, K, N] it cost 6% of an inference pass of 16 boards, 24% of 1 board.
      padded = jnp.pad(weights, ((0, 0), (0, 0), (0, 1), (0, 0)))  # [B, n, K + 1, H]
      attention = padded[:, np.arange(count)[:, None], _slot_of_sender(group, num_nodes)]  # [B, n, N, H]
      from_nodes = jnp.einsum('bnmh,bmhd->bnhd', attention, value).reshape(batch, count, width)
      from_edges = jnp.einsum('bnkh,bnkhd->bnhd', weights, split(from_edge)).reshape(batch, count, edge_width)
      pooled.append(jnp.concatenate([from_nodes, from_edges], axis=-1))  # [B, n, D + De]
      zs.append(z)
    h = h + hk.Linear(width, with_bias=False, name='out')(jnp.concatenate(pooled, axis=1)).astype(jnp.float32)
    # Made after `out`, as the hk.Linear it replaces was (the same initial values); in the compute dtype, as
    # `network.build` casts an hk.Linear's weights.
    edge_out = _LinearWeights(name='edge_out')(edge_width, edge_width).astype(dtype)  # [De, De]
    update = lambda e, z: e + (jax.nn.gelu(z) @ edge_out).astype(jnp.float32)
    if read is None:
      return h, tuple(update(e, z) for e, z in zip(edges, zs))
    # Only the slots read: the other edges' update (a GELU and a matmul over every slot) is never made.
    at = jnp.arange(batch)[:, None], read
    flat = lambda grids: jnp.concatenate([x.reshape(batch, -1, edge_width) for x in grids], axis=1)  # [B, P, De]
    return h, update(flat(edges)[at], flat(zs)[at])  # [B, M, De]


class TabledEdges(NamedTuple):
  """Edges whose features take few values: rows of `table` [R, De], and per group the row of each slot [B, n, K]."""

  table: jax.Array
  rows: Sequence[jax.Array | np.ndarray]


def _mlp(h: jax.Array, width: int, widening: int, dtype: jnp.dtype, name: str) -> jax.Array:
  """SwiGLU on [..., D] (pre-LN), the transformer's MLP."""
  with hk.name_scope(name):
    x = layers.layer_norm(h).astype(dtype)
    # Gate and up as one matmul (the hk.Linear names `linear` and `linear_1`, their initial values).
    gate_w = _LinearWeights(name='linear')(width, widening * width)
    up_w = _LinearWeights(name='linear_1')(width, widening * width)
    gate, up = jnp.split(x @ jnp.concatenate([gate_w, up_w], axis=1).astype(dtype), 2, axis=-1)
    return hk.Linear(width, with_bias=False, name='linear_2')(jax.nn.silu(gate) * up).astype(jnp.float32)


def forward(
  tokens: jax.Array, config: ModelConfig, compute_dtype: jnp.dtype, with_value: bool = False
) -> jax.Array | tuple[jax.Array, jax.Array]:
  """[B, 77 + M] tokens -> [B, M, V] log-probs per move slot (and [B, V] state-value log-probs)."""
  num_moves = tokens.shape[1] - tokenizer.SEQUENCE_LENGTH
  if num_moves < 1:
    raise ValueError(f'a graph board needs 77 FEN tokens and at least one move slot, got {tokens.shape[1]} tokens')
  x = board_graph.node_and_edge_inputs(tokens)
  width, edge_width = config.embedding_dim, config.graph_edge_dim
  init = hk.initializers.TruncatedNormal(config.emb_init_scale)
  table = lambda name, rows, dim: hk.get_parameter(name, (rows, dim), jnp.float32, init=init)
  nodes = board_graph.NODE_ORDER  # Node i of the network is square board_graph.NODE_ORDER[i].
  with hk.name_scope('inputs'):
    h = (
      table('piece', len(board_graph.PIECES), width)[x['pieces'][:, nodes]]  # [B, 64, D]
      + table('square', board_graph.NUM_SQUARES, width)[nodes][None]
      + jnp.einsum('bnc,cd->bnd', x['castling'][:, nodes], table('castling', 4, width))
      + x['en_passant'][:, nodes, None] * table('en_passant', 1, width)
      + table('clock', board_graph.CLOCK_BUCKETS, width)[x['clock']][:, None]
    )
    one_grid = _one_grid(tokens.shape[0])
    # The edges' inputs, made in the grids' own layout (P places): the one grid's (its padding reaches no real
    # edge), or the flat slots, the three grids one after the other.
    if one_grid:
      source = board_graph.ONE_GRID_SOURCE  # [P = 2304]
      open_line, legal, types = x['open'][:, source], x['legal'][:, source], board_graph.ONE_GRID_TYPES
    else:
      open_line, legal, types = x['open'], x['legal'], board_graph.SLOT_TYPES  # [B, P = S], [B, S], [S]
    # An edge's input is one of R = 66 x 2 x 2 rows: its type's, plus the open line's and the legal move's when
    # they hold. Each slot holds its row's index; the first layer projects the R rows, not the S slots.
    rows = table('edge_type', board_graph.NUM_EDGE_TYPES, edge_width)[:, None, None]  # [66, 1, 1, De]
    flag = np.array([0.0, 1.0], np.float32)[:, None]  # [2, 1]
    if config.graph_open_lines:  # Off only to measure what the flag is worth (an ablation).
      rows = rows + (flag * table('open', 1, edge_width))[None, :, None]
    rows = rows + (flag * table('legal', 1, edge_width))[None, None]  # [66, 2 or 1, 2, De]
    rows = jnp.broadcast_to(rows, (board_graph.NUM_EDGE_TYPES, 2, 2, edge_width))  # [66, 2, 2, De]
    row_of_slot = types * 4 + open_line.astype(jnp.int32) * 2 + legal.astype(jnp.int32)  # [B, P]
    promotion = table('promotion', 5, width)[x['promotion']]  # [B, M, D]
  groups = (board_graph.ONE_GRID,) if one_grid else board_graph.GROUPS
  slots = np.cumsum([0] + [g.mask.size for g in groups])  # Each grid's places in the flat edge tensor.
  # The first layer's edges; then [B, n, K, De] per grid; after the last layer, [B, M, De] at the moves' places.
  edges: Any = TabledEdges(
    rows.reshape(-1, edge_width),  # [R, De]
    [row_of_slot[:, start:end].reshape(-1, *g.mask.shape) for g, start, end in zip(groups, slots, slots[1:])],
  )  # [B, n, K] per grid
  place = jnp.asarray(board_graph.ONE_GRID_PLACE)[x['slot']] if one_grid else x['slot']  # [B, M]
  for layer in range(config.num_layers):
    last = layer == config.num_layers - 1  # Its edges are read at the moves' places only.
    gateau = Gateau(config.num_heads, compute_dtype, name=f'gateau_{layer}')
    h, edges = gateau(h, edges, groups, read=place if last else None)
    h = h + _mlp(h, width, config.widening_factor, compute_dtype, f'mlp_{layer}')
  h = layers.layer_norm(h)  # [B, 64, D], nodes in board_graph.NODE_ORDER.
  batch = jnp.arange(tokens.shape[0])[:, None]
  of_square = jnp.asarray(board_graph.NODE_OF_SQUARE)
  # The moves' edges (the last layer made only those), then their LayerNorm (per edge, as for every slot).
  move = jnp.concatenate(
    [layers.layer_norm(edges), h[batch, of_square[x['from']]], h[batch, of_square[x['to']]]], axis=-1
  )  # [B, M, De + 2D]
  move = hk.Linear(width, name='move_in')(move.astype(compute_dtype)) + promotion
  logits = hk.Linear(config.output_size, name='move_out')(jax.nn.gelu(move).astype(compute_dtype))  # [B, M, V]
  action_values = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  # The state-value head is always built (its parameters are in every checkpoint); jit drops it when unused.
  pooled = jnp.mean(h, axis=1).astype(compute_dtype)  # [B, D]
  value = hk.Linear(config.output_size, name='value_out')(jax.nn.gelu(hk.Linear(width, name='value_in')(pooled)))
  state_value = jax.nn.log_softmax(value.astype(jnp.float32), axis=-1)  # [B, V]
  return (action_values, state_value) if with_value else action_values


def flops_per_board(config: ModelConfig, num_moves: int, boards_per_pass: int | None = None) -> int:
  """Forward matmul FLOPs of one board with `num_moves` move slots (2 x multiply-accumulates).

  Per layer, on N = 64 nodes: the score and value projections (2 N D De + N D^2),
  the output projection (N (D + De) D), the dense attention matrix and its use
  (S N H + N^2 D) and the SwiGLU (3 w N D^2); on the S = 1904 edge slots
  (1856 edges and the grids' padding): the edge projection (S De^2, but in the
  first layer, which projects its 264 table rows once a pass) and the edge update
  (S De^2, but in the last layer, which updates the M move slots only). Then the
  move read-out (M (De + 2D) D + M D V) and the occupancy test (S * 64). Passes of
  at most `ONE_GRID_ROWS` boards (`boards_per_pass`, e.g. the trainer's
  micro-batch) run the one padded grid: S = 64 x 36 = 2304.

  >>> cfg = ModelConfig(kind='graph', embedding_dim=64, num_layers=4, num_heads=4,
  ...                   output_size=128, max_sequence_length=79, graph_edge_dim=32)
  >>> flops_per_board(cfg, 64), flops_per_board(cfg, 64, boards_per_pass=2)  # Three grids; the one grid.
  (64632832, 70367232)
  """
  d, de, w = config.embedding_dim, config.graph_edge_dim, config.widening_factor
  n, h, layers_ = board_graph.NUM_SQUARES, config.num_heads, config.num_layers
  slots = board_graph.ONE_GRID.mask.size if _one_grid(boards_per_pass) else board_graph.NUM_SLOTS
  nodes = 2 * n * d * de + n * d * d + n * (d + de) * d + slots * n * h + n * n * d + 3 * w * n * d * d
  edges = 2 * (layers_ - 1) * slots * de * de + num_moves * de * de  # Projections, then updates.
  read_out = num_moves * (de + 2 * d) * d + num_moves * d * config.output_size
  return 2 * (layers_ * nodes + edges + read_out + board_graph.NUM_SLOTS * board_graph.NUM_SQUARES)


def init_tokens() -> np.ndarray:
  """[1, 78] tokens to initialise the graph model with: the start position and one move slot."""
  return np.concatenate([tokenizer.tokenize(chess.STARTING_FEN), [moves.MOVE_TO_ACTION['e2e4']]])[None].astype(np.int32)
