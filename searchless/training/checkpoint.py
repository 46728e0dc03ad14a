"""Orbax checkpoints: ours (training) and the published ChessBench layout.

Published layout (read only): ``<model>/<step>/{params,params_ema}``, each an
orbax PyTree checkpoint of the haiku parameters, e.g. ``checkpoints/270M/6400000/``.

Our layout, written by `Checkpointer` (one orbax ``CheckpointManager`` step per save)::

    <workdir>/checkpoints/<step>/
        params/              StandardCheckpointHandler   float32 parameters
        params_ema/          StandardCheckpointHandler   their EMA (evaluation, play)
        opt_state/           StandardCheckpointHandler   optax state
        data_iter/           grain CheckpointHandler     iterator state, one JSON per process (optional)
        config/config.json   JsonCheckpointHandler       searchless.core.config.to_json of the experiment
        probe/probe.json     JsonCheckpointHandler       {params, params_ema: model.probe outputs} (optional)
        _CHECKPOINT_METADATA                             orbax's step metadata

so ``params``/``params_ema`` read like a published step. The step's orbax
metadata records whether the iterator state was bytes (`grain.DataLoader`) or a
dict (`DatasetIterator`).

`Checkpointer` is the one save API of a training run (items by name, async
saves, restore into any sharding). A model to play is read, in either layout,
and exported by `searchless.model.loading` (``load_params``, ``load_model``,
``export``; the shipped models by name, e.g. ``pretrained``).

>>> import tempfile, jax.numpy as jnp, ml_collections
>>> workdir = tempfile.mkdtemp()
>>> config = ml_collections.FrozenConfigDict({'policy': 'action_value'})
>>> params = {'linear': {'w': jnp.ones((2, 3))}}
>>> with Checkpointer(workdir + '/checkpoints', async_save=False) as checkpointer:
...   checkpointer.save(7, params=params, params_ema=params, opt_state={'count': jnp.zeros((), jnp.int32)},
...                     config=config)
...   restored = checkpointer.restore()
True
>>> restored.step, restored.params['linear']['w'].shape, restored.config.policy
(7, (2, 3), 'action_value')
>>> from searchless.model import loading
>>> loading.load_params(workdir)['linear']['w'].sum()
np.float32(6.0)
"""

import contextlib
import dataclasses
import json
import os
from collections.abc import Callable, Iterator
from typing import Any

import jax
import ml_collections
import numpy as np
import orbax.checkpoint as ocp
from etils import epath

from searchless.core import config as config_lib
from searchless.model import loading
from searchless.plumbing import errors
from searchless.training import write_errors

import grain
from grain import checkpoint as grain_checkpoint  # Its iterator handler, registered with orbax.

PyTree = Any  # Nested dicts/tuples of arrays (haiku params, optax state).
Config = config_lib.Config

PARAMS, PARAMS_EMA, CONFIG = loading.PARAMS, loading.PARAMS_EMA, loading.CONFIG  # The items a player reads.
CONFIG_FILE, PROBE, PROBE_FILE = loading.CONFIG_FILE, loading.PROBE, loading.PROBE_FILE
OPT_STATE, DATA_ITER = 'opt_state', 'data_iter'  # The items only training reads.
_STATE_KIND = 'data_iter_state'  # Step custom metadata: 'bytes' | 'dict' | None.
_ARRAY_ITEMS = (PARAMS, PARAMS_EMA, OPT_STATE)
_UNFINISHED = '.orbax-checkpoint-tmp'  # The suffix of a step's folder until orbax has written all of it.


@dataclasses.dataclass(frozen=True)
class Restored:
  """One restored training checkpoint."""

  step: int  # The step it was saved at.
  params: PyTree  # Parameters, laid out as the target given (else on the first local device).
  params_ema: PyTree  # Their exponential moving average.
  opt_state: PyTree  # Optimiser state (the target's structure, e.g. optax namedtuples).
  config: ml_collections.FrozenConfigDict  # The experiment config saved with it.
  data_iter: Any = None  # The iterator given, moved to its saved position (None if not saved).
  data_iter_state: bytes | dict | None = None  # Else the saved iterator state, as given to save.


def _registry() -> ocp.handlers.DefaultCheckpointHandlerRegistry:
  registry = ocp.handlers.DefaultCheckpointHandlerRegistry()
  for item in _ARRAY_ITEMS:
    registry.add(item, ocp.args.StandardSave, ocp.StandardCheckpointHandler)
    registry.add(item, ocp.args.StandardRestore, ocp.StandardCheckpointHandler)
  config_handler = ocp.handlers.JsonCheckpointHandler(filename=CONFIG_FILE)
  registry.add(CONFIG, ocp.args.JsonSave, config_handler)
  registry.add(CONFIG, ocp.args.JsonRestore, config_handler)
  probe_handler = ocp.handlers.JsonCheckpointHandler(filename=PROBE_FILE)
  registry.add(PROBE, ocp.args.JsonSave, probe_handler)
  registry.add(PROBE, ocp.args.JsonRestore, probe_handler)
  iterator_handler = grain_checkpoint.CheckpointHandler()
  registry.add(DATA_ITER, grain_checkpoint.CheckpointSave, iterator_handler)
  registry.add(DATA_ITER, grain_checkpoint.CheckpointRestore, iterator_handler)
  return registry


def _path_key(path) -> tuple[str, ...]:
  """A key path with namedtuple fields and dict keys alike (orbax saves both as dicts)."""
  return tuple(str(getattr(k, 'name', getattr(k, 'key', getattr(k, 'idx', k)))) for k in path)


def _abstract(tree: PyTree, saved: Callable[[], PyTree]) -> PyTree:
  """Restore target: each leaf as a ShapeDtypeStruct with a sharding.

  A leaf may be a jax.Array or ShapeDtypeStruct (its sharding is kept; FSDP or
  replicated targets restore in place on many devices), a bare jax.sharding.Sharding
  (shape and dtype come from the checkpoint, `saved()` metadata) or anything with a
  shape and dtype (numpy: restored onto the first local device).
  """
  default = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
  shapes: dict[tuple[str, ...], Any] = {}

  def leaf(path, x):
    if isinstance(x, jax.sharding.Sharding):
      if not shapes:
        shapes.update((_path_key(p), m) for p, m in jax.tree_util.tree_flatten_with_path(saved())[0])
      metadata = shapes.get(_path_key(path))
      if metadata is None:
        raise ValueError(f'checkpoint has no array at {jax.tree_util.keystr(path)}')
      return jax.ShapeDtypeStruct(metadata.shape, metadata.dtype, sharding=x)
    sharding = getattr(x, 'sharding', None)
    if not isinstance(sharding, jax.sharding.Sharding):
      sharding = default
    return jax.ShapeDtypeStruct(np.shape(x), x.dtype, sharding=sharding)

  return jax.tree_util.tree_map_with_path(leaf, tree)


class _IteratorState:
  """A raw grain iterator state, saved per process by grain's checkpoint handler."""

  def __init__(self, state: bytes | None = None):
    self.state = state

  def get_state(self) -> bytes | None:
    return self.state

  def set_state(self, state: bytes) -> None:
    self.state = state

  def start_prefetch(self) -> None:
    pass


class Checkpointer:
  """Saves and restores training state under one directory (our layout above).

  Saves are asynchronous by default: `save` returns once arrays are copied off the
  devices; call `wait` (or `close`, or use it as a context manager) before exit.
  Every process of a multi-host job must make the same calls. A save that fails on
  the filesystem (a full disk) raises, there or at the next `save`, `wait` or `close`,
  an OSError naming the step's folder (orbax's threads raise tensorstore's errors);
  `discard_unfinished` then removes what it wrote.
  """

  def __init__(self, directory: str, *, keep: int | None = None, async_save: bool = True):
    # Orbax wants absolute paths: a relative one is taken from the current directory, as every other path argument.
    self.directory = epath.Path(directory if '://' in str(directory) else os.path.abspath(directory))
    options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=True, enable_async_checkpointing=async_save)
    self._manager = ocp.CheckpointManager(self.directory, options=options, handler_registry=_registry())
    self._pending: int | None = None  # The step of the save that may still be writing.

  def latest_step(self) -> int | None:
    return self._manager.latest_step()

  def all_steps(self) -> list[int]:
    return sorted(self._manager.all_steps())

  def save(
    self,
    step: int,
    *,
    params: PyTree,
    params_ema: PyTree,
    opt_state: PyTree,
    config: Config,
    data_iter: Any = None,
    data_iter_state: bytes | dict | None = None,
    probes: dict[str, list[float]] | None = None,
  ) -> bool:
    """Saves one step; returns False (saving nothing) if that step is already saved.

    `config` is the experiment config (a ConfigDict). `probes` maps ``params``
    and ``params_ema`` to their `model.probe` outputs: `load_model` recomputes
    them to refuse a config that no longer fits the weights. The data position is either
    `data_iter`, a grain iterator (`grain.DataLoader`'s or a `DatasetIterator`), or
    `data_iter_state`, its `get_state()` (bytes or dict); each process writes its own.
    """
    if step in self._manager.all_steps():
      return False
    items = {
      PARAMS: ocp.args.StandardSave(params),
      PARAMS_EMA: ocp.args.StandardSave(params_ema),
      OPT_STATE: ocp.args.StandardSave(opt_state),
      CONFIG: ocp.args.JsonSave(json.loads(config_lib.to_json(config))),
    }
    if probes is not None:
      items[PROBE] = ocp.args.JsonSave(probes)
    state_kind = None
    if data_iter is not None and data_iter_state is not None:
      raise ValueError('pass data_iter or data_iter_state, not both')
    if data_iter_state is not None:
      state_kind = 'dict' if isinstance(data_iter_state, dict) else 'bytes'
      data_iter = _IteratorState(
        json.dumps(data_iter_state).encode() if state_kind == 'dict' else bytes(data_iter_state)
      )
    elif data_iter is not None:
      state_kind = 'dict' if isinstance(data_iter, grain.DatasetIterator) else 'bytes'
    if data_iter is not None:
      items[DATA_ITER] = grain_checkpoint.CheckpointSave(data_iter)
    self.wait()  # The previous save's error, naming its step.
    self._pending = step
    with self._naming_step():
      return self._manager.save(
        step, args=ocp.args.Composite(**items), force=True, custom_metadata={_STATE_KIND: state_kind}
      )

  def restore(
    self,
    step: int | None = None,
    *,
    params: PyTree = None,
    params_ema: PyTree = None,
    opt_state: PyTree = None,
    data_iter: Any = None,
  ) -> Restored:
    """Restores `step` (default: the latest) into the given targets.

    A target is a pytree like the item whose leaves are jax.Arrays,
    jax.ShapeDtypeStructs or bare jax.sharding.Shardings: with a sharding each
    leaf is restored straight into it (e.g. FSDP over a mesh of many hosts),
    otherwise onto the first local device. Without a target an item restores in
    its saved structure (optax namedtuples become containers: pass a target to
    resume training). The data position comes back in `data_iter` (the iterator
    given, moved to the saved position) or else as `data_iter_state`.
    """
    if step is None:
      step = self.latest_step()
      if step is None:
        raise errors.MissingInput(f'no checkpoint in {self.directory}')
    step_dir = self.directory / str(step)
    if not step_dir.exists():
      raise errors.MissingInput(f'no checkpoint for step {step} in {self.directory} (steps: {self.all_steps()})')
    targets = {PARAMS: params, PARAMS_EMA: params_ema, OPT_STATE: opt_state}
    items = {}
    for name, target in targets.items():
      saved = lambda name=name: loading.metadata_tree(self._manager.item_metadata(step)[name])
      if target is None:  # The saved shapes and structure, on the first local device.
        target = jax.tree.map(lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype), saved())
      items[name] = ocp.args.StandardRestore(_abstract(target, saved))
    items[CONFIG] = ocp.args.JsonRestore()
    holder = None
    if (step_dir / DATA_ITER).exists():
      holder = _IteratorState() if data_iter is None else data_iter
      items[DATA_ITER] = grain_checkpoint.CheckpointRestore(holder)
    restored = self._manager.restore(step, args=ocp.args.Composite(**items))
    state = None
    if isinstance(holder, _IteratorState):
      state = holder.state
      if state is not None and (self._manager.metadata(step).custom_metadata or {}).get(_STATE_KIND) == 'dict':
        state = json.loads(state)
    return Restored(
      step=step,
      params=restored[PARAMS],
      params_ema=restored[PARAMS_EMA],
      opt_state=restored[OPT_STATE],
      config=config_lib.from_json(json.dumps(restored[CONFIG])),
      data_iter=data_iter if holder is not None and data_iter is not None else None,
      data_iter_state=state,
    )

  def wait(self) -> None:
    """Blocks until pending asynchronous saves are committed."""
    with self._naming_step():
      self._manager.wait_until_finished()
    self._pending = None

  def close(self) -> None:
    with self._naming_step():
      self._manager.close()
    self._pending = None

  @contextlib.contextmanager
  def _naming_step(self) -> Iterator[None]:
    """A filesystem error of the pending save, raised inside the block, as an OSError naming its step's folder."""
    try:
      yield
    except Exception as error:  # pylint: disable=broad-except
      failed = write_errors.cause(error)
      if failed is None or self._pending is None:
        raise
      raise OSError(failed.errno, failed.strerror, str(self.directory / str(self._pending))) from error

  def discard_unfinished(self) -> None:
    """Removes the folders of saves that did not finish (orbax's ``<step>.orbax-checkpoint-tmp``): call it
    after `close`, on every process (process 0 removes them)."""
    if jax.process_index() != 0 or not self.directory.exists():
      return
    for path in self.directory.iterdir():
      if path.name.endswith(_UNFINISHED):
        path.rmtree()

  def __enter__(self) -> 'Checkpointer':
    return self

  def __exit__(self, *exc) -> None:
    self.close()


# --- Reading parameters of either layout --------------------------------------------------
