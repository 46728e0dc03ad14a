"""Training: a pure jitted `update` on a data x fsdp mesh, orbax checkpoints, resume.

    searchless-train --config tiny --workdir runs/tiny --data 'out/train/action_value*'

Everything a run writes goes under ``--workdir``: ``config.json`` (the resolved
config), ``metrics.jsonl`` (one JSON object per log/eval step) and the same
numbers as TensorBoard scalars in ``tensorboard/``, ``checkpoints/``
(orbax; params, EMA params, optimiser state, data-iterator state, config) and
``curves.png`` (`searchless-plot`). Rerunning the same command resumes from the
latest checkpoint; N steps + resume + N steps gives the same parameters as 2N
uninterrupted steps (bit-identical on CPU).
"""

import fcntl
import json
import os
import pathlib
import signal
import socket
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax

from searchless.core import atomic
from searchless.core import progress_bars
from searchless.core import tensorboard
from searchless.core import artefacts
from searchless.training import checkpoint
from searchless.training import config as config_lib
from searchless.data import loader as dataset
from searchless.data import packing
from searchless.model import graph as graph_model
from searchless.model import losses
from searchless.model import transformer as model
from searchless.training import eval_set as eval_set_lib
from searchless.training import sharding
from searchless.core import tokenizer


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


def make_loss_fn(apply: Callable[..., jax.Array], config: config_lib.Config) -> Callable[[hk.Params, jax.Array], tuple[jax.Array, jax.Array]]:
  """loss(params, batch) -> (mean loss, number of targets).

  Per-move sequences [B, T]: the loss on the last token (the value bucket or
  the action). Packed rows [B, 77 + 2M + 1]: the mean over every valued move of
  every board (padded move slots and a partial board's unvalued moves are left
  out). The graph model (`apply` returns its state values too) adds
  ``loss.value_weight`` x the mean loss of its state-value head, whose target is
  the board's own bucket where the row has one (partial boards), else its best
  move's.
  """
  kind = config.loss.kind
  if kind not in ('log_loss', 'hl_gauss'):
    raise ValueError(f"loss.kind must be log_loss or hl_gauss, got {kind!r}")
  if kind == 'hl_gauss' and config.policy == 'behavioral_cloning':
    raise ValueError('hl_gauss needs ordered value buckets; behavioral_cloning predicts actions')

  def per_target(log_probs, targets):  # [N, V], [N] -> [N]
    if kind == 'log_loss':
      return losses.log_loss(log_probs, targets, reduce=False)
    return losses.hl_gauss_loss(log_probs, targets, config.loss.hl_gauss_sigma, reduce=False)

  def loss_fn(params, batch):
    if not packing.packed(config):
      log_probs = apply(params, None, batch)[:, -1].astype(jnp.float32)  # [B, V]
      return jnp.mean(per_target(log_probs, batch[:, -1])), jnp.asarray(batch.shape[0], jnp.float32)
    inputs, targets, own = packing.split_packed(batch)  # [B, 77 + M], [B, M], [B]
    out = apply(params, None, inputs)
    log_probs, state_log_probs = out if isinstance(out, tuple) else (out, None)  # [B, M, V], [B, V]
    valid = targets >= 0  # [B, M]
    flat = per_target(log_probs.reshape(-1, log_probs.shape[-1]), jnp.maximum(targets, 0).reshape(-1))
    count = jnp.sum(valid, dtype=jnp.float32)
    loss = jnp.sum(jnp.where(valid.reshape(-1), flat, 0.0)) / jnp.maximum(count, 1.0)
    if state_log_probs is not None:
      best = jnp.where(own >= 0, own, jnp.max(targets, axis=1))  # [B]: buckets are monotone in win probability.
      has_moves = best >= 0
      state = per_target(state_log_probs, jnp.maximum(best, 0))  # [B]
      state_loss = jnp.sum(jnp.where(has_moves, state, 0.0)) / jnp.maximum(jnp.sum(has_moves), 1)
      loss = loss + config.loss.get('value_weight', 1.0) * state_loss
    return loss, count

  return loss_fn


class Functions(NamedTuple):
  """The jitted pure functions of a run and the layouts they use."""

  init: Callable[..., Any]  # rng -> TrainingState
  update: Callable[..., Any]  # (TrainingState, batch [B, T]) -> (TrainingState, metrics)
  last_log_probs: Callable[..., Any]  # (params, sequences [B, T]) -> [B, V] at the last position; packed: [B, M, V]
  state_sharding: TrainingState
  batch_sharding: jax.sharding.NamedSharding
  model_config: model.ModelConfig


def make_functions(config: config_lib.Config, mesh: jax.sharding.Mesh) -> Functions:
  model_config = model.ModelConfig.from_config(config)
  dtype = model.resolve_dtype(config.train.compute_dtype)
  net = model.build(model_config, compute_dtype=dtype)
  optimizer = make_optimizer(config)
  trained = model.build(model_config, compute_dtype=dtype, with_value=True) if model_config.kind == 'graph' else net
  loss_fn = make_loss_fn(trained.apply, config)
  decay = config.optim.ema_decay

  def init(rng):
    length = tokenizer.SEQUENCE_LENGTH + 1 if model_config.packed else model.SEQUENCE_LENGTHS[config.policy]
    params = net.init(rng, jnp.zeros((1, length), jnp.int32))
    return TrainingState(jnp.zeros((), jnp.int32), params, params, optimizer.init(params))

  def update(state: TrainingState, batch):
    (loss, targets), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params, batch)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
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
      'h100': (989e12, 494e12), 'h200': (989e12, 494e12), 'a100': (312e12, 156e12),
      'v5 lite': (197e12, 197e12), 'v5p': (459e12, 459e12), 'v4': (275e12, 275e12),
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


class _Stop:
  """SIGTERM / SIGINT set a flag; the loop checkpoints and exits cleanly."""

  def __init__(self):
    self.requested = False
    self._previous = {}

  def __enter__(self):
    for sig in (signal.SIGTERM, signal.SIGINT):
      try:
        self._previous[sig] = signal.signal(sig, self._handle)
      except ValueError:  # Not the main thread.
        pass
    return self

  def _handle(self, signum, frame):
    self.requested = True

  def __exit__(self, *exc):
    for sig, handler in self._previous.items():
      signal.signal(sig, handler)


def _agreed(out_of_time: bool, signalled: bool) -> tuple[bool, bool]:
  """(out of time, signalled) as every process will act on them: true where any process's is.

  Each process reads its own clock and gets its own signals, but all must stop at the same step, or one
  waits forever in a collective or a checkpoint save the others left: one host all-gather per step
  decides (on more than one process only).
  """
  if jax.process_count() == 1:
    return out_of_time, signalled
  from jax.experimental import multihost_utils
  flags = np.asarray(multihost_utils.process_allgather(np.array([out_of_time, signalled], np.int32)))  # [P, 2]
  agreed = flags.reshape(-1, 2).max(axis=0)  # [2]
  return bool(agreed[0]), bool(agreed[1])


def _log(workdir: pathlib.Path, record: dict, scalars: tensorboard.ScalarWriter | None) -> None:
  if jax.process_index() == 0:
    with open(workdir / 'metrics.jsonl', 'a') as f:
      f.write(json.dumps(record) + '\n')
  if scalars is not None:
    scalars.write(record['step'], record)


def train(config: config_lib.Config, workdir: str | os.PathLike, *, stop_after: int | None = None, overrides: Sequence[str] = (),
          progress: bool = True) -> TrainingState:
  """Trains (or resumes) the run in `workdir`; returns the final state.

  Writes WORKDIR/summary.json (`artefacts.TrainingSummary`; `overrides` are
  recorded in it) at the end of every run.

  `stop_after`: stop (with a checkpoint) after this many steps in this call,
  as an interruption would; used by the resume tests. `progress`: False draws no progress bar.
  """
  work = pathlib.Path(workdir)
  work.mkdir(parents=True, exist_ok=True)
  with _WorkdirLock(work):
    return _train(config, work, stop_after=stop_after, overrides=overrides, progress=progress)


class WorkdirInUse(OSError):
  """Another trainer holds the workdir's lock."""


class _WorkdirLock:
  """An exclusive lock on WORKDIR/.lock (process 0 of a run only); the kernel drops it if the process dies."""

  def __init__(self, work: pathlib.Path):
    self._path, self._fd = work / '.lock', None

  def __enter__(self):
    if jax.process_index() != 0:
      return self
    fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      holder = os.read(fd, 200).decode('utf-8', 'replace').strip() or 'a process'
      os.close(fd)
      raise WorkdirInUse(f'{self._path.parent} is in use by another trainer ({holder}): '
                         'wait for it to end, or use another --workdir') from None
    os.ftruncate(fd, 0)
    os.write(fd, f'pid {os.getpid()} on {socket.gethostname()}'.encode())
    self._fd = fd
    return self

  def __exit__(self, *exc):
    if self._fd is not None:
      os.close(self._fd)  # Closing releases the lock.
      self._fd = None


def _trim_metrics(work: pathlib.Path, step: int) -> None:
  """Drops metrics.jsonl lines past `step` (logged after the checkpoint a resume starts from)."""
  path = work / 'metrics.jsonl'
  if jax.process_index() != 0 or not path.exists():
    return
  lines = path.read_text().splitlines(keepends=True)
  kept = [line for line in lines if line.strip() and json.loads(line).get('step', 0) <= step]
  if len(kept) != len(lines):
    atomic.write_text(path, ''.join(kept))


def _train(config: config_lib.Config, work: pathlib.Path, *, stop_after: int | None,
           overrides: Sequence[str], progress: bool) -> TrainingState:
  if not config.data.train:
    raise ValueError('no training data: pass --data GLOB or set data.train in the config')
  mesh = sharding.make_mesh(config.train.fsdp)
  functions = make_functions(config, mesh)
  data_iter = iter(dataset.config_loader(config, split='train'))
  started = time.perf_counter()
  manager = checkpoint.Checkpointer(str(work / 'checkpoints'), keep=config.train.ckpt_keep)
  restored = _restore_state(manager, functions.state_sharding)
  if restored is not None:
    state, iter_state = restored
    if iter_state is not None:
      data_iter.set_state(iter_state)
    start = int(state.step)
  else:
    state = functions.init(jax.random.PRNGKey(functions.model_config.seed))
    if config.train.get('init_from'):
      state = _initialised_from(state, config.train.init_from, functions.state_sharding)
    start = 0
  _trim_metrics(work, start)  # One line per step, however often the run was interrupted.
  scalars = None
  if jax.process_index() == 0:
    (work / 'config.json').write_text(config_lib.to_json(config))
    scalars = tensorboard.ScalarWriter(work / tensorboard.DIR, purge_step=start or None)

  eval_set = eval_set_lib.load_eval_set(config) if config.data.eval else None
  num_steps = config.train.num_steps
  end = num_steps if stop_after is None else min(num_steps, start + stop_after)
  dtype = model.resolve_dtype(config.train.compute_dtype)
  if packing.packed(config):  # A row: 78 board tokens + max_moves move tokens.
    seq_len = model.BOARD_TOKENS + config.data.max_moves
  else:
    seq_len = model.SEQUENCE_LENGTHS[config.policy]
  if functions.model_config.kind == 'graph':
    flops = 3 * graph_model.flops_per_board(functions.model_config, config.data.max_moves)
  else:
    flops = 3 * model.flops_per_sequence(functions.model_config, seq_len)  # Forward + backward.
  peak = peak_flops_per_device(dtype)
  bar = progress_bars.bar(total=num_steps, initial=start, desc='train', unit='step', disable=not progress or jax.process_index() != 0,
                  dynamic_ncols=True)
  last_time, last_step = time.perf_counter(), start
  deadline = last_time + config.train.max_seconds if config.train.get('max_seconds') else None
  window = []  # Metrics of the steps since the last log line (device arrays, fetched lazily).
  with _Stop() as stop:
    for step in range(start, end):
      sequences = sharding.global_batch(next(data_iter), functions.batch_sharding)
      state, metrics = functions.update(state, sequences)
      window.append(metrics)
      done = step + 1
      bar.update(1)
      if deadline is not None and len(window) > 1:
        jax.block_until_ready(window[-2]['loss'])  # Dispatch is asynchronous: keep the clock one step behind at most.
      out_of_time, signalled = _agreed(deadline is not None and time.perf_counter() > deadline, stop.requested)
      if out_of_time:
        end = done  # Log, evaluate and checkpoint as at the end.
      if done % config.train.log_every == 0 or done == end:
        # Means over the window: one batch is too noisy to read a curve from.
        metrics = {k: float(np.mean([m[k] for m in jax.device_get(window)])) for k in window[0]}
        targets = metrics.pop('targets') * (done - last_step)  # Action-values (or records) trained on.
        window = []
        now = time.perf_counter()
        examples = (done - last_step) * config.data.batch_size / (now - last_time)
        record = {'step': done, **metrics, 'examples_per_s': examples, 'tokens_per_s': examples * seq_len,
                  'targets': int(round(targets)), 'targets_per_s': targets / (now - last_time),
                  'devices': jax.device_count(), 'processes': jax.process_count()}
        if peak:
          record['mfu'] = examples * flops / (peak * jax.device_count())
        last_time, last_step = now, done
        _log(work, record, scalars)
        bar.set_postfix(loss=f"{metrics['loss']:.4f}", ex_s=f'{examples:.0f}', refresh=False)
      if eval_set is not None and (done % config.train.eval_every == 0 or done == num_steps or out_of_time):
        record = {'step': done, **eval_set_lib.evaluate(functions, state.params_ema, config, eval_set)}
        _log(work, record, scalars)
        accuracy = f", action accuracy {record['eval_action_accuracy']:.3f}" if 'eval_action_accuracy' in record else ''
        bar.write(f"step {done}: eval loss {record['eval_loss']:.4f}{accuracy} (EMA params)")
      if done % config.train.ckpt_every == 0 or done == end or signalled:
        probes = {name: model.probe(functions.model_config, tree)
                  for name, tree in ((checkpoint.PARAMS, state.params), (checkpoint.PARAMS_EMA, state.params_ema))}
        manager.save(done, params=state.params, params_ema=state.params_ema, opt_state=state.opt_state,
                     config=config, data_iter_state=data_iter.get_state(), probes=probes)
      if signalled:
        bar.write(f'stopped by signal at step {done}; checkpoint saved, rerun to resume')
        break
      if out_of_time:
        bar.write(f'train.max_seconds={config.train.max_seconds:g} reached at step {done}; checkpoint saved')
        break
  manager.close()  # Waits for pending saves.
  bar.close()
  if scalars is not None:
    scalars.close()
  if jax.process_index() == 0:
    step = int(jax.device_get(state.step))
    artefacts.TrainingSummary(
        step=step, num_steps=num_steps, complete=step >= num_steps,
        num_params=model.num_params(state.params),
        num_return_buckets=config.num_return_buckets, policy=config.policy, batch_size=config.data.batch_size,
        overrides=list(overrides), wall_seconds=round(time.perf_counter() - started, 3),
    ).write(work / artefacts.TrainingSummary.FILE)
  return state


def _initialised_from(state: TrainingState, path: str, state_sharding: TrainingState) -> TrainingState:
  """`state` with the params (and EMA) of the checkpoint at `path` (its EMA params when it has them)."""
  loaded = checkpoint.load_params(path, ema=True)
  want = {jax.tree_util.keystr(k): a.shape for k, a in jax.tree_util.tree_leaves_with_path(state.params)}
  got = {jax.tree_util.keystr(k): a.shape for k, a in jax.tree_util.tree_leaves_with_path(loaded)}
  if want != got:
    name = next(k for k in sorted(set(want) | set(got)) if want.get(k) != got.get(k))
    raise ValueError(f"train.init_from {path!r} does not fit this config's model: {name} is "
                     f"{got.get(name, 'missing')} there, {want.get(name, 'missing')} here")
  host = jax.tree.map(lambda a, b: np.asarray(a, b.dtype), loaded, state.params)
  # Two transfers: params and EMA are distinct buffers (the update donates both).
  return state._replace(params=jax.device_put(host, state_sharding.params),
                        params_ema=jax.device_put(host, state_sharding.params_ema))


def _restore_state(manager: checkpoint.Checkpointer, state_sharding: TrainingState
                   ) -> tuple[TrainingState, bytes | dict | None] | None:
  """The latest (state, data-iterator state) in `manager`, each array in its sharding; None if none."""
  step = manager.latest_step()
  if step is None:
    return None
  restored = manager.restore(step, params=state_sharding.params, params_ema=state_sharding.params_ema,
                             opt_state=state_sharding.opt_state)
  step_sharding: Any = state_sharding.step  # The state's layout: a Sharding at every leaf.
  step_array = jax.make_array_from_callback((), step_sharding, lambda _: np.asarray(step, np.int32))
  state = state_sharding._replace(step=step_array, params=restored.params, params_ema=restored.params_ema,
                                  opt_state=restored.opt_state)
  return state, restored.data_iter_state


def run(config: str, workdir: str, *, data: str | None = None, eval_data: str | None = None,
        overrides: Sequence[str] = (), distributed: bool = False, coordinator: str | None = None,
        num_processes: int | None = None, process_id: int | None = None) -> artefacts.TrainingSummary:
  """Loads `config` (a shipped name or a file) with `overrides`, trains (or resumes) in `workdir`.

  `data` / `eval_data` set data.train / data.eval. Multi-host: `distributed`
  (auto-detected cluster) or `coordinator` host:port with `num_processes` and
  `process_id` start jax.distributed first. Returns the run's summary (also
  WORKDIR/summary.json).
  """
  if distributed or coordinator or os.environ.get('JAX_COORDINATOR_ADDRESS'):
    jax.distributed.initialize(coordinator, num_processes, process_id)
  overrides = list(overrides)
  if data:
    overrides.append(f'data.train={data}')
  if eval_data:
    overrides.append(f'data.eval={eval_data}')
  try:
    experiment = config_lib.load(config, overrides)
  except KeyError as error:  # An unknown field: a user's mistake, as a ValueError.
    raise ValueError(str(error).strip('"')) from None
  train(experiment, workdir, overrides=overrides)
  return artefacts.TrainingSummary.read(pathlib.Path(workdir) / artefacts.TrainingSummary.FILE)
