"""The predictor of a `ModelConfig`, whatever its kind: build it, initialise, count and probe its parameters.

The one module that knows the kinds: `build` dispatches to the transformer
(`searchless.model.transformer`: the paper's, one sequence per move, or
board-packed) or to the graph model (`searchless.model.graph`) by
``config.kind`` and ``config.packed``, and handles the compute dtype for all of
them.

>>> cfg = ModelConfig(embedding_dim=16, num_layers=2, num_heads=2, output_size=128, max_sequence_length=79)
>>> model = build(cfg)
>>> params = init_params(cfg)
>>> sorted(params)[:3], num_params(params)
(['embed', 'embed_1', 'layer_norm'], 43280)
>>> log_probs = jax.jit(model.apply)(params, None, np.zeros((2, 79), np.int32))  # [B, T, V]
>>> log_probs.shape, log_probs.dtype
((2, 79, 128), dtype('float32'))
>>> transformer.infer_config(params, num_heads=2) == cfg
True
>>> packed = dataclasses.replace(cfg, packing='board')  # The same parameters, one sequence per board.
>>> tokens = np.zeros((2, 77 + 3), np.int32); tokens[:, -1] = -1  # 2 boards, 3 move slots, 1 unused.
>>> jax.jit(build(packed).apply)(params, None, tokens).shape  # [B, M, V]
(2, 3, 128)
"""

import dataclasses
import functools
import os
from collections.abc import Mapping
from typing import Any

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from searchless.core import moves
from searchless.core import tokenizer
from searchless.model import graph
from searchless.model import transformer
from searchless.model.config import ModelConfig
from searchless.plumbing import errors

PROBE_FEN = 'rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq e3 0 1'  # The input `probe` reads.
PROBE_MOVE = 'e7e5'


def resolve_dtype(name: str, platform: str | None = None) -> jnp.dtype:
  """Returns the compute dtype a config names: float32, bfloat16 or auto.

  'auto' is bfloat16 on GPU/TPU and float32 on CPU (`platform` defaults to JAX's
  default backend).

  >>> resolve_dtype('auto', 'cpu'), resolve_dtype('auto', 'gpu'), resolve_dtype('bfloat16')
  (dtype('float32'), dtype(bfloat16), dtype(bfloat16))
  """
  if name == 'auto':
    platform = platform or jax.default_backend()
    name = 'float32' if platform == 'cpu' else 'bfloat16'
  if name not in ('float32', 'bfloat16'):
    raise errors.BadInput(f'compute dtype must be float32, bfloat16 or auto, got {name!r}')
  return jnp.dtype(name)


def build(
  config: ModelConfig, compute_dtype: Any = jnp.float32, *, last_only: bool = False, with_value: bool = False
) -> hk.Transformed:
  """Returns the predictor: `apply(params, rng_or_None, sequences [B, T] int) -> [B, T, V]`.

  With `last_only` it returns the last position's log-probs [B, V] (all that
  playing and evaluation read) and skips the work no other position needs.

  A board-packed config (`config.packing == 'board'`) gives
  `apply(params, rng_or_None, tokens [B, 77 + M] int) -> [B, M, V]` instead
  (`searchless.model.transformer` describes it); `last_only` does not apply to
  it. So does a graph config (``config.kind == 'graph'``, `searchless.model.graph`),
  which with `with_value` returns `([B, M, V], [B, V])`: the moves' and the
  board's value buckets.

  Parameters are float32 whatever `compute_dtype` is. With bfloat16, matmuls and
  attention run in bfloat16 (attention logits accumulate in float32); the
  residual stream, LayerNorms, softmax and the returned log-probs stay float32.
  """
  compute_dtype = jnp.dtype(compute_dtype)
  if with_value and config.kind != 'graph':
    raise ValueError('with_value: only the graph model has a state-value head')

  def create_float32(next_creator, shape, dtype, init, context):
    del dtype, context  # hk.Linear would create its weights in its input's dtype.
    return next_creator(shape, jnp.float32, init)

  def cast_linear_weights(next_getter, value, context):
    if isinstance(context.module, hk.Linear):
      value = value.astype(compute_dtype)
    return next_getter(value)

  def run(sequences: jax.Array) -> Any:
    if config.kind == 'graph':
      return graph.forward(sequences, config, compute_dtype, with_value)
    if config.packed:
      return transformer.packed_forward(sequences, config, compute_dtype)
    return transformer.forward(sequences, config, compute_dtype, last_only)

  def forward(sequences: jax.Array) -> Any:
    if compute_dtype == jnp.float32:
      return run(sequences)
    with hk.custom_creator(create_float32), hk.custom_getter(cast_linear_weights):
      return run(sequences)

  return hk.transform(forward)


def jit_inference(
  config: ModelConfig,
  compute_dtype: Any = jnp.float32,
  *,
  last_only: bool = False,
  cpu_options: dict[str, Any] | None = None,
) -> Any:
  """`build(config, compute_dtype, last_only=...).apply`, jitted for inference: what play, evaluation and serving call.

  The graph model on XLA:CPU runs a batch of more than `graph.PASS_ROWS` boards in passes of that many, one
  after the other inside the one call (`jax.lax.map`): per board, larger passes are slower (their edge tensors
  leave the caches). It is compiled with XLA:CPU's options of `graph_cpu_options` for this host's cores
  (`cpu_options`: others, as a benchmark compares them). The numbers are the same to float32 rounding.
  """
  apply = build(config, compute_dtype, last_only=last_only).apply
  if config.kind != 'graph' or jax.default_backend() != 'cpu':
    return jax.jit(apply)
  rows = graph.PASS_ROWS

  def in_passes(params: hk.Params, rng: Any, tokens: jax.Array) -> Any:
    batch = tokens.shape[0]
    if batch <= rows or batch % rows:
      return apply(params, rng, tokens)
    passes = jax.lax.map(lambda chunk: apply(params, rng, chunk), tokens.reshape(batch // rows, rows, -1))
    return jax.tree.map(lambda x: x.reshape(batch, *x.shape[2:]), passes)  # [B, ...] again.

  options = graph_cpu_options(cpu_cores()) if cpu_options is None else cpu_options
  return jax.jit(in_passes, compiler_options=options)


# The host's cores up to which `graph_cpu_options` runs each matmul on one thread: measured faster there (1 and 2
# cores, benchmarks/graph_cpu_options.py). Beyond, XLA's default (multi-threaded matmuls) stands: a host with more
# cores never gets slower matmuls than the defaults would give it.
SINGLE_THREAD_MATMUL_CORES = 2


def cpu_cores() -> int:
  """The cores this process may run on (its affinity: ``taskset``, a container's cpuset)."""
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:  # Not on Linux.
    return os.cpu_count() or 1


def graph_cpu_options(cores: int) -> dict[str, Any]:
  """XLA:CPU's compile options for the graph model's inference on a host of `cores` cores (jax 0.10 on; older ones
  get none, and an XLA without an option refuses to compile). Each measured against the options before it, the
  shipped model's forward pass at 48 move slots, the same outputs bit for bit:

  * its YNNPACK fusions off: they ran its small matmuls, and the reductions fused into them, slower than XLA's own
    loops (2 idle cores: 16 boards 0.97x the time, 1 board 0.92x);
  * its older loop emitters instead of the MLIR fusion emitters (with the next: 16 boards 0.87-0.90x, 64 boards
    0.94x on 2 cores);
  * on up to `SINGLE_THREAD_MATMUL_CORES` cores, each matmul on one thread (independent matmuls and loops still
    run at once on XLA's threads); on more, XLA's multi-threaded matmuls, its default. benchmarks/RESULTS.md has
    the figures on 1 and 2 cores.

  >>> graph_cpu_options(2).get('xla_cpu_multi_thread_eigen'), 'xla_cpu_multi_thread_eigen' in graph_cpu_options(8)
  (False, False)
  """
  major, minor = (int(part) for part in jax.__version__.split('.')[:2])
  if (major, minor) < (0, 10):
    return {}
  options: dict[str, Any] = {'xla_cpu_experimental_ynn_fusion_type': '', 'xla_cpu_use_fusion_emitters': False}
  if cores <= SINGLE_THREAD_MATMUL_CORES:
    options['xla_cpu_multi_thread_eigen'] = False
  return options


@functools.cache
def _jitted_init(config: ModelConfig):
  return jax.jit(build(config).init)


def init_params(config: ModelConfig) -> hk.Params:
  """Returns freshly initialised float32 parameters (seed `config.seed`), jitted.

  Use `jax.eval_shape(lambda: init_params(config))` for shapes without the memory.
  """
  init = _jitted_init(dataclasses.replace(config, seed=0))  # One compilation for every seed.
  length = tokenizer.SEQUENCE_LENGTH + 1 if config.packed else config.max_sequence_length
  dummy = jnp.zeros((1, length), jnp.int32)
  return init(jax.random.PRNGKey(config.seed), dummy)


def num_params(params: Mapping[str, Any]) -> int:
  """Returns the number of scalars in `params` (arrays or jax.ShapeDtypeStruct)."""
  return sum(int(np.prod(leaf.shape)) for leaf in jax.tree.leaves(params))


@functools.cache
def _jitted_probe(config: ModelConfig):
  return jax.jit(build(config, last_only=True).apply)


def probe_tokens() -> np.ndarray:
  """[78] int32: `probe`'s input, `PROBE_FEN`'s 77 tokens then `PROBE_MOVE`'s action."""
  return np.concatenate([tokenizer.tokenize(PROBE_FEN), [moves.MOVE_TO_ACTION[PROBE_MOVE]]]).astype(np.int32)


def probe(config: ModelConfig, params: Mapping[str, Any]) -> list[float]:
  """[V] float32 probabilities the model gives one fixed input, in float32.

  Saved beside a model's parameters and recomputed when it loads: the number of
  heads (and any field that does not change a parameter's shape) is invisible in
  the parameters, so this is what tells that a config does not fit them. The
  input is `PROBE_FEN`'s 77 tokens and `PROBE_MOVE`'s: for the action-value models
  the next token is that move's value bucket.
  """
  tokens = probe_tokens()[None]  # [1, 78]
  log_probs = _jitted_probe(config)(params, None, jnp.asarray(tokens, jnp.int32))  # [1, V] or packed [1, 1, V]
  return np.exp(np.asarray(log_probs, np.float32).reshape(-1)).tolist()


def probe_distance(saved: list[float], now: list[float]) -> float:
  """Total variation distance between two `probe` outputs (1.0 for different sizes).

  >>> probe_distance([0.5, 0.5], [0.25, 0.75])
  0.25
  """
  if len(saved) != len(now):
    return 1.0
  return float(0.5 * np.abs(np.asarray(saved) - np.asarray(now)).sum())
