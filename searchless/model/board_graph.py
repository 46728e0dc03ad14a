"""The board as a graph (AlphaGateau, Rigaux & Kashima 2024): its nodes, edges, their layout, and a board's inputs.

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

`node_and_edge_inputs` reads the board-packed transformer's row ``[B, 77 + M]``;
`searchless.model.graph` is the network on this graph.

>>> int(SLOT_MASK.sum()), NUM_SLOTS, [g.mask.shape for g in GROUPS]
(1856, 1904, [(28, 26), (20, 30), (16, 36)])
"""

import itertools
from typing import NamedTuple

import chess
import jax
import jax.numpy as jnp
import numpy as np

from searchless.core import moves
from searchless.core import tokenizer


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
_INCOMING = [
  [(int(s), e) for e, (s, r) in enumerate(zip(_REL_SENDERS, _REL_RECEIVERS)) if r == node] + [(node, -1)]
  for node in range(NUM_SQUARES)
]  # Per receiver: (sender, relation or -1 for the self-loop).
IN_DEGREE = np.array([len(edges) for edges in _INCOMING], np.int32)  # [64]: 24 (corners) .. 36 (centre).
NUM_GROUPS = 3  # 1904 slots (2.6% padding); 4 groups: 1880, 2: 2016, 1: 2304.


def _groups(num_groups: int) -> list[np.ndarray]:
  """The receiving squares of each group, by in-degree: the contiguous split of the sorted degrees with fewest slots."""
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
    _senders[_i, : IN_DEGREE[_square]] = [sender for sender, _ in _INCOMING[_square]]
  _SLOT_SQUARES.append((_senders, np.repeat(_squares[:, None], _width, axis=1), _mask))
GROUPS = tuple(Group(NODE_OF_SQUARE[senders], mask) for senders, _, mask in _SLOT_SQUARES)
# The same edges as one [64, 36] grid, each group's rows padded to the largest in-degree
# (`graph.ONE_GRID_ROWS` says when the network uses it).
MAX_IN_DEGREE = int(IN_DEGREE.max())  # 36
ONE_GRID = Group(
  np.concatenate([np.pad(g.senders, ((0, 0), (0, MAX_IN_DEGREE - g.mask.shape[1])), mode='edge') for g in GROUPS]),
  np.concatenate([np.pad(g.mask, ((0, 0), (0, MAX_IN_DEGREE - g.mask.shape[1]))) for g in GROUPS]),
)
NUM_SLOTS = sum(g.mask.size for g in GROUPS)  # S = 1904: the groups' slots, flattened one after the other.
# [S]: each flat slot's place in the one grid flattened ([64 x 36]); the grid's own padding holds no flat slot.
ONE_GRID_PLACE = np.concatenate(
  [
    ((row0 + np.arange(g.mask.shape[0]))[:, None] * MAX_IN_DEGREE + np.arange(g.mask.shape[1])[None]).reshape(-1)
    for g, row0 in zip(GROUPS, np.cumsum([0] + [len(g.mask) for g in GROUPS]))
  ]
).astype(np.int32)
SLOT_SENDER = np.concatenate([senders.reshape(-1) for senders, _, _ in _SLOT_SQUARES])  # [S]: the sending square.
SLOT_RECEIVER = np.concatenate([receivers.reshape(-1) for _, receivers, _ in _SLOT_SQUARES])  # [S]
SLOT_MASK = np.concatenate([mask.reshape(-1) for _, _, mask in _SLOT_SQUARES])  # [S]: a real edge.
_SLOT_OF_PAIR = {
  (int(s), int(r)): flat
  for flat, (s, r, real) in enumerate(zip(SLOT_SENDER, SLOT_RECEIVER, SLOT_MASK))
  if real and s != r
}
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
# The one grid's places ([64 x 36]): the flat slot each holds (its own padding: slot 0, never read by a real
# edge) and its edge type (padding: the padding type).
ONE_GRID_SOURCE = np.zeros(ONE_GRID.mask.size, np.int32)
ONE_GRID_SOURCE[ONE_GRID_PLACE] = np.arange(NUM_SLOTS)
ONE_GRID_TYPES = np.full(ONE_GRID.mask.size, NUM_EDGE_TYPES - 1, np.int32)
ONE_GRID_TYPES[ONE_GRID_PLACE] = SLOT_TYPES


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
MIRROR_SLOT[_SLOT_OF_RELATION] = [
  _SLOT_OF_PAIR[int(MIRROR_SQUARE[s]), int(MIRROR_SQUARE[r])] for s, r in zip(_REL_SENDERS, _REL_RECEIVERS)
]

# Actions -> their promotion piece (0: none, 1..4: q r b n).
PROMOTION_OF_ACTION = np.array(
  [' qrbn'.index(uci[4]) if len(uci) == 5 else 0 for uci in moves.ACTION_TO_MOVE], np.int32
)

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
CLOCK_BUCKETS = 21  # Half-move clock // 5, capped: 0-4, 5-9, ..., 100+.


def node_and_edge_inputs(tokens: jax.Array) -> dict[str, jax.Array]:
  """[B, 77 + M] packed tokens -> the graph's integer and flag inputs, in the mover's frame.

  Returns pieces [B, 64] (classes of `PIECES`), castling [B, 64, 4] and
  en_passant [B, 64] flags, clock [B] buckets, open [B, S] and legal [B, S]
  edge flags, and per move: its edge's flat slot [B, M], from/to squares [B, M], promotion [B, M], valid [B, M].
  """
  fen = tokens[:, : tokenizer.SEQUENCE_LENGTH]  # [B, 77]
  actions = tokens[:, tokenizer.SEQUENCE_LENGTH :]  # [B, M]
  black = fen[:, 0] == _T['b']  # [B]
  squares = jnp.where(
    black[:, None], MIRROR_SQUARE[None], np.arange(NUM_SQUARES)[None]
  )  # [B, 64]: node -> real square.
  board = jnp.take_along_axis(fen, jnp.asarray(SQUARE_TOKEN)[squares], axis=1)  # [B, 64] tokens, mover's frame.
  pieces = jnp.where(black[:, None], jnp.asarray(_SWAPPED_PIECE_OF_TOKEN)[board], jnp.asarray(_PIECE_OF_TOKEN)[board])
  occupied = (pieces > 0).astype(jnp.float32)  # [B, 64]
  open_line = (occupied @ BETWEEN.T) == 0  # [B, S]: nothing strictly between.

  rights = fen[:, _CASTLING_AT : _CASTLING_AT + 4]  # [B, 4]
  has = lambda char: jnp.any(rights == _T[char], axis=1)  # [B]
  white_rights = jnp.stack([has('K'), has('Q'), has('k'), has('q')], axis=1)  # [B, 4]
  black_rights = jnp.stack([has('k'), has('q'), has('K'), has('Q')], axis=1)
  own_rights = jnp.where(black[:, None], black_rights, white_rights)  # [B, 4] mover's frame.
  castling = own_rights[:, None, :] & (np.arange(NUM_SQUARES)[None, :, None] == _CASTLING_SQUARES[None, None, :])

  ep_file = fen[:, _EP_AT] - _T['a']  # [B]; '.' (no square) is outside 0..7.
  ep_rank = jnp.where(fen[:, _EP_AT + 1] == _T['3'], 2, 5)  # ranks 3 / 6 (0-based 2 / 5).
  ep_square = jnp.where(
    black, jnp.asarray(MIRROR_SQUARE)[jnp.clip(ep_rank * 8 + ep_file, 0, 63)], ep_rank * 8 + ep_file
  )
  has_ep = (ep_file >= 0) & (ep_file < 8)
  en_passant = has_ep[:, None] & (np.arange(NUM_SQUARES)[None] == ep_square[:, None])  # [B, 64]

  digits = fen[:, _CLOCK_AT : _CLOCK_AT + 3]  # [B, 3]: digits then '.' padding.
  is_digit = digits < 10
  count = jnp.sum(is_digit, axis=1)  # [B]
  place = jnp.where(is_digit, 10.0 ** (count[:, None] - 1 - jnp.arange(3)[None]), 0.0)
  clock = jnp.minimum(jnp.sum(jnp.where(is_digit, digits, 0) * place, axis=1) // 5, CLOCK_BUCKETS - 1).astype(jnp.int32)

  valid = actions >= 0  # [B, M]
  action = jnp.maximum(actions, 0)
  slot = jnp.asarray(SLOT_OF_ACTION)[action]  # [B, M], real-board frame.
  slot = jnp.where(black[:, None], jnp.asarray(MIRROR_SLOT)[slot], slot)  # Mover's frame.
  batch = jnp.arange(tokens.shape[0])[:, None]
  legal = jnp.zeros((tokens.shape[0], NUM_SLOTS), jnp.float32).at[batch, slot].max(valid.astype(jnp.float32))
  return {
    'pieces': pieces,
    'castling': castling.astype(jnp.float32),
    'en_passant': en_passant.astype(jnp.float32),
    'clock': clock,
    'open': open_line.astype(jnp.float32),
    'legal': legal,
    'slot': slot,
    'from': jnp.asarray(SLOT_SENDER)[slot],
    'to': jnp.asarray(SLOT_RECEIVER)[slot],
    'promotion': jnp.asarray(PROMOTION_OF_ACTION)[action],
    'valid': valid,
  }
