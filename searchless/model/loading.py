"""Models saved to be played or evaluated: finding and loading their parameters, and exporting one.

Reads both checkpoint layouts (`searchless.training.checkpoint` describes them): the
published ChessBench layout ``<model>/<step>/{params,params_ema}`` and ours, whose
step holds ``params``, ``params_ema``, ``config/config.json`` (the experiment) and
``probe/probe.json`` (outputs on a fixed input, checked on loading). `resolve`
finds the parameters a path means (a workdir, a checkpoints dir, a step dir, a
params dir, a shipped model's name: ``pretrained``, ``pretrained-transformer``, or a downloaded published
one's: ``chessbench-9M`` ... ``chessbench-270M``, `searchless.core.published`);
`load_params` and `load_model` read them as numpy arrays, whatever devices saved
them; `export` writes a model to play (``params_ema`` in bfloat16 + its config).

>>> model_config, params, experiment = load_model('pretrained-transformer')
>>> model_config.packed, experiment.policy
(True, 'action_value')
"""

import hashlib
import importlib.resources
import json
from collections.abc import Callable
from collections.abc import Mapping
import os
import pathlib
from typing import Any

import jax
import ml_collections
import numpy as np
import orbax.checkpoint as ocp
from etils import epath

from searchless.core import config as config_lib
from searchless.core import published
from searchless.model import network
from searchless.model import transformer
from searchless.model.config import ModelConfig
from searchless.plumbing import errors

PyTree = Any  # Nested dicts of arrays (haiku params).

PARAMS, PARAMS_EMA, CONFIG = 'params', 'params_ema', 'config'  # A step's items (folders).
CONFIG_FILE = 'config.json'
PROBE, PROBE_FILE = 'probe', 'probe.json'  # `model.probe` of each parameter item, checked on loading.
PROBE_TOLERANCE = 0.02  # Largest total variation distance between a saved and a recomputed probe.
RUN_FILES = ('summary.json', 'metrics.jsonl', 'config.json')  # A run's record, exported with it (`export`).
EXPORT_METADATA = 'export.json'  # Where and how an exported model was trained (`export`'s metadata).
PRETRAINED = 'pretrained'  # The name of the model shipped in the package: the strongest one.
PRETRAINED_TRANSFORMER = 'pretrained-transformer'  # The strongest shipped model of the paper's architecture.
# Each shipped model's name -> its folder of package data (searchless/<folder>/).
SHIPPED = {PRETRAINED: 'pretrained', PRETRAINED_TRANSFORMER: 'pretrained_transformer'}


def metadata_tree(metadata: Any) -> PyTree:
  """The tree of array metadata (newer orbax wraps it in a TreeMetadata)."""
  return getattr(metadata, 'tree', metadata)


def latest_step(directory: str | os.PathLike) -> int | None:
  """The largest step of the step folders in `directory` that hold parameters (a checkpoints folder, or a published
  model's); None when there is none."""
  steps = _steps(epath.Path(directory))
  return steps[-1] if steps else None


def _steps(directory: epath.Path) -> list[int]:
  """Step subdirectories holding parameters (unfinished orbax temporaries have other names)."""
  if not directory.is_dir():
    return []
  return sorted(
    int(child.name)
    for child in directory.iterdir()
    if child.name.isdigit() and ((child / PARAMS).exists() or (child / PARAMS_EMA).exists())
  )


def _is_pytree_dir(directory: epath.Path) -> bool:
  return any((directory / name).exists() for name in ('_METADATA', '_CHECKPOINT_METADATA', 'checkpoint'))


def resolve(path: str, *, ema: bool = True) -> epath.Path:
  """Returns the parameter checkpoint that `path` designates.

  `path` may be a workdir (``<path>/checkpoints/<step>``), a model or checkpoints
  dir (the largest step), a step dir, or a ``params``/``params_ema`` dir itself. A
  step prefers ``params_ema`` when `ema` (falling back to ``params``), else ``params``.
  A published checkpoint's name (``chessbench-270M``) is its downloaded folder; one
  not downloaded is a FileNotFoundError giving the command that fetches it.
  """
  if (folder := published.checkpoint_folder(str(path))) is not None and not os.path.exists(path):
    if not folder.is_dir():
      raise errors.MissingInput(
        f'{path} is not downloaded (no {folder}): run `{published.download_command(str(path))}`'
        f' (it looks in ${published.DATA_ENV}, else ~/.cache/searchless)'
      )
    path = str(folder)
  if str(path) in SHIPPED:
    root = pretrained_dir(str(path))
    if not (root / PARAMS_EMA).exists():
      raise errors.MissingInput(
        f'the {path} model is missing from this installation ({root}): it ships as package data; reinstall searchless'
      )
    return root / PARAMS_EMA
  root = epath.Path(path if '://' in str(path) else os.path.abspath(path))  # Orbax wants absolute paths.
  if not root.exists():
    raise errors.MissingInput(f'checkpoint path {path} does not exist')
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
    raise errors.MissingInput(
      f'no parameters found at {path}: expected a params or params_ema checkpoint, a step'
      ' dir containing one, or a dir of step dirs'
    )
  order = (PARAMS_EMA, PARAMS) if ema else (PARAMS,)
  for name in order:
    if (step_dir / name).exists():
      return step_dir / name
  raise errors.MissingInput(f'no {" or ".join(order)} checkpoint in {step_dir}')


def pretrained_dir(name: str = PRETRAINED) -> epath.Path:
  """The directory of the shipped model `name` (a key of SHIPPED; it may be absent from a source checkout)."""
  return epath.Path(str(importlib.resources.files('searchless') / SHIPPED[name]))


def model_folder(model: str) -> pathlib.Path:
  """The folder of `model`: a shipped model's name (its package folder, `pretrained_dir`), a published one's (its
  download folder, `published.checkpoint_folder`), else a path (absolute).

  >>> model_folder('runs/demo') == pathlib.Path('runs/demo').resolve()
  True
  """
  if model in SHIPPED:
    return pathlib.Path(str(pretrained_dir(model)))
  if (folder := published.checkpoint_folder(model)) is not None and not os.path.exists(model):
    return folder
  return pathlib.Path(model).resolve()


def is_name(path: str) -> bool:
  """Whether `path` is a model's name (shipped, or published) rather than a folder.

  >>> is_name('pretrained'), is_name('chessbench-270M'), is_name('runs/demo')
  (True, True, False)
  """
  return path in SHIPPED or (published.checkpoint_model(path) is not None and not os.path.exists(path))


def trained_policy(path: str, experiment: ml_collections.FrozenConfigDict | None) -> str | None:
  """The policy the checkpoint at `path` was trained for: its experiment config's; a published model's by its name
  (``chessbench-9M_state_value``, or a folder named ``9M_state_value``: state_value); else None (action_value is
  the default).

  >>> trained_policy('chessbench-9M_behavioral_cloning', None)
  'behavioral_cloning'
  """
  if experiment is not None:
    return experiment.policy
  folder = os.path.basename(os.path.normpath(str(path)))  # A published-layout folder keeps the model's name.
  model = published.checkpoint_model(str(path)) or (folder if folder in published.CHECKPOINTS else None)
  return published.CHECKPOINTS.get(model) if model else None


def _restore_numpy(directory: epath.Path) -> dict:
  """Restores a PyTree checkpoint as numpy arrays, whatever sharding it was saved with.

  Parameters saved in bfloat16 (`export`) come back as float32, the dtype the
  model keeps its parameters in.
  """
  handler = ocp.PyTreeCheckpointHandler()
  try:
    tree = metadata_tree(handler.metadata(directory))  # {module: {name: ArrayMetadata}}
    restore_args = jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), tree)
    restored = handler.restore(directory, args=ocp.args.PyTreeRestore(restore_args=restore_args))
  finally:
    handler.close()
  return jax.tree.map(lambda a: a.astype(np.float32) if a.dtype == jax.numpy.bfloat16 else a, restored)


def export(
  directory: str,
  params: PyTree,
  config: config_lib.Config,
  *,
  dtype: str = 'bfloat16',
  run: str | None = None,
  metadata: Mapping[str, Any] | None = None,
) -> epath.Path:
  """Writes a model to play: `params` cast to `dtype` as ``params_ema`` and `config` as
  ``config/config.json`` (the layout `load_model` reads). Returns the directory.

  With `run` (a training workdir), the run's record travels with it: its ``summary.json``, ``metrics.jsonl``
  and ``config.json`` as ``train_summary.json``, ``train_metrics.jsonl`` and ``train_config.json``. `metadata`
  (where and how it was trained, e.g. the device and its seconds) is written as ``export.json``.
  """
  out = epath.Path(os.path.abspath(directory))
  if out.exists():
    raise errors.OutputExists(f'{out} exists: export writes a new directory')
  out.mkdir(parents=True)
  cast = jax.tree.map(lambda a: np.asarray(a, np.float32).astype(jax.numpy.dtype(dtype)), params)
  with ocp.PyTreeCheckpointer() as checkpointer:
    checkpointer.save(out / PARAMS_EMA, cast)
  (out / CONFIG).mkdir()
  (out / CONFIG / CONFIG_FILE).write_text(config_lib.to_json(config))
  as_loaded = jax.tree.map(lambda a: np.asarray(a, np.float32), cast)  # What `load_model` will compute with.
  (out / PROBE).mkdir()
  (out / PROBE / PROBE_FILE).write_text(
    json.dumps({PARAMS_EMA: network.probe(ModelConfig.from_config(config), as_loaded)})
  )
  if run is not None:
    for name in RUN_FILES:
      (out / f'train_{name}').write_bytes((epath.Path(run) / name).read_bytes())
  if metadata is not None:
    (out / EXPORT_METADATA).write_text(json.dumps(dict(metadata), indent=2) + '\n')
  return out


def load_params(path: str, *, ema: bool = True) -> dict:
  """Returns haiku parameters (numpy arrays) from a checkpoint of either layout.

  See `resolve` for the accepted paths; `ema=False` reads ``params`` instead of
  ``params_ema``. Nothing about the saving devices or sharding is needed.
  """
  return _restore_numpy(resolve(path, ema=ema))


def experiment_config(params_dir: epath.Path) -> ml_collections.FrozenConfigDict | None:
  """The experiment config saved beside the parameters at `params_dir` (None: a published checkpoint)."""
  config_file = params_dir.parent / CONFIG / CONFIG_FILE
  if not config_file.exists():
    return None
  return config_lib.from_json(config_file.read_text())


def load_model(
  path: str, *, ema: bool = True, num_heads: int | None = None, check: bool = True
) -> tuple[ModelConfig, dict, ml_collections.FrozenConfigDict | None]:
  """Returns (ModelConfig, params, experiment config or None) of a checkpoint.

  Our checkpoints carry their experiment config, which defines the model. A
  published checkpoint has none: the architecture is inferred from parameter
  shapes (`model.infer_config`; `num_heads` for models outside the published
  table) and the policy is action_value with `output_size` return buckets.
  Parameters that do not fit their config are a ValueError: by their shapes, then
  by their saved probe (one forward pass, `check_fit`). `check=False` leaves the
  probe to the caller (`check_fit`, e.g. through the predictor it plays with).
  """
  params_dir = resolve(path, ema=ema)
  params = _restore_numpy(params_dir)
  experiment = experiment_config(params_dir)
  if experiment is None:
    try:
      return transformer.infer_config(params, num_heads=num_heads), params, None
    except ValueError as error:  # Not the parameters of a published model: say whose they are.
      raise errors.BadInput(f'parameters at {params_dir} are not a model without a config: {error}') from None
  model_config = ModelConfig.from_config(experiment)
  if model_config.kind == 'graph':
    if check:
      _check_fit(params_dir, model_config, params)
    return model_config, params, experiment
  try:
    inferred = transformer.infer_config(params, num_heads=model_config.num_heads)
  except ValueError:  # Not a transformer's parameters (e.g. a graph model's): name the first that does not fit.
    _check_shapes(params_dir, model_config, params)
    raise
  shape_fields = (
    'embedding_dim',
    'num_layers',
    'widening_factor',
    'output_size',
    'max_sequence_length',
    'apply_post_ln',
    'apply_qk_layernorm',
  )
  mismatched = [f for f in shape_fields if getattr(inferred, f) != getattr(model_config, f)]
  if mismatched:
    raise errors.BadInput(
      f'parameters at {params_dir} do not fit their config: '
      + ', '.join(f'{f} {getattr(inferred, f)} != {getattr(model_config, f)}' for f in mismatched)
    )
  if num_heads is not None and num_heads != model_config.num_heads:
    raise errors.BadInput(
      f'num_heads {num_heads} contradicts the checkpoint at {params_dir}: its config has '
      f'num_heads {model_config.num_heads}'
    )
  if check:
    _check_fit(params_dir, model_config, params)  # The structural priors' tables (e.g. per-head square biases).
  return model_config, params, experiment


def check_fit(
  path: str,
  model_config: ModelConfig,
  params: dict,
  *,
  ema: bool = True,
  probe: Callable[[], list[float]] | None = None,
) -> None:
  """Refuses (ValueError) the parameters of the checkpoint at `path` (`load_model(path, check=False)`'s) when
  they are not those of their config's model: what `load_model` checks by default. `probe` computes
  `network.probe`'s output another way (a predictor's call, in a shape its first move uses: one compile for both)."""
  params_dir = resolve(path, ema=ema)
  if experiment_config(params_dir) is not None:
    _check_fit(params_dir, model_config, params, probe)


def _check_fit(
  params_dir: epath.Path, model_config: ModelConfig, params: dict, probe: Callable[[], list[float]] | None = None
) -> None:
  """Refuses parameters that are not those of their config's model: by the saved probe where there is one (one
  forward pass: what the parameters computed when saved, reproduced), else by their names and shapes."""
  saved = _saved_probe(params_dir)
  if saved is None:
    _check_shapes(params_dir, model_config, params)
    return
  memo = _probe_memo(params_dir, model_config, saved)
  if memo is not None and memo.exists():  # These files, with this code, reproduced their probe before.
    return
  try:
    now = probe() if probe is not None else network.probe(model_config, params)
  except Exception:  # Parameters of other names or shapes fail the forward pass: name the first one.
    _check_shapes(params_dir, model_config, params)
    raise
  _check_probe(params_dir, model_config, saved, now)
  if memo is not None:
    try:
      memo.parent.mkdir(parents=True, exist_ok=True)
      memo.touch()
    except OSError:  # A read-only cache: the probe runs again next time.
      pass


def _probe_memo(params_dir: epath.Path, model_config: ModelConfig, saved: list[float]) -> pathlib.Path | None:
  """Where a passed probe of the parameters at `params_dir` is remembered: a file named by their files (names,
  sizes, modification times), their config, their saved probe and the model's code, in JAX's persistent
  compilation cache folder (`searchless.play.compilation_cache`; clearing the folder clears it). None when that
  cache is off."""
  cache = getattr(jax.config, 'jax_compilation_cache_dir')  # Typed stubs lack the attribute.
  if not cache:
    return None
  key = hashlib.sha256(f'{model_config!r} {saved} jax {jax.__version__}\n'.encode())
  code = pathlib.Path(__file__).parent
  for folder, files in ((str(params_dir), None), (str(code), '.py')):
    for root, _, names in sorted(os.walk(folder)):
      for name in sorted(n for n in names if files is None or n.endswith(files)):
        stat = os.stat(os.path.join(root, name))
        key.update(f'{os.path.relpath(os.path.join(root, name), folder)} {stat.st_size} {stat.st_mtime_ns}\n'.encode())
  return pathlib.Path(cache) / 'searchless-probes' / key.hexdigest()


def _check_shapes(params_dir: epath.Path, model_config: ModelConfig, params: dict) -> None:
  """Refuses parameters whose names or shapes are not those of their config's model."""
  want = {
    jax.tree_util.keystr(k): tuple(a.shape)
    for k, a in jax.tree_util.tree_leaves_with_path(jax.eval_shape(lambda: network.init_params(model_config)))
  }
  got = {jax.tree_util.keystr(k): tuple(np.shape(a)) for k, a in jax.tree_util.tree_leaves_with_path(params)}
  if want != got:
    name = next(k for k in sorted(set(want) | set(got)) if want.get(k) != got.get(k))
    raise errors.BadInput(
      f'parameters at {params_dir} do not fit their config: {name} is '
      f"{got.get(name, 'missing')} there, {want.get(name, 'missing')} in the config's {model_config.kind} model"
    )


def _saved_probe(params_dir: epath.Path) -> list[float] | None:
  """The `model.probe` output saved with the parameters at `params_dir` (None: saved before probes existed)."""
  probe_file = params_dir.parent / PROBE / PROBE_FILE
  if not probe_file.exists():
    return None
  return json.loads(probe_file.read_text()).get(params_dir.name)


def _check_probe(params_dir: epath.Path, model_config: ModelConfig, saved: list[float], now: list[float]) -> None:
  """Refuses parameters whose saved `model.probe` output (`saved`) this config does not reproduce (`now`)."""
  distance = network.probe_distance(saved, now)
  if distance > PROBE_TOLERANCE:
    raise errors.BadInput(
      f'parameters at {params_dir} do not compute what they computed when saved (probe distance {distance:.3f} >'
      f' {PROBE_TOLERANCE}): the config at {params_dir.parent / CONFIG / CONFIG_FILE} was changed in a field the'
      f' parameter shapes do not show (num_heads {model_config.num_heads}, packing {model_config.packing!r},'
      ' move_attention, joint_layers, use_causal_mask?)'
    )
