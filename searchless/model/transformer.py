"""The ChessBench predictor: a decoder-only transformer that reads a whole board.

One sequence is 77 FEN tokens (`searchless.core.tokenizer`) followed by the policy's
extra tokens: action + return bucket (action_value, 79 tokens), return bucket
(state_value, 78) or action (behavioral_cloning, 78). Every token, whatever it
stands for, indexes one shared table of `moves.NUM_ACTIONS` (1968) rows, scaled
by sqrt(d), plus a learned position table. The sequence is shifted right by one
(a 0 token in front, the last token dropped), so position t predicts token t; the
loss uses the last position only. Blocks are pre-LayerNorm multi-head attention
(no biases, no causal mask) and a SwiGLU MLP, then a final LayerNorm, a linear
layer with bias and a log-softmax. Parameter names are those of the reference
implementation, so its published checkpoints load as they are.

Board packing (``packing='board'``, an option beside the paper's model): one
sequence per BOARD instead of one per move. Its input is the 77 FEN tokens
followed by the board's M legal-move tokens (``[B, 77 + M]``, -1 in unused move
slots); the board part is shifted right as above (positions 0..77) and every
move token sits at position 78, the position the move has in the per-move
model. An attention mask keeps the moves apart: board tokens attend to board
tokens only, each move token to the board and to itself (``move_attention=
'moves'``: to every real move; ``joint_layers=K``: in the K blocks before the
last one the board tokens see the real moves too). The output is the bucket distribution
at every move token, ``[B, M, V]``: a whole board's moves in one pass. The
parameters are the per-move model's, name for name and shape for shape.

`searchless.model.network.build` builds it from a `ModelConfig` (with the
compute dtype); `forward` and `packed_forward` are its two forward passes.
"""

import re
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from searchless.core import moves
from searchless.core import tokenizer
from searchless.model import layers
from searchless.model import priors
from searchless.model.config import ModelConfig

BOARD_TOKENS = tokenizer.SEQUENCE_LENGTH + 1  # Packed: 0 + 77 FEN tokens (positions 0..77).
MOVE_POSITION = BOARD_TOKENS  # Packed: the position every move token has (78).

# Heads of the published models, keyed by (num_layers, embedding_dim): heads
# are not visible in parameter shapes. 9M, 136M, 270M and the reference 'local'.
_PUBLISHED_HEADS = {(8, 256): 8, (8, 1024): 8, (16, 1024): 8, (4, 64): 4}

_ATTENTION = 'multi_head_dot_product_attention'


def forward(sequences: jax.Array, config: ModelConfig, compute_dtype: jnp.dtype, last_only: bool = False) -> jax.Array:
  """[B, T] tokens -> [B, T, V] float32 log-probabilities of each next token ([B, V] if `last_only`)."""
  _, length = sequences.shape
  if length > config.max_sequence_length:
    raise ValueError(f'sequence length {length} exceeds max_sequence_length {config.max_sequence_length}')
  black = None
  if config.mover_view:  # An action-value sequence's token 77 is a move (its 78th, a bucket, is never read).
    move_end = min(length, tokenizer.SEQUENCE_LENGTH + 1)
    viewed, black = priors.mover_view(sequences[:, :move_end], tokenizer.SEQUENCE_LENGTH)
    sequences = jnp.concatenate([viewed, sequences[:, move_end:]], axis=1)
  inputs = jnp.pad(sequences, ((0, 0), (1, 0)))[:, :-1]  # [B, T]: right shift, 0 in front.
  h = layers.embed(inputs, jnp.arange(length), config)  # [B, T, D], float32 residual.
  geometry = priors.geometry(inputs, square_bias=config.square_bias, smolgen=config.smolgen)
  for layer in range(config.num_layers):
    # Only the last position is read out when `last_only`: the last block needs
    # keys and values everywhere but a query (and an MLP) at that position only.
    last = last_only and layer == config.num_layers - 1
    if config.move_gather:
      h = priors.gather_move_squares(h, inputs)
    h = layers.block(h, config, compute_dtype, query_start=length - 1 if last else 0, geometry=geometry)
  log_probs = layers.read_out(h, config, compute_dtype)
  if (
    black is not None and config.output_size == moves.NUM_ACTIONS
  ):  # Behavioral cloning: back to the real board's moves.
    log_probs = priors.unmirror_actions(log_probs, black)
  return log_probs[:, -1] if last_only else log_probs


def packed_mask(valid: jax.Array, move_attention: str, board_sees_moves: bool) -> jax.Array:
  """[B, M] real move slots -> [B, 1, 78 + M, 78 + M] bool attention mask of a packed board.

  Board rows see the board (and, with `board_sees_moves`, the real moves); move
  rows see the board and themselves (`move_attention='moves'`: every real move).

  >>> packed_mask(np.array([[True, False]]), 'self', False)[0, 0, 76:, 76:].astype(int).tolist()
  [[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 0, 1]]
  """
  batch, num_moves = valid.shape
  total = BOARD_TOKENS + num_moves
  is_board_key = jnp.arange(total) < BOARD_TOKENS  # [T]
  key_is_real_move = jnp.concatenate([jnp.zeros((batch, BOARD_TOKENS), bool), valid], axis=1)  # [B, T]
  board_rows = jnp.broadcast_to(is_board_key, (batch, total))  # [B, T]
  if board_sees_moves:
    board_rows = board_rows | key_is_real_move
  move_rows = jnp.broadcast_to(is_board_key, (batch, num_moves, total))  # [B, M, T]
  move_rows = move_rows | (jnp.arange(total)[None, None, :] == BOARD_TOKENS + jnp.arange(num_moves)[None, :, None])
  if move_attention == 'moves':
    move_rows = move_rows | key_is_real_move[:, None, :]
  rows = jnp.concatenate([jnp.broadcast_to(board_rows[:, None], (batch, BOARD_TOKENS, total)), move_rows], axis=1)
  return rows[:, None]  # [B, 1, T, T]


def packed_forward(tokens: jax.Array, config: ModelConfig, compute_dtype: jnp.dtype) -> jax.Array:
  """[B, 77 + M] FEN + move tokens (-1: no move) -> [B, M, V] float32 log-probs of each move's bucket."""
  batch, length = tokens.shape
  num_moves = length - tokenizer.SEQUENCE_LENGTH
  if num_moves < 1:
    raise ValueError(f'a packed board needs 77 FEN tokens and at least one move slot, got {length} tokens')
  valid = tokens[:, tokenizer.SEQUENCE_LENGTH :] >= 0  # [B, M]
  if config.mover_view:
    tokens, _ = priors.mover_view(tokens, tokenizer.SEQUENCE_LENGTH)  # Values are the mover's: nothing to undo.
  inputs = jnp.pad(jnp.maximum(tokens, 0), ((0, 0), (1, 0)))  # [B, 78 + M]: 0, FEN, moves.
  position_ids = np.concatenate([np.arange(BOARD_TOKENS), np.full(num_moves, MOVE_POSITION)])  # [T]
  h = layers.embed(inputs, position_ids, config)  # [B, T, D]
  geometry = priors.geometry(inputs, square_bias=config.square_bias, smolgen=config.smolgen)
  for layer in range(config.num_layers):
    # Joint blocks (board tokens see the moves) are the K before the last; the last
    # block's board outputs are never read, so it queries (and MLPs) the moves only.
    joint = config.num_layers - 1 - config.joint_layers <= layer < config.num_layers - 1
    start = BOARD_TOKENS if layer == config.num_layers - 1 else 0
    if config.move_gather:
      h = priors.gather_move_squares(h, inputs)
    if config.move_attention == 'self' and not joint:  # The default: no [T, T] mask needed.
      h = layers.block(h, config, compute_dtype, query_start=start, moves_from=BOARD_TOKENS, geometry=geometry)
    else:
      mask = packed_mask(valid, config.move_attention, joint)[:, :, start:]  # [B, 1, Tq, T]
      h = layers.block(h, config, compute_dtype, query_start=start, mask=mask, geometry=geometry)
  return layers.read_out(h, config, compute_dtype)  # [B, M, V]


def flops_per_sequence(config: ModelConfig, seq_len: int) -> int:
  """Returns forward-pass matmul FLOPs (2 x multiply-accumulates) of one sequence.

  With T = seq_len, d = embedding_dim, L = num_layers, w = widening_factor and
  V = output_size:

      FLOPs = 2 * (L * (4 T d^2  +  2 T^2 d  +  3 w T d^2)  +  T d V)

  per block: the q, k, v and output projections (4 T d^2), the attention logits
  and the weighted sum of values (2 T^2 d over all heads), the three SwiGLU
  matrices (3 w T d^2); then the output layer (T d V; log-probs are computed at
  every position, as the reference does). Embedding look-ups, LayerNorm, softmax
  and elementwise ops are not counted. A training step costs about 3x this
  (forward + backward) per sequence; MFU = 3 * flops * sequences/s / peak FLOP/s.

  >>> flops_per_sequence(ModelConfig(embedding_dim=256, num_layers=8, num_heads=8,
  ...                                output_size=128, max_sequence_length=79), 79)
  1381703680
  """
  d, t, w = config.embedding_dim, seq_len, config.widening_factor
  per_layer = 4 * t * d * d + 2 * t * t * d + 3 * w * t * d * d
  return 2 * (config.num_layers * per_layer + t * d * config.output_size)


def infer_config(params: Mapping[str, Any], num_heads: int | None = None) -> ModelConfig:
  """Returns the architecture that `params` (arrays or ShapeDtypeStructs) belong to.

  Width, depth, widening, output size, max sequence length, post-LN and QK-LN are
  read from parameter shapes; heads are not visible there, so they come from the
  published models' table (9M/136M/270M: 8 heads, 'local': 4) unless given.
  `use_causal_mask`, `emb_init_scale` and `seed` take the reference's values.
  """
  try:
    vocab, d = params['embed']['embeddings'].shape
    max_sequence_length = params['embed_1']['embeddings'].shape[0]
  except (KeyError, TypeError) as error:
    raise ValueError(f'not predictor parameters (no {error}); modules: {sorted(params)}') from None
  if vocab != moves.NUM_ACTIONS:
    raise ValueError(f'token embedding has {vocab} rows, expected {moves.NUM_ACTIONS}')
  # Haiku keys are module paths: 'multi_head_dot_product_attention_3/linear_1'.
  num_layers = len({name.split('/')[0] for name in params if name.startswith(_ATTENTION)})
  if num_layers == 0:
    raise ValueError(f'no {_ATTENTION} modules in parameters: {sorted(params)}')
  output = params.get(f'linear_{3 * num_layers}')
  if output is None or 'b' not in output:
    raise ValueError(f'no output layer linear_{3 * num_layers} (with bias) in parameters')
  num_layer_norms = sum(1 for name in params if re.fullmatch(r'layer_norm(_\d+)?', name))
  if num_heads is None:
    num_heads = _PUBLISHED_HEADS.get((num_layers, d))
    if num_heads is None:
      raise ValueError(
        f'cannot infer num_heads of a {num_layers}-layer, d={d} model from parameter'
        f' shapes (known: {sorted(_PUBLISHED_HEADS)}); pass num_heads'
      )
  return ModelConfig(
    embedding_dim=d,
    num_layers=num_layers,
    num_heads=num_heads,
    widening_factor=params['linear']['w'].shape[1] // d,
    apply_post_ln=num_layer_norms == 2 * num_layers + 1,
    apply_qk_layernorm=f'{_ATTENTION}/layer_norm' in params,
    output_size=output['w'].shape[1],
    max_sequence_length=max_sequence_length,
  )
