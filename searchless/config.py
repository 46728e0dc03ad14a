"""Experiment configs: Python files with `get_config()`, overrides, and saved JSON.

A config file (``configs/<name>.py``) is the single source of truth for a run:
model, data, optimiser and schedule. `load` imports it, applies ``key=value``
overrides (type-checked against the field they replace) and returns a frozen
config; `to_json` / `from_json` save it with every checkpoint so evaluation and
play rebuild exactly the trained model.

>>> import importlib.resources, pathlib
>>> c = load(str(pathlib.Path(__file__).parents[1] / 'configs' / 'tiny.py'), ['optim.learning_rate=3e-4'])
>>> c.optim.learning_rate, c.model.num_layers
(0.0003, 4)
>>> load(str(pathlib.Path(__file__).parents[1] / 'configs' / 'tiny.py'), ['model.num_layers=four'])
Traceback (most recent call last):
...
ValueError: override model.num_layers=four: expected int, got 'four'
"""

import ast
import importlib.util
import json
import pathlib

import ml_collections


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
    raise ValueError(f'override {assignment!r}: expected key=value')
  field_type, node, leaf = _field_type(config, key.strip())
  value = _parse_value(text.strip())
  if field_type is float and isinstance(value, int) and not isinstance(value, bool):
    value = float(value)
  if field_type is str and not isinstance(value, str):
    value = text.strip()
  if value is not None and field_type not in (type(None), object) and not isinstance(value, field_type):
    raise ValueError(f'override {assignment}: expected {field_type.__name__}, got {text.strip()!r}')
  if isinstance(value, bool) and field_type is int:
    raise ValueError(f'override {assignment}: expected int, got a bool')
  node[leaf] = value


def load(path: str, overrides: list[str] = ()) -> ml_collections.FrozenConfigDict:
  """Imports `path`'s `get_config()`, applies `overrides`, returns it frozen."""
  file = pathlib.Path(path)
  if not file.is_file():
    raise FileNotFoundError(f'config file {path!r} not found')
  spec = importlib.util.spec_from_file_location(f'searchless_config_{file.stem}', file)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  if not hasattr(module, 'get_config'):
    raise AttributeError(f'{path} has no get_config()')
  config = module.get_config()
  for assignment in overrides:
    override(config, assignment)
  return ml_collections.FrozenConfigDict(config)


def to_json(config) -> str:
  return json.dumps(_to_dict(config), indent=2, sort_keys=True)


def _to_dict(config) -> dict:
  out = {}
  for key, value in config.items():
    out[key] = _to_dict(value) if isinstance(value, (ml_collections.ConfigDict, ml_collections.FrozenConfigDict)) else value
  return out


def from_json(text: str) -> ml_collections.FrozenConfigDict:
  return ml_collections.FrozenConfigDict(json.loads(text))
