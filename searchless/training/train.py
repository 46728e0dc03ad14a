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

import contextlib
import json
import os
import pathlib
import time
from collections.abc import Sequence
from typing import Any

import jax
from jax.experimental import multihost_utils
import numpy as np

from searchless import configs
from searchless.core import artefacts
from searchless.core import config as config_lib
from searchless.core import records
from searchless.data import loader as dataset
from searchless.data import packing
from searchless.model import graph as graph_model
from searchless.model import loading
from searchless.model import network
from searchless.model import transformer
from searchless.model.config import ModelConfig
from searchless.plumbing import atomic
from searchless.plumbing import errors
from searchless.plumbing import folder_lock
from searchless.plumbing import outputs
from searchless.plumbing import progress_bars
from searchless.plumbing import tensorboard
from searchless.training import checkpoint
from searchless.training import eval_set as eval_set_lib
from searchless.training import grow
from searchless.training import sharding
from searchless.training import step as step_lib
from searchless.training import stopping
from searchless.training import write_errors


ON_NEW_DATA = ('refuse', 'restart')  # train.on_new_data: what a resume on other data does (`_resume_data`).


def _log(workdir: pathlib.Path, record: dict, scalars: tensorboard.ScalarWriter | None) -> None:
  if jax.process_index() == 0:
    with outputs.errors_naming(workdir / 'metrics.jsonl'), open(workdir / 'metrics.jsonl', 'a') as f:
      f.write(json.dumps(record) + '\n')
  if scalars is not None:
    scalars.write(record['step'], record)


def train(
  config: config_lib.Config,
  workdir: str | os.PathLike,
  *,
  stop_after: int | None = None,
  overrides: Sequence[str] = (),
  progress: bool = True,
) -> step_lib.TrainingState:
  """Trains (or resumes) the run in `workdir`; returns the final state.

  Writes WORKDIR/summary.json (`artefacts.TrainingSummary`; `overrides` are
  recorded in it) at the end of every run.

  `stop_after`: stop (with a checkpoint) after this many steps in this call,
  as an interruption would; used by the resume tests. `progress`: False draws no progress bar.
  Ctrl-C (SIGINT) saves the step reached and the summary, then raises KeyboardInterrupt saying how to resume.
  A filesystem error in the workdir (a full disk, a read-only folder) raises an `outputs.OutputError`
  naming the path, and leaves no unfinished checkpoint.
  """
  work = pathlib.Path(workdir)
  fresh = not work.exists()
  had_lock = (work / '.lock').exists()
  try:
    work.mkdir(parents=True, exist_ok=True)
    with folder_lock.FolderLock(work, 'trainer', '--workdir') if jax.process_index() == 0 else contextlib.nullcontext():
      return _train(config, work, stop_after=stop_after, overrides=overrides, progress=progress)
  except BaseException as error:
    if not had_lock and work.is_dir() and {p.name for p in work.rglob('*') if not p.is_dir()} <= {'.lock'}:
      with contextlib.suppress(OSError):  # Nothing written (empty folders at most); a read-only folder: nothing to do.
        (work / '.lock').unlink(missing_ok=True)
        for folder in sorted((p for p in work.rglob('*') if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
          folder.rmdir()
        if fresh:
          work.rmdir()
    if isinstance(error, OSError) and (one_line := write_errors.output_error(error, work)) is not error:
      raise one_line from None
    raise


def _abandon(manager: checkpoint.Checkpointer, scalars: tensorboard.ScalarWriter | None) -> None:
  """After a failure: closes the event file, waits for the checkpoint threads and removes a save that did not
  finish; what they raise on the way (the same full disk) is the failure's. On several processes the threads
  are left: their save waits for every process, and the others may be waiting in a step for this one."""
  if scalars is not None:
    with contextlib.suppress(Exception):
      scalars.close()
  if jax.process_count() > 1:
    return
  with contextlib.suppress(Exception):
    manager.close()
  with contextlib.suppress(OSError):
    manager.discard_unfinished()


def _trim_metrics(work: pathlib.Path, step: int) -> None:
  """Drops metrics.jsonl lines past `step` (logged after the checkpoint a resume starts from)."""
  path = work / 'metrics.jsonl'
  if jax.process_index() != 0 or not path.exists():
    return
  lines = path.read_text().splitlines(keepends=True)
  kept = [line for line in lines if line.strip() and json.loads(line).get('step', 0) <= step]
  if len(kept) != len(lines):
    atomic.write_text(path, ''.join(kept))


def _train(
  config: config_lib.Config, work: pathlib.Path, *, stop_after: int | None, overrides: Sequence[str], progress: bool
) -> step_lib.TrainingState:
  if not config.data.train:
    raise errors.BadInput('no training data: pass --data GLOB or set data.train in the config')
  if config.train.get('on_new_data', 'refuse') not in ON_NEW_DATA:
    raise errors.BadInput(f'train.on_new_data must be one of {ON_NEW_DATA}, got {config.train.on_new_data!r}')
  mesh = sharding.make_mesh(config.train.fsdp)
  functions = step_lib.make_functions(config, mesh)
  data_iter = iter(dataset.config_loader(config, split='train'))
  started = time.perf_counter()
  manager = checkpoint.Checkpointer(str(work / 'checkpoints'), keep=config.train.ckpt_keep)
  scalars = None
  try:
    restored = _restore_state(manager, functions.state_sharding)
    if restored is not None:
      state, iter_state = restored
      if iter_state is not None:
        _resume_data(data_iter, iter_state, config, work)
      start = int(state.step)
    else:
      state = functions.init(jax.random.PRNGKey(functions.model_config.seed))
      if config.train.get('init_from'):
        state = _initialised_from(
          state,
          config.train.init_from,
          functions.state_sharding,
          grow_from=bool(config.train.get('init_grow')),
          model_config=functions.model_config,
        )
      start = 0
    _trim_metrics(work, start)  # One line per step, however often the run was interrupted.
    scalars = None
    if jax.process_index() == 0:
      atomic.write_text(work / 'config.json', config_lib.to_json(config))  # Whole or not at all; errors name it.
      scalars = tensorboard.ScalarWriter(work / tensorboard.DIR, purge_step=start or None)

    eval_set = eval_set_lib.load_eval_set(config) if config.data.eval else None
    num_steps = config.train.num_steps
    end = num_steps if stop_after is None else min(num_steps, start + stop_after)
    dtype = network.resolve_dtype(config.train.compute_dtype)
    if packing.packed(config):  # A row: 78 board tokens + max_moves move tokens.
      seq_len = transformer.BOARD_TOKENS + config.data.max_moves
    else:
      seq_len = records.SEQUENCE_LENGTHS[config.policy]
    if functions.model_config.kind == 'graph':
      flops = 3 * graph_model.flops_per_board(
        functions.model_config, config.data.max_moves, config.train.get('micro_batch') or config.data.batch_size
      )
    else:
      flops = 3 * transformer.flops_per_sequence(functions.model_config, seq_len)  # Forward + backward.
    peak = step_lib.peak_flops_per_device(dtype)
    bar = progress_bars.bar(
      total=num_steps,
      initial=start,
      desc='train',
      unit='step',
      disable=not progress or jax.process_index() != 0,
      dynamic_ncols=True,
    )
    last_time, last_step = time.perf_counter(), start
    deadline = last_time + config.train.max_seconds if config.train.get('max_seconds') else None
    window = []  # Metrics of the steps since the last log line (device arrays, fetched lazily).
    in_flight = None  # The loss of the step before the last one dispatched.
    with stopping.Stop() as stop:
      for step in range(start, end):
        sequences = sharding.global_batch(next(data_iter), functions.batch_sharding)
        state, metrics = functions.update(state, sequences)
        window.append(metrics)
        done = step + 1
        bar.update(1)
        if in_flight is not None:  # Dispatch is asynchronous: one step in flight at most, so a signal or the clock
          jax.block_until_ready(in_flight)  # stops the run at the step it reached, not at the one Python ran ahead to.
        in_flight = metrics['loss']
        out_of_time, signalled = stopping.agreed(
          deadline is not None and time.perf_counter() > deadline, stop.requested
        )
        if out_of_time:
          end = done  # Log, evaluate and checkpoint as at the end.
        if done % config.train.log_every == 0 or done == end or signalled:  # A stopped run's last steps are logged too.
          # Means over the window: one batch is too noisy to read a curve from.
          metrics = {k: float(np.mean([m[k] for m in jax.device_get(window)])) for k in window[0]}
          targets = metrics.pop('targets') * (done - last_step)  # Action-values (or records) trained on.
          window = []
          now = time.perf_counter()
          examples = (done - last_step) * config.data.batch_size / (now - last_time)
          record = {
            'step': done,
            **metrics,
            'examples_per_s': examples,
            'tokens_per_s': examples * seq_len,
            'targets': int(round(targets)),
            'targets_per_s': targets / (now - last_time),
            'devices': jax.device_count(),
            'processes': jax.process_count(),
          }
          if peak:
            record['mfu'] = examples * flops / (peak * jax.device_count())
          last_time, last_step = now, done
          _log(work, record, scalars)
          bar.set_postfix(loss=f'{metrics["loss"]:.4f}', ex_s=f'{examples:.0f}', refresh=False)
        if eval_set is not None and (done % config.train.eval_every == 0 or done == num_steps or out_of_time):
          record = {'step': done, **eval_set_lib.evaluate(functions, state.params_ema, config, eval_set)}
          _log(work, record, scalars)
          accuracy = (
            f', action accuracy {record["eval_action_accuracy"]:.3f}' if 'eval_action_accuracy' in record else ''
          )
          bar.write(f'step {done}: eval loss {record["eval_loss"]:.4f}{accuracy} (EMA params)')
        if done % config.train.ckpt_every == 0 or done == end or signalled:
          probes = {
            name: network.probe(functions.model_config, tree)
            for name, tree in ((loading.PARAMS, state.params), (loading.PARAMS_EMA, state.params_ema))
          }
          manager.save(
            done,
            params=state.params,
            params_ema=state.params_ema,
            opt_state=state.opt_state,
            config=config,
            data_iter_state=data_iter.get_state(),
            probes=probes,
          )
        if signalled:
          manager.wait()  # Saved before the run ends (a second Ctrl-C meanwhile only sets the flag again).
          if not stop.interrupted:  # Ctrl-C: the KeyboardInterrupt below says it.
            bar.write(f'stopped by signal at step {done}; checkpoint saved, rerun to resume')
          break
        if out_of_time:
          bar.write(f'train.max_seconds={config.train.max_seconds:g} reached at step {done}; checkpoint saved')
          break
    manager.close()  # Waits for pending saves.
    bar.close()
    if scalars is not None:
      with outputs.errors_naming(work / tensorboard.DIR):
        scalars.close()
    if jax.process_index() == 0:
      step = int(jax.device_get(state.step))
      artefacts.TrainingSummary(
        step=step,
        num_steps=num_steps,
        complete=step >= num_steps,
        num_params=network.num_params(state.params),
        num_return_buckets=config.num_return_buckets,
        policy=config.policy,
        batch_size=config.data.batch_size,
        overrides=list(overrides),
        wall_seconds=round(time.perf_counter() - started, 3),
      ).write(work / artefacts.TrainingSummary.FILE)
    if jax.process_count() > 1:  # Every process returns only once process 0's summary is on disk (`run` reads it).
      multihost_utils.sync_global_devices('searchless-train-summary')
  except BaseException:
    _abandon(manager, scalars)
    raise
  if stop.interrupted:  # Ctrl-C: saved, and the caller (a command: exit status 130) told so.
    raise KeyboardInterrupt(
      f'checkpoint saved at step {int(jax.device_get(state.step))}/{num_steps}; rerun the same command to resume'
    )
  return state


def _initialised_from(
  state: step_lib.TrainingState,
  path: str,
  state_sharding: step_lib.TrainingState,
  *,
  model_config: ModelConfig,
  grow_from: bool = False,
) -> step_lib.TrainingState:
  """`state` with the params (and EMA) of the checkpoint at `path` (its EMA params when it has them); with
  `grow_from`, that checkpoint's smaller model grown into this run's (`model_config`) as the same function."""
  if grow_from:
    small_config, small, _ = loading.load_model(path, ema=True)
    loaded = grow.grow(small, jax.device_get(state.params))
    grow.check_same_function(small_config, small, model_config, loaded, path)
  else:
    loaded = loading.load_params(path, ema=True)
  want = {jax.tree_util.keystr(k): a.shape for k, a in jax.tree_util.tree_leaves_with_path(state.params)}
  got = {jax.tree_util.keystr(k): a.shape for k, a in jax.tree_util.tree_leaves_with_path(loaded)}
  if want != got:
    name = next(k for k in sorted(set(want) | set(got)) if want.get(k) != got.get(k))
    raise errors.BadInput(
      f"train.init_from {path!r} does not fit this config's model: {name} is "
      f'{got.get(name, "missing")} there, {want.get(name, "missing")} here'
    )
  host = jax.tree.map(lambda a, b: np.asarray(a, b.dtype), loaded, state.params)
  # Two transfers: params and EMA are distinct buffers (the update donates both).
  return state._replace(
    params=jax.device_put(host, state_sharding.params), params_ema=jax.device_put(host, state_sharding.params_ema)
  )


def _resume_data(data_iter: Any, iter_state: Any, config: config_lib.Config, work: pathlib.Path) -> None:
  """Moves `data_iter` to where the checkpoint's iterator was; on other data, refuses or (train.on_new_data
  = 'restart') leaves it at the new data's start."""
  try:
    data_iter.set_state(iter_state)
  except ValueError as e:  # grain: the saved data source, sampler or worker count is not this loader's.
    if config.train.get('on_new_data', 'refuse') != 'restart':
      raise errors.BadInput(
        f'the checkpoint in {work} was reading other data ({str(e).splitlines()[0]}): pass '
        'train.on_new_data=restart to go on with these from their start'
      ) from None
    if jax.process_index() == 0:
      print(
        f"{work}: the data differ from the checkpoint's ({str(e).splitlines()[0]}); reading them from their "
        'start (train.on_new_data=restart)',
        flush=True,
      )


def _restore_state(
  manager: checkpoint.Checkpointer, state_sharding: step_lib.TrainingState
) -> tuple[step_lib.TrainingState, bytes | dict | None] | None:
  """The latest (state, data-iterator state) in `manager`, each array in its sharding; None if none."""
  step = manager.latest_step()
  if step is None:
    return None
  restored = manager.restore(
    step, params=state_sharding.params, params_ema=state_sharding.params_ema, opt_state=state_sharding.opt_state
  )
  step_sharding: Any = state_sharding.step  # The state's layout: a Sharding at every leaf.
  step_array = jax.make_array_from_callback((), step_sharding, lambda _: np.asarray(step, np.int32))
  state = state_sharding._replace(
    step=step_array, params=restored.params, params_ema=restored.params_ema, opt_state=restored.opt_state
  )
  return state, restored.data_iter_state


def run(
  config: str,
  workdir: str,
  *,
  data: str | None = None,
  eval_data: str | None = None,
  overrides: Sequence[str] = (),
  distributed: bool = False,
  coordinator: str | None = None,
  num_processes: int | None = None,
  process_id: int | None = None,
  progress: bool = True,
) -> artefacts.TrainingSummary:
  """Loads `config` (a shipped name or a file) with `overrides`, trains (or resumes) in `workdir`.

  `data` / `eval_data` set data.train / data.eval. Multi-host: `distributed`
  (auto-detected cluster) or `coordinator` host:port with `num_processes` and
  `process_id` start jax.distributed first; `progress`: False draws no progress bar. Returns the run's summary (also
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
    experiment = configs.load(config, overrides)
  except KeyError as error:  # An unknown field: a user's mistake, as a ValueError.
    raise errors.BadInput(str(error).strip('"')) from None
  train(experiment, workdir, overrides=overrides, progress=progress)
  return artefacts.TrainingSummary.read(pathlib.Path(workdir) / artefacts.TrainingSummary.FILE)
