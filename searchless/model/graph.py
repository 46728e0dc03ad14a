"""The graph predictor (AlphaGateau, Rigaux & Kashima 2024): squares as nodes, moves as edges.

A board is a graph of 64 nodes (the squares) and a fixed set of directed edges:
every (from, to) pair a queen or a knight could move between on an empty board
(the 1792 from/to pairs of the 1968-move vocabulary; promotions share their
pawn move's edge) and a self-loop per square, 1856 in all. Node features are
the piece on the square, the square, castling rights (on the rook's square),
the en-passant square, and, on every node, the half-move clock. Edge features
are the relation's displacement (one of 64 queen/knight steps, or 'self'),
whether the line is open (no piece strictly between the two squares, from
the board; ``graph_open_lines=False`` leaves it out, an ablation) and whether
it is a legal move of the side to move (from the input's move slots).
Everything is seen from the mover's side, as AlphaZero and Leela do: for
Black the board is mirrored and the colours swapped, so one set of weights
plays both colours.

Why every queen/knight relation and not only the legal moves: AlphaGateau's
graph has an edge for every move either side could ever make, with legality
as an edge feature. A graph of the legal moves alone has no edge from an
enemy piece or a blocked one, so threats reach a square only through
several hops; the fixed graph carries them in one, and its shapes are the
same for every board (no padding of edges, one compilation). It costs
E = 1856 edge updates per layer, which is why edges are narrower than nodes
(``graph_edge_dim``).

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

>>> from searchless.model import transformer
>>> cfg = transformer.ModelConfig(kind='graph', embedding_dim=16, num_layers=2, num_heads=2,
...                               output_size=128, max_sequence_length=79, graph_edge_dim=8)
>>> params = transformer.init_params(cfg)
>>> transformer.num_params(params)
15968
>>> tokens = np.zeros((2, 77 + 3), np.int32); tokens[:, -1] = -1  # 2 boards, 3 move slots, 1 unused.
>>> transformer.build(cfg).apply(params, None, tokens).shape  # [B, M, V]
(2, 3, 128)
"""

import itertools
import math
from typing import Any, NamedTuple, Sequence

import chess
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from searchless.core import moves
from searchless.core import tokenizer
from searchless.model import layers
from searchless.model.config import ModelConfig


NUM_SQUARES = 64


def _relations() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """The queen/knight (from, to) square pairs in vocabulary order, each as [R] arrays, and each action's pair [1968]."""
  pairs: dict[tuple[int, int], int] = {}
  of_action = np.empty(moves.NUM_ACTIONS, np.int32)
  for action, uci in enumerate(moves.ACTION_TO_MOVE):
    move = chess.Move.from_uci(uci)
    of_action[action] = pairs.setdefault((move.from_square, move.to_square), len(pairs))
  senders, receivers = (np.array(side, np.int32) for side in zip(*pairs))
  return senders, receivers, of_action


_REL_SENDERS, _REL_RECEIVERS, _REL_OF_ACTION = _relations()
NUM_RELATIONS = len(_REL_SENDERS)  # 1792: every promotion's from/to pair is also a queen step.
NUM_EDGES = NUM_RELATIONS + NUM_SQUARES  # 1856: the relations and a self-loop per square.

# Edges are laid out by receiver, in groups of receivers with about the same in-degree: group g is a
# dense [n_g, K_g, De] grid of slots (K_g = its largest in-degree). Attention is then a softmax over each
# grid's K axis and pooling a sum over it, no scatter (2x faster than segment sums on XLA:CPU), and the
# per-edge work runs on S = 1904 slots for the 1856 edges, where one grid of K = 36 (the largest
# in-degree) has 2304 (24% padding). Inside the network the nodes are ordered group by group
# (`NODE_ORDER`), so a group's receivers are consecutive nodes: no gather per layer. Padding slots are
# masked; which slots exist never changes what the model computes.
_INCOMING = [[(int(s), e) for e, (s, r) in enumerate(zip(_REL_SENDERS, _REL_RECEIVERS)) if r == node] + [(node, -1)]
             for node in range(NUM_SQUARES)]  # Per receiver: (sender, relation or -1 for the self-loop).
IN_DEGREE = np.array([len(edges) for edges in _INCOMING], np.int32)  # [64]: 24 (corners) .. 36 (centre).
NUM_GROUPS = 3  # 1904 slots (2.6% padding); 4 groups: 1880, 2: 2016, 1: 2304.


def _groups(num_groups: int) -> list[np.ndarray]:
  """The receiving squares of each group, by in-degree: the contiguous split of the sorted degrees with the fewest slots."""
  order = np.argsort(IN_DEGREE, kind='stable')  # Squares by in-degree, then square.
  degrees = IN_DEGREE[order]
  best: tuple[int, tuple[int, ...]] | None = None
  for cuts in itertools.combinations(range(1, NUM_SQUARES), num_groups - 1):
    bounds = (0, *cuts, NUM_SQUARES)
    slots = sum((end - start) * int(degrees[end - 1]) for start, end in zip(bounds, bounds[1:]))
    if best is None or slots < best[0]:
      best = (slots, bounds)
  assert best is not None
  return [order[start:end].astype(np.int32) for start, end in zip(best[1], best[1][1:])]


class Group(NamedTuple):
  """The next n nodes as receivers, their incoming edges one dense [n, K] grid of slots."""
  senders: np.ndarray  # [n, K]: the sending node of each slot (padding: any node).
  mask: np.ndarray  # [n, K]: a real edge.


_GROUP_SQUARES = _groups(NUM_GROUPS)
NODE_ORDER = np.concatenate(_GROUP_SQUARES)  # [64]: the square of each node inside the network.
NODE_OF_SQUARE = np.argsort(NODE_ORDER).astype(np.int32)  # [64]: the node of each square.
_SLOT_SQUARES = []  # Per group: [n, K] sending squares (padding: the receiver), [n, K] receiving squares, [n, K] mask.
for _squares in _GROUP_SQUARES:
  _width = int(IN_DEGREE[_squares].max())
  _senders = np.repeat(_squares[:, None], _width, axis=1)
  _mask = np.arange(_width)[None] < IN_DEGREE[_squares][:, None]
  for _i, _square in enumerate(_squares):
    _senders[_i, :IN_DEGREE[_square]] = [sender for sender, _ in _INCOMING[_square]]
  _SLOT_SQUARES.append((_senders, np.repeat(_squares[:, None], _width, axis=1), _mask))
GROUPS = tuple(Group(NODE_OF_SQUARE[senders], mask) for senders, _, mask in _SLOT_SQUARES)
# The same edges as one [64, 36] grid (each group's rows padded to the largest in-degree), for a batch of
# `ONE_GRID_ROWS` boards: the campaign's micro-batches. There a training step's tensors fit the caches and
# the number of kernels is what costs. Measured on 2 idle cores (XLA:CPU), graph_tiny, one grid against
# three, gradient / forward pass in ms: 1 board 8.7 / 2.5 against 8.9 / 1.8; 2 boards 9.5 / 2.5 against
# 11.8 / 3.1; 4 boards 32.2 / 4.2 against 29.7 / 3.5; 32 boards 252 / 46 against 209 / 36.
ONE_GRID_ROWS = 2
MAX_IN_DEGREE = int(IN_DEGREE.max())  # 36
ONE_GRID = Group(np.concatenate([np.pad(g.senders, ((0, 0), (0, MAX_IN_DEGREE - g.mask.shape[1])), mode='edge')
                                 for g in GROUPS]),
                 np.concatenate([np.pad(g.mask, ((0, 0), (0, MAX_IN_DEGREE - g.mask.shape[1]))) for g in GROUPS]))
NUM_SLOTS = sum(g.mask.size for g in GROUPS)  # S = 1904: the groups' slots, flattened one after the other.
SLOT_SENDER = np.concatenate([senders.reshape(-1) for senders, _, _ in _SLOT_SQUARES])  # [S]: the sending square.
SLOT_RECEIVER = np.concatenate([receivers.reshape(-1) for _, receivers, _ in _SLOT_SQUARES])  # [S]
SLOT_MASK = np.concatenate([mask.reshape(-1) for _, _, mask in _SLOT_SQUARES])  # [S]: a real edge.
_SLOT_OF_PAIR = {(int(s), int(r)): flat for flat, (s, r, real) in enumerate(zip(SLOT_SENDER, SLOT_RECEIVER, SLOT_MASK))
                 if real and s != r}
_SLOT_OF_RELATION = np.array([_SLOT_OF_PAIR[int(s), int(r)] for s, r in zip(_REL_SENDERS, _REL_RECEIVERS)], np.int32)
SLOT_OF_ACTION = _SLOT_OF_RELATION[_REL_OF_ACTION]  # [1968]: the flat slot of each move's edge.


def _slot_types() -> tuple[np.ndarray, int]:
  """[S] int32: each slot's (rank step, file step) as an id; self-loops and padding get the last two."""
  steps = {(int(r // 8 - s // 8), int(r % 8 - s % 8)) for s, r in zip(_REL_SENDERS, _REL_RECEIVERS)}
  ids = {step: i for i, step in enumerate(sorted(steps))}  # 56 queen + 8 knight steps.
  types = np.full(NUM_SLOTS, len(ids) + 1, np.int32)  # Padding.
  for flat, (s, r, real) in enumerate(zip(SLOT_SENDER, SLOT_RECEIVER, SLOT_MASK)):
    if real:
      types[flat] = len(ids) if s == r else ids[(int(r // 8 - s // 8), int(r % 8 - s % 8))]
  return types, len(ids) + 2


SLOT_TYPES, NUM_EDGE_TYPES = _slot_types()  # [S], 66


def _between() -> np.ndarray:
  """[S, 64] float32: 1 on the squares strictly between a slot's two squares (knight steps: none)."""
  out = np.zeros((NUM_SLOTS, NUM_SQUARES), np.float32)
  for flat, (s, r) in enumerate(zip(SLOT_SENDER, SLOT_RECEIVER)):
    out[flat, list(chess.SquareSet.between(int(s), int(r)))] = 1.0
  return out


BETWEEN = _between()

# The mirror (rank flip) of a square and of a move's slot: Black's board seen as White's.
MIRROR_SQUARE = np.array([chess.square_mirror(s) for s in range(NUM_SQUARES)], np.int32)
MIRROR_SLOT = np.zeros(NUM_SLOTS, np.int32)  # Relation slots only; others unused.
MIRROR_SLOT[_SLOT_OF_RELATION] = [_SLOT_OF_PAIR[int(MIRROR_SQUARE[s]), int(MIRROR_SQUARE[r])]
                                  for s, r in zip(_REL_SENDERS, _REL_RECEIVERS)]

# Actions -> their promotion piece (0: none, 1..4: q r b n).
PROMOTION_OF_ACTION = np.array([' qrbn'.index(uci[4]) if len(uci) == 5 else 0 for uci in moves.ACTION_TO_MOVE], np.int32)

# FEN token layout (`tokenizer`): side, 64 squares a8..h1, 4 castling, 2 en passant, 3 half-move clock, 3 full-move.
_T = tokenizer.CHARACTER_TO_TOKEN
SQUARE_TOKEN = np.array([1 + (7 - s // 8) * 8 + s % 8 for s in range(NUM_SQUARES)], np.int32)  # Square -> token index.
_CASTLING_AT, _EP_AT, _CLOCK_AT = 65, 69, 71
PIECES = '.PNBRQKpnbrqk'  # Node piece classes: empty, the mover's six, the opponent's six (mover's frame).
_PIECE_OF_TOKEN = np.zeros(len(tokenizer.CHARACTERS), np.int32)  # White to move: token -> class.
_SWAPPED_PIECE_OF_TOKEN = np.zeros(len(tokenizer.CHARACTERS), np.int32)  # Black to move.
for _char, _token in _T.items():
  if _char in PIECES[1:]:
    _PIECE_OF_TOKEN[_token] = PIECES.index(_char)
    _SWAPPED_PIECE_OF_TOKEN[_token] = PIECES.index(_char.swapcase())
# Castling rights in the mover's frame: (own king side, own queen side, their king side, their queen side),
# each marked on the rook's home square as the mover sees it (h1, a1, h8, a8).
_CASTLING_SQUARES = np.array([chess.H1, chess.A1, chess.H8, chess.A8], np.int32)
_CLOCK_BUCKETS = 21  # Half-move clock // 5, capped: 0-4, 5-9, ..., 100+.


def node_and_edge_inputs(tokens: jax.Array) -> dict[str, jax.Array]:
  """[B, 77 + M] packed tokens -> the graph's integer and flag inputs, in the mover's frame.

  Returns pieces [B, 64] (classes of `PIECES`), castling [B, 64, 4] and
  en_passant [B, 64] flags, clock [B] buckets, open [B, S] and legal [B, S]
  edge flags, and per move: its edge's flat slot [B, M], from/to squares [B, M], promotion [B, M], valid [B, M].
  """
  fen = tokens[:, :tokenizer.SEQUENCE_LENGTH]  # [B, 77]
  actions = tokens[:, tokenizer.SEQUENCE_LENGTH:]  # [B, M]
  black = fen[:, 0] == _T['b']  # [B]
  squares = jnp.where(black[:, None], MIRROR_SQUARE[None], np.arange(NUM_SQUARES)[None])  # [B, 64]: node -> real square.
  board = jnp.take_along_axis(fen, jnp.asarray(SQUARE_TOKEN)[squares], axis=1)  # [B, 64] tokens, mover's frame.
  pieces = jnp.where(black[:, None], jnp.asarray(_SWAPPED_PIECE_OF_TOKEN)[board], jnp.asarray(_PIECE_OF_TOKEN)[board])
  occupied = (pieces > 0).astype(jnp.float32)  # [B, 64]
  open_line = (occupied @ BETWEEN.T) == 0  # [B, S]: nothing strictly between.

  rights = fen[:, _CASTLING_AT:_CASTLING_AT + 4]  # [B, 4]
  has = lambda char: jnp.any(rights == _T[char], axis=1)  # [B]
  white_rights = jnp.stack([has('K'), has('Q'), has('k'), has('q')], axis=1)  # [B, 4]
  black_rights = jnp.stack([has('k'), has('q'), has('K'), has('Q')], axis=1)
  own_rights = jnp.where(black[:, None], black_rights, white_rights)  # [B, 4] mover's frame.
  castling = own_rights[:, None, :] & (np.arange(NUM_SQUARES)[None, :, None] == _CASTLING_SQUARES[None, None, :])

  ep_file = fen[:, _EP_AT] - _T['a']  # [B]; '.' (no square) is outside 0..7.
  ep_rank = jnp.where(fen[:, _EP_AT + 1] == _T['3'], 2, 5)  # ranks 3 / 6 (0-based 2 / 5).
  ep_square = jnp.where(black, jnp.asarray(MIRROR_SQUARE)[jnp.clip(ep_rank * 8 + ep_file, 0, 63)], ep_rank * 8 + ep_file)
  has_ep = (ep_file >= 0) & (ep_file < 8)
  en_passant = has_ep[:, None] & (np.arange(NUM_SQUARES)[None] == ep_square[:, None])  # [B, 64]

  digits = fen[:, _CLOCK_AT:_CLOCK_AT + 3]  # [B, 3]: digits then '.' padding.
  is_digit = digits < 10
  count = jnp.sum(is_digit, axis=1)  # [B]
  place = jnp.where(is_digit, 10.0 ** (count[:, None] - 1 - jnp.arange(3)[None]), 0.0)
  clock = jnp.minimum(jnp.sum(jnp.where(is_digit, digits, 0) * place, axis=1) // 5, _CLOCK_BUCKETS - 1).astype(jnp.int32)

  valid = actions >= 0  # [B, M]
  action = jnp.maximum(actions, 0)
  slot = jnp.asarray(SLOT_OF_ACTION)[action]  # [B, M], real-board frame.
  slot = jnp.where(black[:, None], jnp.asarray(MIRROR_SLOT)[slot], slot)  # Mover's frame.
  batch = jnp.arange(tokens.shape[0])[:, None]
  legal = jnp.zeros((tokens.shape[0], NUM_SLOTS), jnp.float32).at[batch, slot].max(valid.astype(jnp.float32))
  return {
      'pieces': pieces, 'castling': castling.astype(jnp.float32), 'en_passant': en_passant.astype(jnp.float32),
      'clock': clock, 'open': open_line.astype(jnp.float32), 'legal': legal,
      'slot': slot, 'from': jnp.asarray(SLOT_SENDER)[slot], 'to': jnp.asarray(SLOT_RECEIVER)[slot],
      'promotion': jnp.asarray(PROMOTION_OF_ACTION)[action], 'valid': valid,
  }


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


def _head_expansion(heads: int, width: int, dtype: Any) -> jax.Array:
  """[H, W] 0/1: row h is 1 on head h's W/H features."""
  return jnp.asarray(np.arange(width)[None, :] // (width // heads) == np.arange(heads)[:, None], dtype)


class Gateau(hk.Module):
  """One GATEAU layer: GATv2 attention with edge features, nodes and edges updated (pre-LN, residual).

  Edges are grouped by receiver (`Group`): group g's receivers are the next n_g
  nodes, and ``edges[g]`` [B, n_g, K_g, De] holds their incoming edges, slot k of
  its i-th receiver being the edge from node ``senders[i, k]``, real where
  ``mask[i, k]``. Any graph fits, in any grouping: relabelling the nodes (and
  reordering each node's edges) relabels the outputs, and regrouping the receivers
  only moves their slots.
  """

  def __init__(self, num_heads: int, compute_dtype: jnp.dtype, name: str | None = None):
    super().__init__(name=name)
    self._num_heads = num_heads
    self._compute_dtype = compute_dtype

  def __call__(self, h: jax.Array, edges: Sequence[jax.Array],
               groups: Sequence[Group]) -> tuple[jax.Array, tuple[jax.Array, ...]]:
    """h [B, N, D], edges [B, n_g, K_g, De] per group -> (h [B, N, D], edges [B, n_g, K_g, De] per group)."""
    batch, num_nodes, width = h.shape
    if sum(len(g.mask) for g in groups) != num_nodes:
      raise ValueError(f'the groups must hold each of the {num_nodes} nodes once as a receiver, '
                       f'got {sum(len(g.mask) for g in groups)}')
    edge_width = edges[0].shape[-1]
    heads = self._num_heads
    dtype = self._compute_dtype
    hn = layers.layer_norm(h).astype(dtype)  # [B, N, D]
    # The edges' LayerNorm is folded into the one linear map that reads it: LN(e) W = norm(e) (scale W) + offset W.
    # The same function and parameters (`layer_norm_1`, `edge`), but no [B, n, K, De] scale and offset passes
    # (about 10% of a training step on XLA:CPU).
    edge_scale, edge_offset = _LayerNormParameters(name='layer_norm_1')(edge_width)
    to_sender = hk.Linear(edge_width, with_bias=False, name='sender')(hn)  # [B, N, De]
    to_receiver = hk.Linear(edge_width, with_bias=False, name='receiver')(hn)
    edge_w = _LinearWeights(name='edge')(edge_width, edge_width)  # [De, De]
    split = lambda x: x.reshape(*x.shape[:-1], heads, x.shape[-1] // heads)  # [..., H, De/H]
    score = hk.get_parameter('score', (heads, edge_width // heads), jnp.float32,
                             init=hk.initializers.TruncatedNormal(1.0 / math.sqrt(edge_width // heads)))
    # Each head's score vector as one block-diagonal [De, H] matrix: one matmul, no per-head reshape of z.
    block = (_head_expansion(heads, edge_width, jnp.float32) * score.reshape(1, -1)).T  # [De, H]
    value = split(hk.Linear(width, with_bias=False, name='value')(hn))  # [B, N, H, D/H]
    pooled, activations, start = [], [], 0
    for e, group in zip(edges, groups):
      count = len(group.mask)
      from_edge = (_normalized(e).astype(dtype) @ (edge_scale[:, None] * edge_w).astype(dtype)
                   + (edge_offset @ edge_w).astype(dtype))  # [B, n, K, De]
      z = to_sender[:, group.senders] + to_receiver[:, start:start + count, None] + from_edge  # [B, n, K, De]
      start += count
      logits = jax.nn.leaky_relu(z, 0.2).astype(jnp.float32) @ block  # [B, n, K, H]
      logits = jnp.where(jnp.asarray(group.mask)[None, :, :, None], logits, jnp.finfo(jnp.float32).min)
      weights = jax.nn.softmax(logits, axis=2).astype(dtype)  # Over each receiver's incoming edges.
      # Node messages through a dense [n, N] attention matrix per head (no [B, n, K, D] gather):
      # A[j, i] = the weight of edge i -> j.
      incidence = (jax.nn.one_hot(group.senders, num_nodes, dtype=dtype)
                   * jnp.asarray(group.mask, dtype)[..., None])  # [n, K, N]
      attention = jnp.einsum('bnkh,nkm->bhnm', weights, incidence)  # [B, H, n, N]
      from_nodes = jnp.einsum('bhnm,bmhd->bnhd', attention, value).reshape(batch, count, width)
      from_edges = jnp.einsum('bnkh,bnkhd->bnhd', weights, split(from_edge)).reshape(batch, count, edge_width)
      pooled.append(jnp.concatenate([from_nodes, from_edges], axis=-1))  # [B, n, D + De]
      activations.append(jax.nn.gelu(z))  # [B, n, K, De]
    h = h + hk.Linear(width, with_bias=False, name='out')(jnp.concatenate(pooled, axis=1)).astype(jnp.float32)
    # Made after `out`, as the hk.Linear it replaces was (the same initial values); in the compute dtype, as
    # `transformer.build` casts an hk.Linear's weights.
    edge_out = _LinearWeights(name='edge_out')(edge_width, edge_width).astype(dtype)  # [De, De]
    return h, tuple(e + (a @ edge_out).astype(jnp.float32) for e, a in zip(edges, activations))


def _mlp(h: jax.Array, width: int, widening: int, dtype: jnp.dtype, name: str) -> jax.Array:
  """SwiGLU on [..., D] (pre-LN), the transformer's MLP."""
  with hk.name_scope(name):
    x = layers.layer_norm(h).astype(dtype)
    gate = hk.Linear(widening * width, with_bias=False)(x)
    up = hk.Linear(widening * width, with_bias=False)(x)
    return hk.Linear(width, with_bias=False)(jax.nn.silu(gate) * up).astype(jnp.float32)


def forward(tokens: jax.Array, config: ModelConfig, compute_dtype: jnp.dtype,
            with_value: bool = False) -> jax.Array | tuple[jax.Array, jax.Array]:
  """[B, 77 + M] tokens -> [B, M, V] log-probs per move slot (and [B, V] state-value log-probs)."""
  num_moves = tokens.shape[1] - tokenizer.SEQUENCE_LENGTH
  if num_moves < 1:
    raise ValueError(f'a graph board needs 77 FEN tokens and at least one move slot, got {tokens.shape[1]} tokens')
  x = node_and_edge_inputs(tokens)
  width, edge_width = config.embedding_dim, config.graph_edge_dim
  init = hk.initializers.TruncatedNormal(config.emb_init_scale)
  table = lambda name, rows, dim: hk.get_parameter(name, (rows, dim), jnp.float32, init=init)
  nodes = NODE_ORDER  # Node i of the network is square NODE_ORDER[i].
  with hk.name_scope('inputs'):
    h = (table('piece', len(PIECES), width)[x['pieces'][:, nodes]]  # [B, 64, D]
         + table('square', NUM_SQUARES, width)[nodes][None]
         + jnp.einsum('bnc,cd->bnd', x['castling'][:, nodes], table('castling', 4, width))
         + x['en_passant'][:, nodes, None] * table('en_passant', 1, width)
         + table('clock', _CLOCK_BUCKETS, width)[x['clock']][:, None])
    e = table('edge_type', NUM_EDGE_TYPES, edge_width)[SLOT_TYPES][None]  # [1, S, De]
    if config.graph_open_lines:  # Off only to measure what the flag is worth (issue 28).
      e = e + x['open'][..., None] * table('open', 1, edge_width)
    e = e + x['legal'][..., None] * table('legal', 1, edge_width)  # [B, S, De]
    promotion = table('promotion', 5, width)[x['promotion']]  # [B, M, D]
  slots = np.cumsum([0] + [g.mask.size for g in GROUPS])  # Each group's slots in the flat edge tensor.
  edges: Sequence[jax.Array] = [e[:, start:end].reshape(-1, *g.mask.shape, edge_width)  # [B, n, K, De] per group
                                for g, start, end in zip(GROUPS, slots, slots[1:])]
  one_grid = tokens.shape[0] == ONE_GRID_ROWS
  if one_grid:
    pad = lambda x: jnp.pad(x, ((0, 0), (0, 0), (0, MAX_IN_DEGREE - x.shape[2]), (0, 0)))
    edges = [jnp.concatenate([pad(x) for x in edges], axis=1)]  # [B, 64, 36, De]
  for layer in range(config.num_layers):
    h, edges = Gateau(config.num_heads, compute_dtype, name=f'gateau_{layer}')(
        h, edges, (ONE_GRID,) if one_grid else GROUPS)
    h = h + _mlp(h, width, config.widening_factor, compute_dtype, f'mlp_{layer}')
  if one_grid:
    rows = np.cumsum([0] + [len(g.mask) for g in GROUPS])
    edges = [edges[0][:, start:end, :g.mask.shape[1]] for g, start, end in zip(GROUPS, rows, rows[1:])]
  h = layers.layer_norm(h)  # [B, 64, D], nodes in NODE_ORDER.
  e = layers.layer_norm(jnp.concatenate([e.reshape(e.shape[0], -1, edge_width) for e in edges], axis=1))  # [B, S, De]
  batch = jnp.arange(tokens.shape[0])[:, None]
  of_square = jnp.asarray(NODE_OF_SQUARE)
  move = jnp.concatenate([e[batch, x['slot']], h[batch, of_square[x['from']]], h[batch, of_square[x['to']]]],
                         axis=-1)  # [B, M, De + 2D]
  move = hk.Linear(width, name='move_in')(move.astype(compute_dtype)) + promotion
  logits = hk.Linear(config.output_size, name='move_out')(jax.nn.gelu(move).astype(compute_dtype))  # [B, M, V]
  action_values = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  # The state-value head is always built (its parameters are in every checkpoint); jit drops it when unused.
  pooled = jnp.mean(h, axis=1).astype(compute_dtype)  # [B, D]
  value = hk.Linear(config.output_size, name='value_out')(jax.nn.gelu(hk.Linear(width, name='value_in')(pooled)))
  state_value = jax.nn.log_softmax(value.astype(jnp.float32), axis=-1)  # [B, V]
  return (action_values, state_value) if with_value else action_values


def flops_per_board(config: ModelConfig, num_moves: int) -> int:
  """Forward matmul FLOPs of one board with `num_moves` move slots (2 x multiply-accumulates).

  Per layer, on N = 64 nodes: the score and value projections (2 N D De + N D^2),
  the output projection (N (D + De) D), the dense attention matrix and its use
  (S N H + N^2 D) and the SwiGLU (3 w N D^2); on the S = 1904 edge slots
  (1856 edges and the grids' padding): the edge projection and the edge update
  (2 S De^2). Then the move read-out (M (De + 2D) D + M D V) and the occupancy
  test (S * 64).

  >>> from searchless.model import transformer
  >>> flops_per_board(transformer.ModelConfig(kind='graph', embedding_dim=64, num_layers=4, num_heads=4,
  ...     output_size=128, max_sequence_length=79, graph_edge_dim=32), 64)
  72300544
  """
  d, de, w = config.embedding_dim, config.graph_edge_dim, config.widening_factor
  n, h = NUM_SQUARES, config.num_heads
  per_layer = (2 * n * d * de + n * d * d + n * (d + de) * d + NUM_SLOTS * n * h + n * n * d
               + 3 * w * n * d * d + 2 * NUM_SLOTS * de * de)
  read_out = num_moves * (de + 2 * d) * d + num_moves * d * config.output_size
  return 2 * (config.num_layers * per_layer + read_out + NUM_SLOTS * NUM_SQUARES)


def init_tokens() -> np.ndarray:
  """[1, 78] tokens to initialise the graph model with: the start position and one move slot."""
  return np.concatenate([tokenizer.tokenize(chess.STARTING_FEN), [moves.MOVE_TO_ACTION['e2e4']]])[None].astype(np.int32)
