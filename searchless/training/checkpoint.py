"""Orbax checkpoints: ours (training) and the published ChessBench layout.

Published layout (read only): ``<model>/<step>/{params,params_ema}``, each an
orbax PyTree checkpoint of the haiku parameters, e.g. ``checkpoints/270M/6400000/``.

Our layout, written by `Checkpointer` (one orbax ``CheckpointManager`` step per save)::

    <workdir>/checkpoints/<step>/
        params/              StandardCheckpointHandler   float32 parameters
        params_ema/          StandardCheckpointHandler   their EMA (evaluation, play)
        opt_state/           StandardCheckpointHandler   optax state
        data_iter/           grain CheckpointHandler     iterator state, one JSON per process (optional)
        config/config.json   JsonCheckpointHandler       searchless.training.config.to_json of the experiment
        probe/probe.json     JsonCheckpointHandler       {params, params_ema: model.probe outputs} (optional)
        _CHECKPOINT_METADATA                             orbax's step metadata

so ``params``/``params_ema`` read like a published step and `load_params`,
`load_model` accept either layout (a workdir, a checkpoints dir, a step dir or a
params dir). The step's orbax metadata records whether the iterator state was
bytes (`grain.DataLoader`) or a dict (`DatasetIterator`).

Writers: `Checkpointer`, the one save API (items by name, async saves, restore
into any sharding), and `export` (a model to play: ``params_ema`` in bfloat16 +
``config/config.json``, the layout of the model shipped in the package). Readers: `load_params`, `load_model` (either layout, or the name
``pretrained``: the model shipped in the package, ``searchless/pretrained/``;
write ``./pretrained`` for a local directory of that name).

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
>>> load_params(workdir)['linear']['w'].sum()
np.float32(6.0)
"""

import dataclasses
import importlib.resources
import json
import os
from collections.abc import Callable
from typing import Any

import jax
import ml_collections
import numpy as np
import orbax.checkpoint as ocp
from etils import epath

from searchless.training import config as config_lib
from searchless.model import transformer as model_lib

import grain
from grain import checkpoint as grain_checkpoint  # Its iterator handler, registered with orbax.

PyTree = Any  # Nested dicts/tuples of arrays (haiku params, optax state).
Config = config_lib.Config

PARAMS, PARAMS_EMA, OPT_STATE, DATA_ITER, CONFIG = 'params', 'params_ema', 'opt_state', 'data_iter', 'config'
CONFIG_FILE = 'config.json'
PROBE, PROBE_FILE = 'probe', 'probe.json'  # `model.probe` of each parameter item, checked on loading.
PROBE_TOLERANCE = 0.02  # Largest total variation distance between a saved and a recomputed probe.
_STATE_KIND = 'data_iter_state'  # Step custom metadata: 'bytes' | 'dict' | None.
_ARRAY_ITEMS = (PARAMS, PARAMS_EMA, OPT_STATE)
PRETRAINED = 'pretrained'  # The name of the model shipped in the package: the strongest one.
PRETRAINED_TRANSFORMER = 'pretrained-transformer'  # The strongest shipped model of the paper's architecture.
# Each shipped model's name -> its folder of package data (searchless/<folder>/).
SHIPPED = {PRETRAINED: 'pretrained', PRETRAINED_TRANSFORMER: 'pretrained_transformer'}


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


def _tree(metadata) -> PyTree:
  """The tree of array metadata (newer orbax wraps it in a TreeMetadata)."""
  return getattr(metadata, 'tree', metadata)


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
  Every process of a multi-host job must make the same calls.
  """

  def __init__(self, directory: str, *, keep: int | None = None, async_save: bool = True):
    # Orbax wants absolute paths: a relative one is taken from the current directory, as every other path argument.
    self.directory = epath.Path(directory if '://' in str(directory) else os.path.abspath(directory))
    options = ocp.CheckpointManagerOptions(
        max_to_keep=keep, create=True, enable_async_checkpointing=async_save
    )
    self._manager = ocp.CheckpointManager(self.directory, options=options, handler_registry=_registry())

  def latest_step(self) -> int | None:
    return self._manager.latest_step()

  def all_steps(self) -> list[int]:
    return sorted(self._manager.all_steps())

  def save(self, step: int, *, params: PyTree, params_ema: PyTree, opt_state: PyTree, config: Config,
           data_iter: Any = None, data_iter_state: bytes | dict | None = None,
           probes: dict[str, list[float]] | None = None) -> bool:
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
    return self._manager.save(step, args=ocp.args.Composite(**items), force=True,
                              custom_metadata={_STATE_KIND: state_kind})

  def restore(self, step: int | None = None, *, params: PyTree = None, params_ema: PyTree = None,
              opt_state: PyTree = None, data_iter: Any = None) -> Restored:
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
        raise FileNotFoundError(f'no checkpoint in {self.directory}')
    step_dir = self.directory / str(step)
    if not step_dir.exists():
      raise FileNotFoundError(f'no checkpoint for step {step} in {self.directory} (steps: {self.all_steps()})')
    targets = {PARAMS: params, PARAMS_EMA: params_ema, OPT_STATE: opt_state}
    items = {}
    for name, target in targets.items():
      saved = lambda name=name: _tree(self._manager.item_metadata(step)[name])
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
    self._manager.wait_until_finished()

  def close(self) -> None:
    self._manager.close()

  def __enter__(self) -> 'Checkpointer':
    return self

  def __exit__(self, *exc) -> None:
    self.close()


# --- Reading parameters of either layout --------------------------------------------------


def _steps(directory: epath.Path) -> list[int]:
  """Step subdirectories holding parameters (unfinished orbax temporaries have other names)."""
  if not directory.is_dir():
    return []
  return sorted(
      int(child.name) for child in directory.iterdir()
      if child.name.isdigit() and ((child / PARAMS).exists() or (child / PARAMS_EMA).exists())
  )


def _is_pytree_dir(directory: epath.Path) -> bool:
  return any((directory / name).exists() for name in ('_METADATA', '_CHECKPOINT_METADATA', 'checkpoint'))


def resolve(path: str, *, ema: bool = True) -> epath.Path:
  """Returns the parameter checkpoint that `path` designates.

  `path` may be a workdir (``<path>/checkpoints/<step>``), a model or checkpoints
  dir (the largest step), a step dir, or a ``params``/``params_ema`` dir itself. A
  step prefers ``params_ema`` when `ema` (falling back to ``params``), else ``params``.
  """
  if str(path) in SHIPPED:
    root = pretrained_dir(str(path))
    if not (root / PARAMS_EMA).exists():
      raise FileNotFoundError(f'the {path} model is missing from this installation ({root}): reinstall '
                              'searchless, or make it with `python -m searchless.commands.pretrained ... --install`')
    return root / PARAMS_EMA
  root = epath.Path(path if '://' in str(path) else os.path.abspath(path))  # Orbax wants absolute paths.
  if not root.exists():
    raise FileNotFoundError(f'checkpoint path {path} does not exist')
  candidates = [root, root / 'checkpoints']
  for directory in candidates:
    if (directory / PARAMS).exists() or (directory / PARAMS_EMA).exists():
      step_dir = directory
      break
    steps = _steps(directory)
    if steps:
      step_dir = directory / str(steps[-1])
      break
  else:
    if root.is_dir() and _is_pytree_dir(root):
      return root
    raise FileNotFoundError(
        f'no parameters found at {path}: expected a params or params_ema checkpoint, a step'
        ' dir containing one, or a dir of step dirs'
    )
  order = (PARAMS_EMA, PARAMS) if ema else (PARAMS,)
  for name in order:
    if (step_dir / name).exists():
      return step_dir / name
  raise FileNotFoundError(f'no {" or ".join(order)} checkpoint in {step_dir}')


def pretrained_dir(name: str = PRETRAINED) -> epath.Path:
  """The directory of the shipped model `name` (a key of SHIPPED; it may be absent from a source checkout)."""
  return epath.Path(str(importlib.resources.files('searchless') / SHIPPED[name]))


def _restore_numpy(directory: epath.Path) -> dict:
  """Restores a PyTree checkpoint as numpy arrays, whatever sharding it was saved with.

  Parameters saved in bfloat16 (`export`) come back as float32, the dtype the
  model keeps its parameters in.
  """
  handler = ocp.PyTreeCheckpointHandler()
  try:
    tree = _tree(handler.metadata(directory))  # {module: {name: ArrayMetadata}}
    restore_args = jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), tree)
    restored = handler.restore(directory, args=ocp.args.PyTreeRestore(restore_args=restore_args))
  finally:
    handler.close()
  return jax.tree.map(lambda a: a.astype(np.float32) if a.dtype == jax.numpy.bfloat16 else a, restored)


def export(directory: str, params: PyTree, config: Config, *, dtype: str = 'bfloat16') -> epath.Path:
  """Writes a model to play: `params` cast to `dtype` as ``params_ema`` and `config` as
  ``config/config.json`` (the layout `load_model` reads). Returns the directory."""
  out = epath.Path(os.path.abspath(directory))
  if out.exists():
    raise FileExistsError(f'{out} exists: export writes a new directory')
  out.mkdir(parents=True)
  cast = jax.tree.map(lambda a: np.asarray(a, np.float32).astype(jax.numpy.dtype(dtype)), params)
  with ocp.PyTreeCheckpointer() as checkpointer:
    checkpointer.save(out / PARAMS_EMA, cast)
  (out / CONFIG).mkdir()
  (out / CONFIG / CONFIG_FILE).write_text(config_lib.to_json(config))
  as_loaded = jax.tree.map(lambda a: np.asarray(a, np.float32), cast)  # What `load_model` will compute with.
  (out / PROBE).mkdir()
  (out / PROBE / PROBE_FILE).write_text(
      json.dumps({PARAMS_EMA: model_lib.probe(model_lib.ModelConfig.from_config(config), as_loaded)}))
  return out


def load_params(path: str, *, ema: bool = True) -> dict:
  """Returns haiku parameters (numpy arrays) from a checkpoint of either layout.

  See `resolve` for the accepted paths; `ema=False` reads ``params`` instead of
  ``params_ema``. Nothing about the saving devices or sharding is needed.
  """
  return _restore_numpy(resolve(path, ema=ema))


def _experiment_config(params_dir: epath.Path) -> ml_collections.FrozenConfigDict | None:
  config_file = params_dir.parent / CONFIG / CONFIG_FILE
  if not config_file.exists():
    return None
  return config_lib.from_json(config_file.read_text())


def load_model(
    path: str, *, ema: bool = True, num_heads: int | None = None
) -> tuple[model_lib.ModelConfig, dict, ml_collections.FrozenConfigDict | None]:
  """Returns (ModelConfig, params, experiment config or None) of a checkpoint.

  Our checkpoints carry their experiment config, which defines the model. A
  published checkpoint has none: the architecture is inferred from parameter
  shapes (`model.infer_config`; `num_heads` for models outside the published
  table) and the policy is action_value with `output_size` return buckets.
  """
  params_dir = resolve(path, ema=ema)
  params = _restore_numpy(params_dir)
  experiment = _experiment_config(params_dir)
  if experiment is None:
    return model_lib.infer_config(params, num_heads=num_heads), params, None
  model_config = model_lib.ModelConfig.from_config(experiment)
  if model_config.kind == 'graph':
    _check_graph_shapes(params_dir, model_config, params)
    _check_probe(params_dir, model_config, params)
    return model_config, params, experiment
  inferred = model_lib.infer_config(params, num_heads=model_config.num_heads)
  shape_fields = ('embedding_dim', 'num_layers', 'widening_factor', 'output_size',
                  'max_sequence_length', 'apply_post_ln', 'apply_qk_layernorm')
  mismatched = [f for f in shape_fields if getattr(inferred, f) != getattr(model_config, f)]
  if mismatched:
    raise ValueError(
        f'parameters at {params_dir} do not fit their config: '
        + ', '.join(f'{f} {getattr(inferred, f)} != {getattr(model_config, f)}' for f in mismatched)
    )
  if num_heads is not None and num_heads != model_config.num_heads:
    raise ValueError(f'num_heads {num_heads} contradicts the checkpoint at {params_dir}: its config has '
                     f'num_heads {model_config.num_heads}')
  _check_probe(params_dir, model_config, params)
  return model_config, params, experiment


def _check_graph_shapes(params_dir: epath.Path, model_config: model_lib.ModelConfig, params: dict) -> None:
  """Refuses graph parameters whose names or shapes are not those of their config's model."""
  want = {jax.tree_util.keystr(k): tuple(a.shape) for k, a in
          jax.tree_util.tree_leaves_with_path(jax.eval_shape(lambda: model_lib.init_params(model_config)))}
  got = {jax.tree_util.keystr(k): tuple(np.shape(a)) for k, a in jax.tree_util.tree_leaves_with_path(params)}
  if want != got:
    name = next(k for k in sorted(set(want) | set(got)) if want.get(k) != got.get(k))
    raise ValueError(f'parameters at {params_dir} do not fit their config: {name} is '
                     f"{got.get(name, 'missing')} there, {want.get(name, 'missing')} in the config's graph model")


def _check_probe(params_dir: epath.Path, model_config: model_lib.ModelConfig, params: dict) -> None:
  """Refuses parameters whose saved `model.probe` output this config does not reproduce."""
  probe_file = params_dir.parent / PROBE / PROBE_FILE
  if not probe_file.exists():  # Saved before probes existed.
    return
  saved = json.loads(probe_file.read_text()).get(params_dir.name)
  if saved is None:
    return
  distance = model_lib.probe_distance(saved, model_lib.probe(model_config, params))
  if distance > PROBE_TOLERANCE:
    raise ValueError(
        f'parameters at {params_dir} do not compute what they computed when saved (probe distance {distance:.3f} >'
        f' {PROBE_TOLERANCE}): the config at {params_dir.parent / CONFIG / CONFIG_FILE} was changed in a field the'
        f' parameter shapes do not show (num_heads {model_config.num_heads}, packing {model_config.packing!r},'
        ' move_attention, joint_layers, use_causal_mask?)')
