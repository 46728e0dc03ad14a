"""Structural priors for the transformer: whose move it is and where the squares are.

Options of `ModelConfig`, each off by default (the paper's model and its published
checkpoints are untouched); they change what the network knows about its tokens,
not the tokens (77 FEN tokens, one of 1968 move tokens):

* ``mover_view``: when Black is to move the board is mirrored (ranks flipped,
  colours swapped, castling rights and the en-passant square with it) and so are
  the move tokens, so one set of weights sees every board as White. Values are the
  mover's already; a behavioral-cloning model's move distribution is mirrored
  back (`unmirror_actions`).
* ``move_squares``: a move token's embedding is its own row plus embeddings of its
  from-square, its to-square and its promotion piece: the board tokens' position
  rows of those squares (``'tied'``) or tables of their own (``'untied'``).
* ``square_bias='relative'``: a learned bias per head and layer on the attention
  logit between two board squares, by their (rank, file) displacement (Shaw-style
  relative positions, 15 x 15 classes), and between a move token and its from- and
  to-squares.
* ``square_bias='open_lines'``: ``'relative'``, plus a second table by displacement
  added only where the two squares share a rank, file or diagonal with no piece strictly
  between them (`open_lines`): what every edge of the graph model is told, computed from
  the board tokens.
* ``smolgen=W``: a board-dependent bias between squares per head and layer (Leela's
  smolgen): the layer's square features compressed, summarised in W features per
  head, and mapped to a [64, 64] bias by one map all layers share.
* ``move_gather``: before every block, each move token adds a linear map (zero at
  first) of its from- and to-square's states, normalised (`gather_move_squares`): a
  move is read from both its squares, as the graph model reads it.

Positions are those of the model's input, the tokens shifted right by one: 0 (the
start token), the side to move, then the 64 squares a8..h1 at positions 2..65, and
the move tokens from `MOVES_AT` on.

>>> [moves.ACTION_TO_MOVE[MIRROR_ACTION[moves.MOVE_TO_ACTION[m]]] for m in ('e2e4', 'g8f6', 'a2a1q')]
['e7e5', 'g1f3', 'a7a8q']
>>> board = chess.Board('r3k2r/8/8/8/3Pp3/8/8/R3K2R b Kq d3 0 1')
>>> viewed, black = mover_view(tokenizer.tokenize(board.fen())[None], 77)
>>> bool(black[0]), (np.asarray(viewed[0]) == tokenizer.tokenize(board.mirror().fen())).all()
(True, np.True_)
"""

from typing import NamedTuple

import chess
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from searchless.core import moves
from searchless.core import tokenizer

NUM_SQUARES = 64
SQUARES_AT = 2  # Input position of a8, the first square (0: start token, 1: side to move).
MOVES_AT = tokenizer.SEQUENCE_LENGTH + 1  # Input position of the first move token (78).
MOVE_SQUARES = ('none', 'tied', 'untied')  # `ModelConfig.move_squares`.
SQUARE_BIASES = ('none', 'relative', 'open_lines')  # `ModelConfig.square_bias`.
NUM_DISPLACEMENTS = 15 * 15  # (rank step, file step) classes between two squares, each in -7..7.

_T = tokenizer.CHARACTER_TO_TOKEN
_FEN_SQUARE = lambda square: (7 - chess.square_rank(square)) * 8 + chess.square_file(square)  # a8 = 0 ... h1 = 63.
_CASTLING_AT, _EP_AT = 65, 69  # FEN token indices (tokenizer's layout).


def _mirror_move(uci: str) -> str:
  flip = lambda rank: str(9 - int(rank))
  return uci[0] + flip(uci[1]) + uci[2] + flip(uci[3]) + uci[4:]


MIRROR_ACTION = np.array([moves.MOVE_TO_ACTION[_mirror_move(m)] for m in moves.ACTION_TO_MOVE], np.int32)  # [1968]
FROM_SQUARE = np.array([_FEN_SQUARE(chess.parse_square(m[:2])) for m in moves.ACTION_TO_MOVE], np.int32)  # [1968]
TO_SQUARE = np.array([_FEN_SQUARE(chess.parse_square(m[2:4])) for m in moves.ACTION_TO_MOVE], np.int32)  # [1968]
PROMOTION = np.array([' qrbn'.index(m[4]) if len(m) == 5 else 0 for m in moves.ACTION_TO_MOVE], np.int32)  # 0: none.

_SQUARE = [
  chess.square(index % 8, 7 - index // 8) for index in range(NUM_SQUARES)
]  # Board token index (a8 = 0) -> square.
_RANK, _FILE = np.arange(NUM_SQUARES) // 8, np.arange(NUM_SQUARES) % 8  # Of the board token indices (rank 0: the 8th).
SQUARE_DISPLACEMENT = ((_RANK[None, :] - _RANK[:, None] + 7) * 15 + (_FILE[None, :] - _FILE[:, None] + 7)).astype(
  np.int32
)  # [64, 64]: key minus query square.
# [64, 64] float32: the two squares share a rank, file or diagonal (a queen's line; a square and itself do not).
QUEEN_LINE = np.array([[float(a != b and bool(chess.ray(a, b))) for b in _SQUARE] for a in _SQUARE], np.float32)
# [64 * 64, 64] float32: row (i, j) marks the squares strictly between squares i and j on their line (none: off it).
BETWEEN = (
  (
    np.array([chess.between(a, b) for a in _SQUARE for b in _SQUARE], np.uint64)[:, None]
    >> np.array(_SQUARE, np.uint64)[None]
  )
  & np.uint64(1)
).astype(np.float32)


def open_lines(board_tokens: jax.Array) -> jax.Array:
  """[B, 64] board tokens (a8..h1) -> [B, 64, 64] float32: 1 where two squares share a rank, file or
  diagonal with no piece strictly between them, else 0 (a square and itself: 0).

  >>> lines = open_lines(tokenizer.tokenize(chess.STARTING_FEN)[None, 1:65])[0]  # a8 = 0, a1 = 56, h1 = 63.
  >>> [int(lines[56, 48]), int(lines[56, 40]), int(lines[56, 0]), int(lines[56, 63]), int(lines[51, 35])]
  [1, 0, 0, 0, 1]
  """
  occupied = (board_tokens != _T['.']).astype(jnp.float32)  # [B, 64]
  blocked = occupied @ jnp.asarray(BETWEEN).T  # [B, 64 * 64]: pieces strictly between.
  return jnp.where(blocked.reshape(-1, NUM_SQUARES, NUM_SQUARES) > 0, 0.0, jnp.asarray(QUEEN_LINE))


# FEN token index -> the index it is read from when mirroring: the squares' ranks flip, the rest stay.
_MIRROR_INDEX = np.arange(tokenizer.SEQUENCE_LENGTH)
_MIRROR_INDEX[1 : 1 + NUM_SQUARES] = 1 + (7 - np.arange(NUM_SQUARES) // 8) * 8 + np.arange(NUM_SQUARES) % 8
_SWAP_CASE = np.arange(len(tokenizer.CHARACTERS))  # Piece tokens: colour swapped.
for _char in 'pnbrqk':
  _SWAP_CASE[_T[_char]], _SWAP_CASE[_T[_char.upper()]] = _T[_char.upper()], _T[_char]
_SWAP_EP_RANK = np.arange(len(tokenizer.CHARACTERS))
_SWAP_EP_RANK[_T['3']], _SWAP_EP_RANK[_T['6']] = _T['6'], _T['3']
# Castling rights (K, Q, k, q as bits 8, 4, 2, 1) -> the 4 tokens of the mirrored board's rights.
_MIRROR_CASTLING = np.array(
  [
    [_T[c] for c in ''.join(right for bit, right in zip((2, 1, 8, 4), 'KQkq') if bits & bit).ljust(4, '.')]
    for bits in range(16)
  ],
  np.int32,
)  # [16, 4]


def mover_view(sequences: jax.Array, moves_from: int) -> tuple[jax.Array, jax.Array]:
  """[B, T] tokens (77 FEN tokens, move tokens from index `moves_from` on, -1 kept) -> (same, mirrored
  where Black is to move; [B] bool: mirrored)."""
  fen = sequences[:, : tokenizer.SEQUENCE_LENGTH]  # [B, 77]
  black = fen[:, 0] == _T['b']  # [B]
  mirrored = fen[:, _MIRROR_INDEX]
  board = jnp.asarray(_SWAP_CASE)[mirrored[:, 1 : 1 + NUM_SQUARES]]  # [B, 64]
  rights = fen[:, _CASTLING_AT : _CASTLING_AT + 4]  # [B, 4]
  bits = sum(jnp.any(rights == _T[c], axis=1).astype(jnp.int32) * bit for c, bit in zip('KQkq', (8, 4, 2, 1)))
  castling = jnp.asarray(_MIRROR_CASTLING)[bits]  # [B, 4]
  ep = jnp.stack([fen[:, _EP_AT], jnp.asarray(_SWAP_EP_RANK)[fen[:, _EP_AT + 1]]], axis=1)  # [B, 2]
  side = jnp.full_like(fen[:, :1], _T['w'])
  mirrored = jnp.concatenate([side, board, castling.astype(fen.dtype), ep, fen[:, _EP_AT + 2 :]], axis=1)
  rest = sequences[:, tokenizer.SEQUENCE_LENGTH : moves_from]  # Tokens between (none, or a bucket): kept.
  move_tokens = sequences[:, moves_from:]  # [B, M]
  move_tokens = jnp.where(move_tokens >= 0, jnp.asarray(MIRROR_ACTION)[jnp.maximum(move_tokens, 0)], move_tokens)
  out = jnp.concatenate([mirrored, rest, move_tokens.astype(sequences.dtype)], axis=1)
  return jnp.where(black[:, None], out, sequences), black


def unmirror_actions(log_probs: jax.Array, black: jax.Array) -> jax.Array:
  """[B, T, 1968] a move distribution seen from the mover's side -> the real board's ([B] `black`: mirrored)."""
  return jnp.where(black[:, None, None], log_probs[..., MIRROR_ACTION], log_probs)


def move_square_embedding(actions: jax.Array, positions: jax.Array, mode: str, width: int) -> jax.Array:
  """[B, M] actions (>= 0) -> [B, M, D]: their from- and to-squares' and promotion's embeddings.

  `positions`: [R, D] the position table (``mode='tied'``: a square's row is its board token's);
  ``'untied'`` creates tables of its own (`move_from_square`, `move_to_square`).
  """
  from_square, to_square = jnp.asarray(FROM_SQUARE)[actions], jnp.asarray(TO_SQUARE)[actions]  # [B, M]
  if mode == 'tied':
    squares = positions[SQUARES_AT : SQUARES_AT + NUM_SQUARES]  # [64, D]
    out = squares[from_square] + squares[to_square]
  else:
    out = hk.Embed(NUM_SQUARES, width, name='move_from_square')(from_square) + hk.Embed(
      NUM_SQUARES, width, name='move_to_square'
    )(to_square)
  return out + hk.Embed(len(' qrbn'), width, name='move_promotion')(jnp.asarray(PROMOTION)[actions])


def move_ends(inputs: jax.Array) -> jax.Array:
  """[B, T] input tokens (T > `MOVES_AT`) -> [B, T - MOVES_AT, 2] int32: the input positions of each move token's
  from- and to-square (a padding slot, -1, reads as action 0)."""
  actions = jnp.maximum(inputs[:, MOVES_AT:], 0)  # [B, M]
  return SQUARES_AT + jnp.stack([jnp.asarray(FROM_SQUARE)[actions], jnp.asarray(TO_SQUARE)[actions]], axis=-1)


def gather_move_squares(h: jax.Array, inputs: jax.Array) -> jax.Array:
  """[B, T, D] residual stream -> the same, where each move token (positions from `MOVES_AT` on, actions in the
  [B, T] `inputs`) adds `move_gather` (a linear map, zero at first) of its from- and to-square's states,
  LayerNormed together (`move_gather_norm`)."""
  if h.shape[1] <= MOVES_AT:
    return h
  states = jax.vmap(lambda board, at: board[at])(h, move_ends(inputs))  # [B, M, 2, D]
  states = states.reshape(*states.shape[:2], -1)  # [B, M, 2 D]
  states = hk.LayerNorm(-1, True, True, name='move_gather_norm')(states)
  added = hk.Linear(h.shape[-1], with_bias=False, w_init=jnp.zeros, name='move_gather')(states)  # [B, M, D]
  return h.at[:, MOVES_AT:].add(added.astype(h.dtype))


SMOLGEN_SQUARE_WIDTH = 8  # smolgen: features each square is compressed to before the board summary.


class Geometry(NamedTuple):
  """What the attention biases (`square_bias`, `smolgen`) need to know about a sequence."""

  displacement: np.ndarray | None  # [T, T] int32: key square minus query square as a class (NUM_DISPLACEMENTS: none).
  move_squares: jax.Array | None  # [B, T, 2] int32: a move token's from- and to-square positions (-1: not a move).
  open_lines: (
    jax.Array | None
  )  # [B, 64, 64] float32: `open_lines` of the board (None: square_bias is not 'open_lines').
  smolgen: hk.Linear | None  # The summary -> [64 x 64] bias map shared by every layer (None: no smolgen).
  smolgen_width: int  # Width of a layer's board summary, per head.


def geometry(inputs: jax.Array, *, square_bias: str, smolgen: int) -> Geometry | None:
  """The `Geometry` of [B, T] input tokens (shifted right: squares from `SQUARES_AT`, moves from `MOVES_AT` on),
  or None when neither bias is on (`square_bias` one of `SQUARE_BIASES`). `smolgen` > 0 creates the shared map
  (`smolgen_generator`; zero weights at first, so like `square_bias` the model starts as the one without it)."""
  if square_bias == 'none' and not smolgen:
    return None
  generator = hk.Linear(NUM_SQUARES * NUM_SQUARES, w_init=jnp.zeros, name='smolgen_generator') if smolgen else None
  if square_bias == 'none':
    return Geometry(None, None, None, generator, smolgen)
  batch, length = inputs.shape
  displacement = np.full((length, length), NUM_DISPLACEMENTS, np.int32)  # [T, T]: not two squares, no class.
  squares = min(NUM_SQUARES, max(0, length - SQUARES_AT))
  displacement[SQUARES_AT : SQUARES_AT + squares, SQUARES_AT : SQUARES_AT + squares] = SQUARE_DISPLACEMENT[
    :squares, :squares
  ]
  move_squares = jnp.full((batch, length, 2), -1, jnp.int32)
  if length > MOVES_AT:
    move_squares = move_squares.at[:, MOVES_AT:].set(move_ends(inputs))
  lines = open_lines(inputs[:, SQUARES_AT : SQUARES_AT + NUM_SQUARES]) if square_bias == 'open_lines' else None
  return Geometry(displacement, move_squares, lines, generator, smolgen)


def attention_bias(geo: Geometry, x: jax.Array, num_heads: int, query_start: int, num_keys: int) -> jax.Array:
  """[B or 1, H, Tq, S] float32: this layer's learned bias on the logits of queries from `query_start` on and
  the first `num_keys` keys; `x` [B, T, D] is the layer's (normalised) input.

  ``square_bias``: parameters `square_bias` [H, 225] and `move_square_bias` [H, 2], zero at first;
  ``'open_lines'`` adds `open_line_bias` [H, 225] (zero at first) between squares on an open line.
  ``smolgen`` (Leela's board-dependent bias): the squares' features compressed (`smolgen_compress`), a board
  summary (`smolgen_summary`), one per head (`smolgen_heads`), each mapped to a [64, 64] bias between the
  squares by the shared `smolgen_generator`.
  """
  bias = jnp.zeros((1, num_heads, 1, 1), jnp.float32)
  if geo.displacement is not None and geo.move_squares is not None:
    table = hk.get_parameter('square_bias', (num_heads, NUM_DISPLACEMENTS), jnp.float32, init=jnp.zeros)
    table = jnp.concatenate([table, jnp.zeros((num_heads, 1), jnp.float32)], axis=1)  # [H, 226]: last = no bias.
    bias = bias + table[:, geo.displacement[query_start:, :num_keys]][None]  # [1, H, Tq, S]
    weights = hk.get_parameter('move_square_bias', (num_heads, 2), jnp.float32, init=jnp.zeros)  # [H, 2]
    targets = geo.move_squares[:, query_start:]  # [B, Tq, 2]
    hits = (targets[..., None] == jnp.arange(num_keys)).astype(jnp.float32)  # [B, Tq, 2, S]
    bias = bias + jnp.einsum('btks,hk->bhts', hits, weights)
  first_row = max(0, query_start - SQUARES_AT)  # The first square that queries here.
  if first_row >= NUM_SQUARES:
    return bias
  maps = None  # [B, H, 64 - first_row, 64]: board-dependent biases between squares.
  if geo.open_lines is not None:
    table = hk.get_parameter('open_line_bias', (num_heads, NUM_DISPLACEMENTS), jnp.float32, init=jnp.zeros)
    maps = table[:, SQUARE_DISPLACEMENT[first_row:]][None] * geo.open_lines[:, None, first_row:]
  if geo.smolgen is not None:
    batch = x.shape[0]
    squares = x[:, SQUARES_AT : SQUARES_AT + NUM_SQUARES]  # [B, 64, D]
    compressed = hk.Linear(SMOLGEN_SQUARE_WIDTH, with_bias=False, name='smolgen_compress')(squares)  # [B, 64, C]
    summary = hk.Linear(geo.smolgen_width, name='smolgen_summary')(compressed.reshape(batch, -1))  # [B, W]
    summary = hk.LayerNorm(-1, True, True, name='smolgen_summary_norm')(jax.nn.silu(summary.astype(jnp.float32)))
    heads = hk.Linear(num_heads * geo.smolgen_width, name='smolgen_heads')(summary.astype(x.dtype))  # [B, H W]
    heads = heads.reshape(batch, num_heads, geo.smolgen_width)
    heads = hk.LayerNorm(-1, True, True, name='smolgen_heads_norm')(jax.nn.silu(heads.astype(jnp.float32)))
    generated = geo.smolgen(heads.astype(x.dtype)).astype(jnp.float32)  # [B, H, 64 * 64]
    generated = generated.reshape(batch, num_heads, NUM_SQUARES, NUM_SQUARES)[:, :, first_row:]  # [B, H, Tsq, 64]
    maps = generated if maps is None else maps + generated
  if maps is None:
    return bias
  length = x.shape[1]
  row_start = max(query_start, SQUARES_AT) - query_start
  rows = length - query_start
  maps = maps[:, :, :, : max(0, num_keys - SQUARES_AT)]
  return bias + jnp.pad(
    maps,
    (
      (0, 0),
      (0, 0),
      (row_start, rows - row_start - maps.shape[2]),
      (SQUARES_AT, num_keys - SQUARES_AT - maps.shape[3]),
    ),
  )
