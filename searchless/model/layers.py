"""The transformer's layers: attention, SwiGLU MLP, embeddings, a block, the read-out.

Haiku names parameters after the module classes and the call order, so these
functions give the reference implementation's parameter names wherever they are
called from (`searchless.model.transformer` builds the model from them).
"""

import math

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from searchless.core import moves
from searchless.model import priors
from searchless.model.config import ModelConfig


def layer_norm(x: jax.Array) -> jax.Array:
  """LayerNorm over features, always in float32."""
  return hk.LayerNorm(axis=-1, create_scale=True, create_offset=True)(x.astype(jnp.float32))


class MultiHeadDotProductAttention(hk.Module):
  """Self-attention without biases; the class name fixes the parameter names."""

  def __init__(self, num_heads: int, use_causal_mask: bool, apply_qk_layernorm: bool, compute_dtype: jnp.dtype):
    super().__init__()
    self._num_heads = num_heads
    self._use_causal_mask = use_causal_mask
    self._apply_qk_layernorm = apply_qk_layernorm
    self._compute_dtype = compute_dtype

  def __call__(
    self,
    x: jax.Array,
    *,
    query_start: int = 0,
    mask: jax.Array | None = None,
    moves_from: int | None = None,
    geometry: priors.Geometry | None = None,
  ) -> jax.Array:
    """[B, T, D] -> [B, T - query_start, D]: the outputs of the positions from `query_start` on.

    `mask`: [B or 1, 1, T - query_start, T] bool, True where a query may attend to a key.
    `moves_from`: a packed board whose positions from there on are moves that see the
    board and themselves only (and the board sees only itself): computed as board
    attention plus one self term per move, without a [T, T] mask.
    `geometry`: add this layer's learned square biases (and smolgen's) to the logits (`priors.attention_bias`).
    """
    batch, length, width = x.shape
    head_dim = width // self._num_heads
    split = lambda y: y.reshape(batch, y.shape[1], self._num_heads, head_dim)  # [B, T, H, K]
    q = hk.Linear(width, with_bias=False)(x[:, query_start:])  # [B, Tq, D]
    k = hk.Linear(width, with_bias=False)(x)
    if self._apply_qk_layernorm:
      q = layer_norm(q).astype(self._compute_dtype)
      k = layer_norm(k).astype(self._compute_dtype)
    v = hk.Linear(width, with_bias=False)(x)
    num_keys = length if moves_from is None else moves_from
    bias = None if geometry is None else priors.attention_bias(geometry, x, self._num_heads, query_start, num_keys)
    if moves_from is not None:
      mixed = self._board_and_self(split(q), split(k), split(v), query_start, moves_from, bias)  # [B, Tq, H, K]
      return hk.Linear(width, with_bias=False)(mixed.reshape(batch, q.shape[1], width))
    logits = jnp.einsum('bthk,bshk->bhts', split(q), split(k), preferred_element_type=jnp.float32)  # [B, H, T, T]
    logits = logits * (1.0 / math.sqrt(head_dim))
    if bias is not None:
      logits = logits + bias
    if self._use_causal_mask:
      causal = np.tril(np.ones((1, 1, length, length), dtype=bool))[:, :, -q.shape[1] :]
      logits = jnp.where(causal, logits, jnp.finfo(jnp.float32).min)
    if mask is not None:
      logits = jnp.where(mask, logits, jnp.finfo(jnp.float32).min)
    weights = jax.nn.softmax(logits).astype(self._compute_dtype)  # [B, H, T, T]
    # Contracting to [B, H, T, K] and transposing is ~5x faster on XLA:CPU than
    # producing [B, T, H, K] from the einsum directly (same numbers).
    mixed = jnp.einsum('bhts,bshk->bhtk', weights, split(v)).transpose(0, 2, 1, 3)  # [B, T, H, K]
    return hk.Linear(width, with_bias=False)(mixed.reshape(batch, q.shape[1], width))

  def _board_and_self(
    self, q: jax.Array, k: jax.Array, v: jax.Array, query_start: int, moves_from: int, bias: jax.Array | None
  ) -> jax.Array:
    """q [B, Tq, H, K] (positions query_start...), k, v [B, T, H, K], bias [B or 1, H, Tq, S] -> [B, Tq, H, K]."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    board_logits = (
      jnp.einsum('bthk,bshk->bhts', q, k[:, :moves_from], preferred_element_type=jnp.float32) * scale
    )  # [B, H, Tq, S]
    if bias is not None:
      board_logits = board_logits + bias
    own_k, own_v = k[:, query_start:], v[:, query_start:]  # [B, Tq, H, K]
    self_logits = jnp.einsum('bthk,bthk->bht', q, own_k, preferred_element_type=jnp.float32) * scale  # [B, H, Tq]
    is_move = np.arange(query_start, query_start + q.shape[1]) >= moves_from  # [Tq]: board rows see the board only.
    self_logits = jnp.where(is_move, self_logits, jnp.finfo(jnp.float32).min)
    weights = jax.nn.softmax(jnp.concatenate([board_logits, self_logits[..., None]], axis=-1))
    weights = weights.astype(self._compute_dtype)  # [B, H, Tq, S + 1]
    mixed = jnp.einsum('bhts,bshk->bhtk', weights[..., :-1], v[:, :moves_from])  # [B, H, Tq, K]
    return mixed.transpose(0, 2, 1, 3) + weights[..., -1].transpose(0, 2, 1)[..., None] * own_v


def swiglu(x: jax.Array, config: ModelConfig) -> jax.Array:  # [B, T, D] -> [B, T, D]
  hidden = config.widening_factor * config.embedding_dim
  gate = hk.Linear(hidden, with_bias=False)(x)  # [B, T, F]
  up = hk.Linear(hidden, with_bias=False)(x)
  return hk.Linear(config.embedding_dim, with_bias=False)(jax.nn.silu(gate) * up)


def embed(inputs: jax.Array, position_ids: jax.Array | np.ndarray, config: ModelConfig) -> jax.Array:
  """[B, T] input tokens and [T] position ids -> [B, T, D] float32 residual stream.

  With `config.move_squares`, the tokens from `priors.MOVES_AT` on are moves and also get their
  squares' and promotion's embeddings (`priors.move_square_embedding`).
  """
  tokens = hk.Embed(
    vocab_size=moves.NUM_ACTIONS,
    embed_dim=config.embedding_dim,
    lookup_style=hk.EmbedLookupStyle.ARRAY_INDEX,
    w_init=hk.initializers.TruncatedNormal(stddev=config.emb_init_scale),
  )(inputs)  # [B, T, D]
  position_table = hk.Embed(vocab_size=config.max_sequence_length, embed_dim=config.embedding_dim)
  h = tokens * math.sqrt(config.embedding_dim) + position_table(jnp.asarray(position_ids))  # [B, T, D]
  if config.move_squares == 'none' or inputs.shape[1] <= priors.MOVES_AT:
    return h
  squares = priors.move_square_embedding(
    inputs[:, priors.MOVES_AT :], position_table.embeddings, config.move_squares, config.embedding_dim
  )  # [B, M, D]
  return h.at[:, priors.MOVES_AT :].add(squares)


def block(
  h: jax.Array,
  config: ModelConfig,
  compute_dtype: jnp.dtype,
  *,
  query_start: int = 0,
  mask: jax.Array | None = None,
  moves_from: int | None = None,
  geometry: priors.Geometry | None = None,
) -> jax.Array:
  """One transformer block: [B, T, D] -> [B, T - query_start, D] (only later positions queried)."""
  attention = MultiHeadDotProductAttention(
    config.num_heads, config.use_causal_mask, config.apply_qk_layernorm, compute_dtype
  )
  normed = layer_norm(h).astype(compute_dtype)
  h = h[:, query_start:] + attention(
    normed, query_start=query_start, mask=mask, moves_from=moves_from, geometry=geometry
  )
  return h + swiglu(layer_norm(h).astype(compute_dtype), config)


def read_out(h: jax.Array, config: ModelConfig, compute_dtype: jnp.dtype) -> jax.Array:
  """[B, T, D] -> [B, T, V] float32 log-probabilities."""
  if config.apply_post_ln:
    h = layer_norm(h)
  logits = hk.Linear(config.output_size)(h.astype(compute_dtype))  # [B, T, V]
  return jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
