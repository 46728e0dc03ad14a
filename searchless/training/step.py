"""The pure training step: `TrainingState`, the optimiser, the loss, jitted `init`/`update` on a mesh.

`make_functions` builds, for an experiment config and a data x fsdp mesh, the
jitted functions a run uses (`Functions`): `init` (rng -> TrainingState),
`update` (state, batch -> state, metrics: loss, grads, Adam, clipping, EMA) and
`last_log_probs` (what evaluation scores). `peak_flops_per_device` gives MFU its
denominator. `searchless.training.train` runs the loop around them.
"""

from collections.abc import Callable
import time
from typing import Any, NamedTuple

import haiku as hk
import jax
import jax.numpy as jnp
import optax

from searchless.core import config as config_lib
from searchless.core import records
from searchless.core import tokenizer
from searchless.data import packing
from searchless.model import losses
from searchless.model import network
from searchless.model.config import ModelConfig
from searchless.plumbing import errors
from searchless.training import sharding


class TrainingState(NamedTuple):
  step: jax.Array  # [] int32, optimiser steps taken.
  params: hk.Params
  params_ema: hk.Params  # Exponential moving average, used for evaluation and play.
  opt_state: optax.OptState


def make_optimizer(config: config_lib.Config) -> optax.GradientTransformation:
  return optax.chain(
    optax.clip_by_global_norm(config.optim.max_grad_norm),
    optax.adam(config.optim.learning_rate),
  )


def learning_rate_factor(step: jax.Array | int, num_steps: int, cooldown_steps: int) -> jax.Array:
  """The factor on the learning rate of the update made at `step` (steps taken before it): 1, then, over the
  last `cooldown_steps` of `num_steps`, falling linearly towards 0 (1/cooldown_steps on the last update).

  >>> [float(learning_rate_factor(s, 10, 4)) for s in (0, 6, 7, 9)]
  [1.0, 1.0, 0.75, 0.25]
  """
  return jnp.clip((num_steps - jnp.asarray(step, jnp.float32)) / cooldown_steps, 0.0, 1.0)


def make_loss_fn(
  apply: Callable[..., jax.Array], config: config_lib.Config
) -> Callable[..., tuple[jax.Array, jax.Array]]:
  """loss(params, batch, denominators=None) -> (mean loss, number of targets).

  Per-move sequences [B, T]: the loss on the last token (the value bucket or
  the action). Packed rows [B, 77 + 2M + 1]: the mean over every valued move of
  every board (padded move slots and a partial board's unvalued moves are left
  out). The graph model (`apply` returns its state values too) adds
  ``loss.value_weight`` x the mean loss of its state-value head, whose target is
  the board's own bucket where the row has one (partial boards), else its best
  move's.

  With `denominators` (`loss_denominators` of a larger batch that `batch` is a
  part of), the loss is this part's share of that batch's mean: the shares of a
  batch's parts sum to its loss, and their gradients to its gradient.
  """
  kind = config.loss.kind
  if kind not in ('log_loss', 'hl_gauss'):
    raise errors.BadInput(f'loss.kind must be log_loss or hl_gauss, got {kind!r}')
  if kind == 'hl_gauss' and config.policy == 'behavioral_cloning':
    raise errors.BadInput('hl_gauss needs ordered value buckets; behavioral_cloning predicts actions')

  def per_target(log_probs, targets):  # [N, V], [N] -> [N]
    if kind == 'log_loss':
      return losses.log_loss(log_probs, targets, reduce=False)
    return losses.hl_gauss_loss(log_probs, targets, config.loss.hl_gauss_sigma, reduce=False)

  def loss_fn(params, batch, denominators=None):
    own_denominators = loss_denominators(config, batch)  # [2]
    denominators = own_denominators if denominators is None else denominators
    if not packing.packed(config):
      log_probs = apply(params, None, batch)[:, -1].astype(jnp.float32)  # [B, V]
      return jnp.sum(per_target(log_probs, batch[:, -1])) / denominators[0], own_denominators[0]
    inputs, targets, own = packing.split_packed(batch)  # [B, 77 + M], [B, M], [B]
    out = apply(params, None, inputs)
    log_probs, state_log_probs = out if isinstance(out, tuple) else (out, None)  # [B, M, V], [B, V]
    valid = targets >= 0  # [B, M]
    flat = per_target(log_probs.reshape(-1, log_probs.shape[-1]), jnp.maximum(targets, 0).reshape(-1))
    loss = jnp.sum(jnp.where(valid.reshape(-1), flat, 0.0)) / jnp.maximum(denominators[0], 1.0)
    if state_log_probs is not None:
      best = _state_targets(targets, own)  # [B]
      has_moves = best >= 0
      state = per_target(state_log_probs, jnp.maximum(best, 0))  # [B]
      state_loss = jnp.sum(jnp.where(has_moves, state, 0.0)) / jnp.maximum(denominators[1], 1.0)
      loss = loss + config.loss.get('value_weight', 1.0) * state_loss
    return loss, own_denominators[0]

  return loss_fn


def _state_targets(targets: jax.Array, own: jax.Array) -> jax.Array:
  """[B, M], [B] -> [B]: the state-value head's target bucket (-1: none), the row's own or its best move's."""
  return jnp.where(own >= 0, own, jnp.max(targets, axis=1))  # Buckets are monotone in win probability.


def loss_denominators(config: config_lib.Config, batch: jax.Array) -> jax.Array:
  """[2] float32: what `make_loss_fn`'s means divide by: the batch's targets, and its boards with a state target."""
  if not packing.packed(config):
    return jnp.full((2,), batch.shape[0], jnp.float32)
  _, targets, own = packing.split_packed(batch)
  return jnp.stack(
    [jnp.sum(targets >= 0, dtype=jnp.float32), jnp.sum(_state_targets(targets, own) >= 0, dtype=jnp.float32)]
  )


def make_gradient_fn(
  loss_fn: Callable[..., tuple[jax.Array, jax.Array]], config: config_lib.Config, devices: int = 1
) -> Callable[..., tuple[tuple[jax.Array, jax.Array], hk.Params]]:
  """grad(params, batch) -> ((loss, targets), gradients) of the whole batch, in ``train.micro_batch`` rows a pass.

  With ``train.micro_batch`` = m (0: the whole batch), the batch's B rows go
  through the network m at a time (rows j, j + B/m, j + 2B/m, ... in pass j, so a
  batch split over `devices` stays split) and the passes' gradients
  are summed: the same loss and gradient as one pass, up to float rounding, in
  less memory. On XLA:CPU small passes are also faster (the graph model's edge
  tensors fit the caches; RESULTS "Micro-batches").
  """
  micro = config.train.get('micro_batch', 0) or 0
  batch_size = config.data.batch_size
  if micro and (batch_size % micro or micro % devices):
    raise errors.BadInput(
      f'train.micro_batch={micro} must divide data.batch_size={batch_size} '
      f'and be a multiple of the {devices} devices the batch is split over'
    )
  whole = jax.value_and_grad(loss_fn, has_aux=True)
  if not micro or micro == batch_size:
    return whole

  def gradient(params, batch):
    parts = batch.shape[0] // micro
    denominators = loss_denominators(config, batch)  # The whole batch's.
    chunks = jnp.swapaxes(batch.reshape(micro, parts, batch.shape[1]), 0, 1)  # [parts, micro, T]

    def add(total, chunk):
      (loss, _), grads = whole(params, chunk, denominators)
      return jax.tree.map(jnp.add, total, (loss, grads)), None

    zeros = (jnp.zeros((), jnp.float32), jax.tree.map(jnp.zeros_like, params))
    (loss, grads), _ = jax.lax.scan(add, zeros, chunks)
    return (loss, denominators[0]), grads

  return gradient


class Functions(NamedTuple):
  """The jitted pure functions of a run and the layouts they use."""

  init: Callable[..., Any]  # rng -> TrainingState
  update: Callable[..., Any]  # (TrainingState, batch [B, T]) -> (TrainingState, metrics)
  last_log_probs: Callable[..., Any]  # (params, sequences [B, T]) -> [B, V] at the last position; packed: [B, M, V]
  state_sharding: TrainingState
  batch_sharding: jax.sharding.NamedSharding
  model_config: ModelConfig


def make_functions(config: config_lib.Config, mesh: jax.sharding.Mesh) -> Functions:
  model_config = ModelConfig.from_config(config)
  dtype = network.resolve_dtype(config.train.compute_dtype)
  net = network.build(model_config, compute_dtype=dtype)
  optimizer = make_optimizer(config)
  trained = network.build(model_config, compute_dtype=dtype, with_value=True) if model_config.kind == 'graph' else net
  decay = config.optim.ema_decay
  cooldown = config.optim.get('cooldown_steps') or 0  # Absent from configs saved before it existed.

  def init(rng):
    length = tokenizer.SEQUENCE_LENGTH + 1 if model_config.packed else records.SEQUENCE_LENGTHS[config.policy]
    params = net.init(rng, jnp.zeros((1, length), jnp.int32))
    return TrainingState(jnp.zeros((), jnp.int32), params, params, optimizer.init(params))

  gradient = make_gradient_fn(make_loss_fn(trained.apply, config), config, mesh.devices.size)

  def update(state: TrainingState, batch):
    (loss, targets), grads = gradient(state.params, batch)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    if cooldown:  # Adam's step scaled: the learning rate times the cooldown's factor.
      factor = learning_rate_factor(state.step, config.train.num_steps, cooldown)
      updates = jax.tree.map(lambda u: (u * factor).astype(u.dtype), updates)
    params = optax.apply_updates(state.params, updates)
    # ema - (1 - decay) * (ema - params): the reference's stable form of the EMA.
    params_ema = jax.tree.map(lambda e, p: e - (1.0 - decay) * (e - p), state.params_ema, params)
    metrics = {'loss': loss, 'grad_norm': optax.tree_utils.tree_norm(grads), 'targets': targets}
    return TrainingState(state.step + 1, params, params_ema, opt_state), metrics

  abstract = jax.eval_shape(init, jax.random.PRNGKey(0))
  layout = sharding.state_sharding(mesh, abstract)
  layout = layout._replace(step=sharding.replicated(mesh))
  batch = sharding.batch_sharding(mesh)
  out = sharding.replicated(mesh)
  if model_config.packed:
    read_out = lambda params, inputs: net.apply(params, None, inputs)  # [B, M, V]
  else:
    read_out = lambda params, seqs: net.apply(params, None, seqs)[:, -1].astype(jnp.float32)  # [B, V]
  return Functions(
    init=jax.jit(init, out_shardings=layout),
    update=jax.jit(update, in_shardings=(layout, batch), out_shardings=(layout, out), donate_argnums=0),
    last_log_probs=jax.jit(read_out, in_shardings=(layout.params, batch), out_shardings=out),
    state_sharding=layout,
    batch_sharding=batch,
    model_config=model_config,
  )


def peak_flops_per_device(dtype: jnp.dtype) -> float | None:
  """Dense peak FLOP/s of one device, for MFU (None where unknown)."""
  device = jax.devices()[0]
  kind = device.device_kind.lower()
  bf16 = dtype == jnp.bfloat16
  table = {  # (bf16 dense, fp32/tf32 dense) per device.
    'h100': (989e12, 494e12),
    'h200': (989e12, 494e12),
    'a100': (312e12, 156e12),
    'v5 lite': (197e12, 197e12),
    'v5p': (459e12, 459e12),
    'v4': (275e12, 275e12),
  }
  for name, (peak_bf16, peak_fp32) in table.items():
    if name in kind:
      return peak_bf16 if bf16 else peak_fp32
  if device.platform == 'cpu':
    return _measured_cpu_peak()
  return None


def _measured_cpu_peak() -> float:
  """The f32 matmul rate this CPU sustains (all cores of one process)."""
  n = 1024
  a = jnp.ones((n, n), jnp.float32)
  matmul = jax.jit(lambda x: x @ x)
  matmul(a).block_until_ready()
  start, reps = time.perf_counter(), 10
  for _ in range(reps):
    a = matmul(a)
  a.block_until_ready()
  return 2 * n**3 * reps / (time.perf_counter() - start) / jax.local_device_count()
