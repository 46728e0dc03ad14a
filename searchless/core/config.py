"""Experiment configs as values: overrides, checks, and saved JSON.

An experiment config (an `ml_collections.ConfigDict`: model, data, optimiser and
schedule) is the single source of truth for a run. Its fields and defaults are
``searchless.configs.base()``; named configs are ``searchless.configs`` (``configs/<name>.py``).
`load` imports a config file's ``get_config()``, applies ``key=value`` overrides
(type-checked against the field they replace), checks the ranges and freezes it;
`to_json` / `from_json` save it with every checkpoint so evaluation and play rebuild
exactly the trained model.

>>> c = ml_collections.ConfigDict({'optim': {'learning_rate': 1e-4}, 'model': {'num_layers': 4}})
>>> override(c, 'optim.learning_rate=3e-4'); c.optim.learning_rate
0.0003
>>> override(c, 'model.num_layers=four')
Traceback (most recent call last):
...
searchless.plumbing.errors.BadInput: override model.num_layers=four: expected int, got 'four'
"""

import ast
from collections.abc import Sequence
import importlib.util
import json
import pathlib
from typing import Any, TypeAlias

import ml_collections

from searchless.plumbing import errors


Config: TypeAlias = ml_collections.ConfigDict | ml_collections.FrozenConfigDict  # An experiment config.


def _parse_value(text: str):
  try:
    return ast.literal_eval(text)
  except (ValueError, SyntaxError):
    return text  # A bare string, e.g. data.train=/path/*.bag


def _field_type(config: ml_collections.ConfigDict, key: str):
  *parents, leaf = key.split('.')
  node = config
  for parent in parents:
    if parent not in node or not isinstance(node[parent], ml_collections.ConfigDict):
      raise KeyError(f'override {key}: no config section {parent!r}')
    node = node[parent]
  if leaf not in node:
    raise KeyError(f'override {key}: no such field (fields here: {sorted(node.keys())})')
  return node.get_type(leaf), node, leaf


def override(config: ml_collections.ConfigDict, assignment: str) -> None:
  """Applies one ``dotted.key=value`` to an unfrozen config, checking the type."""
  key, sep, text = assignment.partition('=')
  if not sep:
    raise errors.BadInput(f'override {assignment!r}: expected key=value')
  field_type, node, leaf = _field_type(config, key.strip())
  value = _parse_value(text.strip())
  if field_type is float and isinstance(value, int) and not isinstance(value, bool):
    value = float(value)
  if field_type is str and not isinstance(value, str):
    value = text.strip()
  if value is not None and field_type not in (type(None), object) and not isinstance(value, field_type):
    raise errors.BadInput(f'override {assignment}: expected {field_type.__name__}, got {text.strip()!r}')
  if isinstance(value, bool) and field_type is int:
    raise errors.BadInput(f'override {assignment}: expected int, got a bool')
  node[leaf] = value


def from_file(path: str | pathlib.Path) -> ml_collections.ConfigDict:
  """Imports the `get_config()` of the ``.py`` file `path` and returns its config (unfrozen).

  Configs by name (``tiny``) are `searchless.configs`' to find: ``configs.get('tiny')``.
  """
  file = pathlib.Path(path)
  if not file.is_file():
    raise errors.MissingInput(f'config file {str(path)!r} not found')
  spec = importlib.util.spec_from_file_location(f'searchless_config_{file.stem}', file)
  if spec is None or spec.loader is None:
    raise errors.BadInput(f'config file {str(path)!r} is not a Python file')
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  if not hasattr(module, 'get_config'):
    raise AttributeError(f'{path} has no get_config()')
  return module.get_config()


# The allowed range of each numeric field: (smallest, inclusive?). A field missing from a config is not checked.
RANGES: dict[str, tuple[float, bool]] = {  # The model's own fields are `ModelConfig`'s to check.
  'num_return_buckets': (2, True),
  'data.batch_size': (1, True),
  'data.worker_count': (0, True),
  'data.num_records': (1, True),
  'data.max_moves': (1, True),
  'loss.value_weight': (0, True),
  'optim.learning_rate': (0, False),
  'optim.max_grad_norm': (0, False),
  'optim.ema_decay': (0, True),
  'optim.cooldown_steps': (0, True),
  'loss.hl_gauss_sigma': (0, False),
  'train.num_steps': (1, True),
  'train.max_seconds': (0, True),
  'train.log_every': (1, True),
  'train.eval_every': (1, True),
  'train.eval_records': (1, True),
  'train.ckpt_every': (1, True),
  'train.ckpt_keep': (1, True),
  'train.fsdp': (1, True),
  'train.micro_batch': (0, True),
}


def check(config: Config) -> None:
  """Raises ValueError naming the first field outside its `RANGES` range (NaN included).

  >>> check(ml_collections.ConfigDict({'train': {'num_steps': -5}}))
  Traceback (most recent call last):
  ...
  searchless.plumbing.errors.BadInput: train.num_steps must be >= 1, got -5
  """
  for name, (low, inclusive) in RANGES.items():
    value: Any = config
    for part in name.split('.'):
      value = value.get(part) if hasattr(value, 'get') else None
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
      continue
    if not (value >= low if inclusive else value > low):  # NaN fails both.
      raise errors.BadInput(f'{name} must be {">=" if inclusive else ">"} {low}, got {value}')
  if 'optim' in config and config.optim.get('ema_decay') is not None and not config.optim.ema_decay <= 1:
    raise errors.BadInput(f'optim.ema_decay must be <= 1, got {config.optim.ema_decay}')
  cooldown = config.get('optim', {}).get('cooldown_steps') or 0
  if cooldown and 'train' in config and cooldown > config.train.num_steps:
    raise errors.BadInput(
      f'optim.cooldown_steps={cooldown} must be <= train.num_steps={config.train.num_steps}: the '
      'cooldown ends at train.num_steps'
    )


def load(path: str | pathlib.Path, overrides: Sequence[str] = ()) -> ml_collections.FrozenConfigDict:
  """Imports the `get_config()` of the file `path`, applies `overrides`, checks and freezes it."""
  config = from_file(path)
  for assignment in overrides:
    override(config, assignment)
  check(config)
  return ml_collections.FrozenConfigDict(config)


def to_json(config: Config) -> str:
  return json.dumps(_to_dict(config), indent=2, sort_keys=True)


def _to_dict(config) -> dict:
  out = {}
  for key, value in config.items():
    out[key] = (
      _to_dict(value) if isinstance(value, (ml_collections.ConfigDict, ml_collections.FrozenConfigDict)) else value
    )
  return out


def from_json(text: str) -> ml_collections.FrozenConfigDict:
  return ml_collections.FrozenConfigDict(json.loads(text))
