"""Training: a pure jitted `update` on a data x fsdp mesh, orbax checkpoints, resume.

    searchless-train --config configs/tiny.py --workdir runs/tiny --data 'out/train/action_value*'

Everything a run writes goes under ``--workdir``: ``config.json`` (the resolved
config), ``metrics.jsonl`` (one JSON object per log/eval step), ``checkpoints/``
(orbax; params, EMA params, optimiser state, data-iterator state, config) and
``curves.png`` (`searchless-plot`). Rerunning the same command resumes from the
latest checkpoint; N steps + resume + N steps gives the same parameters as 2N
uninterrupted steps (bit-identical on CPU).
"""

import argparse
import json
import os
import pathlib
import signal
import sys
import time
from typing import NamedTuple

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax
import tqdm

from searchless import bags
from searchless import checkpoint
from searchless import config as config_lib
from searchless import dataset
from searchless import losses
from searchless import metrics
from searchless import model
from searchless import records
from searchless import sharding
from searchless import tokenizer
from searchless import values


class TrainingState(NamedTuple):
  step: jax.Array  # [] int32, optimiser steps taken.
  params: hk.Params
  params_ema: hk.Params  # Exponential moving average, used for evaluation and play.
  opt_state: optax.OptState


def make_optimizer(config) -> optax.GradientTransformation:
  return optax.chain(
      optax.clip_by_global_norm(config.optim.max_grad_norm),
      optax.adam(config.optim.learning_rate),
  )


def split_packed(rows: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Packed rows [B, 77 + 2M] -> (model input [B, 77 + M], bucket targets [B, M], -1 = no move)."""
  num_moves = (rows.shape[1] - tokenizer.SEQUENCE_LENGTH) // 2
  return rows[:, :tokenizer.SEQUENCE_LENGTH + num_moves], rows[:, tokenizer.SEQUENCE_LENGTH + num_moves:]


def make_loss_fn(apply, config):
  """loss(params, batch) -> (mean loss, number of targets).

  Per-move sequences [B, T]: the loss on the last token (the value bucket or
  the action). Packed rows [B, 77 + 2M]: the mean over every real move of
  every board (padded move slots are left out).
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
    if not dataset.packed(config):
      log_probs = apply(params, None, batch)[:, -1].astype(jnp.float32)  # [B, V]
      return jnp.mean(per_target(log_probs, batch[:, -1])), jnp.asarray(batch.shape[0], jnp.float32)
    inputs, targets = split_packed(batch)  # [B, 77 + M], [B, M]
    log_probs = apply(params, None, inputs)  # [B, M, V]
    valid = targets >= 0  # [B, M]
    flat = per_target(log_probs.reshape(-1, log_probs.shape[-1]), jnp.maximum(targets, 0).reshape(-1))
    count = jnp.sum(valid, dtype=jnp.float32)
    return jnp.sum(jnp.where(valid.reshape(-1), flat, 0.0)) / jnp.maximum(count, 1.0), count

  return loss_fn


class Functions(NamedTuple):
  """The jitted pure functions of a run and the layouts they use."""

  init: callable  # rng -> TrainingState
  update: callable  # (TrainingState, batch [B, T]) -> (TrainingState, metrics)
  last_log_probs: callable  # (params, sequences [B, T]) -> [B, V] at the last position; packed: [B, M, V]
  state_sharding: TrainingState
  batch_sharding: jax.sharding.NamedSharding
  model_config: model.ModelConfig


def make_functions(config, mesh) -> Functions:
  model_config = model.ModelConfig.from_config(config)
  net = model.build(model_config, compute_dtype=model.resolve_dtype(config.train.compute_dtype))
  optimizer = make_optimizer(config)
  loss_fn = make_loss_fn(net.apply, config)
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
    metrics = {'loss': loss, 'grad_norm': optax.global_norm(grads), 'targets': targets}
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


def peak_flops_per_device(dtype) -> float | None:
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


def _log(workdir: pathlib.Path, record: dict) -> None:
  if jax.process_index() == 0:
    with open(workdir / 'metrics.jsonl', 'a') as f:
      f.write(json.dumps(record) + '\n')


class EvalSet(NamedTuple):
  """The first `train.eval_records` records of `data.eval`, ready to score."""

  sequences: np.ndarray  # [N, T] int32 (packed: [N, 77 + 2M] rows), N padded to a multiple of the batch size.
  count: int  # Real (unpadded) sequences.
  boards: list  # metrics.Board per complete board (action_value only; packed: every board, rows in order).


def _eval_rows(config, raw: list[bytes]) -> tuple[np.ndarray, list]:
  """Packed eval rows: every move of every board (M = the largest board, rounded up to 16)."""
  board_records = dataset.decode_boards(raw)
  max_moves = max([16] + [-(-len(b.moves) // 16) * 16 for b in board_records])
  edges, _ = values.uniform_buckets(config.num_return_buckets)
  rows = dataset.packed_rows(board_records, max_moves, edges)  # [N, 77 + 2M]
  boards = [metrics.Board(b.fen, b.moves, np.asarray(b.win_probs), np.arange(len(b.moves))) for b in board_records]
  return rows, boards


def load_eval_set(config) -> EvalSet:
  reader = bags.reader(config.data.eval)
  raw = list(reader[:min(len(reader), config.train.eval_records)])
  boards = []
  if dataset.packed(config):
    dataset.check_kind(config.data.eval, records.BOARD_VALUE, reader)
    sequences, boards = _eval_rows(config, raw)
  else:
    sequences = dataset.to_sequences(config.policy, raw, config.num_return_buckets)  # [N, T]
    if config.policy == 'action_value':
      boards, _ = metrics.group_boards(list(zip(*dataset.decode_batch('action_value', raw))))
  batch = config.data.batch_size
  padded = np.zeros((-len(raw) % batch + len(raw), sequences.shape[1]), np.int32)
  padded[:len(raw)] = sequences
  return EvalSet(padded, len(raw), boards)


def _evaluate_packed(functions: Functions, params, config, eval_set: EvalSet) -> dict:
  batch, pc, pi = config.data.batch_size, jax.process_count(), jax.process_index()
  _, centres = values.uniform_buckets(config.num_return_buckets)
  picked, predicted = [], []
  for i in range(0, len(eval_set.sequences), batch):
    rows = eval_set.sequences[i:i + batch]
    inputs, targets = split_packed(rows)
    local = inputs[pi * batch // pc:(pi + 1) * batch // pc]
    log_probs = np.asarray(jax.device_get(
        functions.last_log_probs(params, dataset.global_batch(local, functions.batch_sharding))))  # [B, M, V]
    for b in range(len(rows)):
      if i + b >= eval_set.count:
        break
      num = len(eval_set.boards[i + b].moves)
      lp = log_probs[b, :num]  # [m, V]
      picked.append(np.take_along_axis(lp, targets[b, :num, None], axis=-1)[:, 0])
      predicted.append(np.exp(lp) @ centres)
  return {
      'eval_loss': float(-np.concatenate(picked).mean()),
      'eval_action_accuracy': metrics.action_accuracy(
          [p for p, b in zip(predicted, eval_set.boards) if len(b.moves)],
          [b.win_probs for b in eval_set.boards if len(b.moves)]),
      'eval_boards': sum(1 for b in eval_set.boards if len(b.moves)),
  }


def evaluate(functions: Functions, params, config, eval_set: EvalSet) -> dict:
  """Log-loss on the eval records; action accuracy on their complete boards (action_value)."""
  if dataset.packed(config):
    return _evaluate_packed(functions, params, config, eval_set)
  batch, pc, pi = config.data.batch_size, jax.process_count(), jax.process_index()
  picked, bucket_probs = [], []
  for i in range(0, len(eval_set.sequences), batch):
    local = eval_set.sequences[i:i + batch][pi * batch // pc:(pi + 1) * batch // pc]
    log_probs = functions.last_log_probs(params, dataset.global_batch(local, functions.batch_sharding))
    log_probs = np.asarray(jax.device_get(log_probs))  # [B, V], replicated.
    targets = eval_set.sequences[i:i + batch, -1]
    picked.append(np.take_along_axis(log_probs, targets[:, None], axis=-1)[:, 0])
    bucket_probs.append(np.exp(log_probs))
  picked = np.concatenate(picked)[:eval_set.count]
  result = {'eval_loss': float(-picked.mean())}
  if eval_set.boards:
    _, centres = values.uniform_buckets(config.num_return_buckets)
    expected = np.concatenate(bucket_probs)[:eval_set.count] @ centres  # [N] expected win prob.
    predicted = [expected[b.records] for b in eval_set.boards]
    result['eval_action_accuracy'] = metrics.action_accuracy(predicted, [b.win_probs for b in eval_set.boards])
    result['eval_boards'] = len(eval_set.boards)
  return result


def train(config, workdir: str, *, stop_after: int | None = None) -> TrainingState:
  """Trains (or resumes) the run in `workdir`; returns the final state.

  `stop_after`: stop (with a checkpoint) after this many steps in this call,
  as an interruption would; used by the resume tests.
  """
  workdir = pathlib.Path(workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  if not config.data.train:
    raise ValueError('no training data: pass --data GLOB or set data.train in the config')
  mesh = sharding.make_mesh(config.train.fsdp)
  functions = make_functions(config, mesh)
  data_iter = iter(dataset.config_loader(config, split='train'))
  manager = checkpoint.Manager(workdir / 'checkpoints', keep=config.train.ckpt_keep)
  restored = manager.restore_latest(functions.state_sharding)
  if restored is not None:
    state, iter_state = restored
    if iter_state is not None:
      data_iter.set_state(iter_state)
    start = int(state.step)
  else:
    state = functions.init(jax.random.PRNGKey(functions.model_config.seed))
    start = 0
  if jax.process_index() == 0:
    (workdir / 'config.json').write_text(config_lib.to_json(config))

  eval_set = load_eval_set(config) if config.data.eval else None
  num_steps = config.train.num_steps
  end = num_steps if stop_after is None else min(num_steps, start + stop_after)
  dtype = model.resolve_dtype(config.train.compute_dtype)
  if dataset.packed(config):  # A row: 78 board tokens + max_moves move tokens.
    seq_len = model.BOARD_TOKENS + config.data.max_moves
  else:
    seq_len = model.SEQUENCE_LENGTHS[config.policy]
  flops = 3 * model.flops_per_sequence(functions.model_config, seq_len)  # Forward + backward.
  peak = peak_flops_per_device(dtype)
  bar = tqdm.tqdm(total=num_steps, initial=start, desc='train', unit='step', disable=jax.process_index() != 0,
                  dynamic_ncols=True)
  last_time, last_step = time.perf_counter(), start
  deadline = last_time + config.train.max_seconds if config.train.get('max_seconds') else None
  window = []  # Metrics of the steps since the last log line (device arrays, fetched lazily).
  with _Stop() as stop:
    for step in range(start, end):
      sequences = dataset.global_batch(next(data_iter), functions.batch_sharding)
      state, metrics = functions.update(state, sequences)
      window.append(metrics)
      done = step + 1
      bar.update(1)
      if deadline is not None and len(window) > 1:
        jax.block_until_ready(window[-2]['loss'])  # Dispatch is asynchronous: keep the clock one step behind at most.
      out_of_time = deadline is not None and time.perf_counter() > deadline
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
        _log(workdir, record)
        bar.set_postfix(loss=f"{metrics['loss']:.4f}", ex_s=f'{examples:.0f}')
      if eval_set is not None and (done % config.train.eval_every == 0 or done == num_steps or out_of_time):
        record = {'step': done, **evaluate(functions, state.params_ema, config, eval_set)}
        _log(workdir, record)
        accuracy = f", action accuracy {record['eval_action_accuracy']:.3f}" if 'eval_action_accuracy' in record else ''
        bar.write(f"step {done}: eval loss {record['eval_loss']:.4f}{accuracy} (EMA params)")
      if done % config.train.ckpt_every == 0 or done == end or stop.requested:
        manager.save(done, state, data_iter.get_state(), config)
      if stop.requested:
        bar.write(f'stopped by signal at step {done}; checkpoint saved, rerun to resume')
        break
      if out_of_time:
        bar.write(f'train.max_seconds={config.train.max_seconds:g} reached at step {done}; checkpoint saved')
        break
  manager.wait()
  bar.close()
  return state


def _parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(description='Train a searchless transformer (see configs/*.py).')
  p.add_argument('--config', required=True, help='config file with get_config(), e.g. configs/tiny.py')
  p.add_argument('--workdir', required=True, help='all outputs go here; rerun to resume')
  p.add_argument('--data', default=None, help='training records: bag file, @N spec or glob (sets data.train)')
  p.add_argument('--eval_data', default=None, help='held-out records (sets data.eval)')
  p.add_argument('--distributed', action='store_true', help='multi-host with auto-detected cluster (Cloud TPU pods, SLURM): jax.distributed.initialize()')
  p.add_argument('--coordinator', default=None, help='multi-host: jax.distributed coordinator host:port')
  p.add_argument('--num_processes', type=int, default=None, help='multi-host: number of processes')
  p.add_argument('--process_id', type=int, default=None, help='multi-host: this process')
  p.add_argument('overrides', nargs='*', help='key=value config overrides, type-checked, e.g. optim.learning_rate=3e-4')
  return p


def main(argv=None) -> None:
  args = _parser().parse_args(argv)
  if args.distributed or args.coordinator or os.environ.get('JAX_COORDINATOR_ADDRESS'):
    jax.distributed.initialize(args.coordinator, args.num_processes, args.process_id)
  overrides = list(args.overrides)
  if args.data:
    overrides.append(f'data.train={args.data}')
  if args.eval_data:
    overrides.append(f'data.eval={args.eval_data}')
  try:
    config = config_lib.load(args.config, overrides)
  except (KeyError, ValueError, FileNotFoundError) as e:
    sys.exit(f'error: {e}')
  try:
    train(config, args.workdir)
  except (FileNotFoundError, ValueError) as e:  # Bad data paths or records: say so, no traceback.
    sys.exit(f'error: {e}')


if __name__ == '__main__':
  main()
