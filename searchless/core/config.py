"""Experiment configs: Python files with `get_config()`, overrides, and saved JSON.

A config (a name such as ``tiny``, which is ``configs/tiny.py``, or the
path of any ``.py`` file with ``get_config()``) is the single source of truth for a run:
model, data, optimiser and schedule. `load` imports it, applies ``key=value``
overrides (type-checked against the field they replace) and returns a frozen
config; `to_json` / `from_json` save it with every checkpoint so evaluation and
play rebuild exactly the trained model.

>>> c = load('tiny', ['optim.learning_rate=3e-4'])
>>> c.optim.learning_rate, c.model.num_layers
(0.0003, 4)
>>> names()[:3]
['136m', '270m', '9m']
>>> load('tiny', ['model.num_layers=four'])
Traceback (most recent call last):
...
ValueError: override model.num_layers=four: expected int, got 'four'
"""

import ast
from collections.abc import Sequence
import importlib.resources
import importlib.util
import json
import pathlib
from typing import Any, TypeAlias

import ml_collections


Config: TypeAlias = ml_collections.ConfigDict | ml_collections.FrozenConfigDict  # An experiment config.


def base() -> ml_collections.ConfigDict:
  """Every field of an experiment config, at the paper's main recipe (the 9M model).

  Config files (``configs/*.py``) start from this and change what differs; this
  is where each field is defined and documented.
  """
  from ml_collections.config_dict import placeholder  # Only configs need it.
  c = ml_collections.ConfigDict()
  c.policy = 'action_value'  # action_value | state_value | behavioral_cloning.
  c.num_return_buckets = 128  # Value classes (uniform buckets of win probability).

  c.model = ml_collections.ConfigDict()
  c.model.embedding_dim = 256  # Width d of the residual stream.
  c.model.num_layers = 8  # Transformer blocks.
  c.model.num_heads = 8  # Attention heads (d / num_heads per head).
  c.model.widening_factor = 4  # SwiGLU hidden size = widening_factor * d.
  c.model.emb_init_scale = 0.02  # Std of the truncated-normal embedding init.
  c.model.apply_post_ln = True  # Final LayerNorm before the output layer.
  c.model.apply_qk_layernorm = False  # LayerNorm on queries and keys.
  c.model.use_causal_mask = False  # The reference predicts from the whole board.
  c.model.seed = 1  # Parameter initialisation seed.
  c.model.packing = 'none'  # none: one sequence per move (the paper) | board: one per board (board_value records).
  c.model.move_attention = 'self'  # packing=board: a move token sees the board and itself | 'moves': all real moves.
  c.model.joint_layers = 0  # packing=board: blocks before the last where board tokens also see the moves.
  c.model.kind = 'transformer'  # transformer (the paper) | graph: AlphaGateau's graph network, per board (board_value records).
  c.model.graph_edge_dim = 32  # kind=graph: width of the edge features (nodes have embedding_dim; heads num_heads).
  c.model.graph_open_lines = True  # kind=graph: edges know whether their line is open (False: ablation, issue 28).
  c.model.mover_view = False  # transformer: Black to move -> board and moves mirrored (every board seen as White).
  c.model.move_squares = 'none'  # transformer: none | tied | untied: move tokens add from-/to-square and promotion embeddings.
  c.model.square_bias = 'none'  # transformer: none | relative | open_lines: attention biases by square displacement (priors).
  c.model.smolgen = 0  # transformer: > 0: board-dependent attention biases between squares (Leela's smolgen), summary width.
  c.model.move_gather = False  # transformer: move tokens add a map of their from- and to-square's states before every block.

  c.data = ml_collections.ConfigDict()
  c.data.train = ''  # Bag spec/glob of training records (the --data flag sets it).
  c.data.eval = ''  # Bag spec/glob of held-out records ('' = no periodic evaluation).
  c.data.batch_size = 4096  # Global batch size (all devices and hosts together), as the paper.
  c.data.shuffle = True  # Global uniform shuffle, reshuffled every epoch.
  c.data.seed = 0  # Shuffle seed.
  c.data.worker_count = 16  # grain worker processes per host (0 = in-process).
  c.data.num_records = placeholder(int)  # Use only the first N records (None = all).
  c.data.max_moves = 64  # packing=board: move slots per board row (a board with more keeps a random 64).

  c.optim = ml_collections.ConfigDict()
  c.optim.learning_rate = 1e-4  # Adam step size (constant, as the paper).
  c.optim.max_grad_norm = 1.0  # Global gradient-norm clip.
  c.optim.ema_decay = 0.99  # Decay of the parameter EMA used for evaluation and play.
  c.optim.cooldown_steps = 0  # > 0: the learning rate falls linearly to 0 over the last cooldown_steps of train.num_steps (WSD's cooldown); 0 = constant.

  c.loss = ml_collections.ConfigDict()
  c.loss.kind = 'log_loss'  # log_loss (paper) | hl_gauss (soft labels).
  c.loss.hl_gauss_sigma = 0.75  # HL-Gauss label std, in bucket widths.
  c.loss.value_weight = 1.0  # model.kind=graph: weight of its state-value head's loss (target: the best move's bucket).

  c.train = ml_collections.ConfigDict()
  c.train.num_steps = 10_000_000  # Optimiser steps (the paper: 10M, 2.67 epochs at batch 4096).
  c.train.max_seconds = 0.0  # Stop (checkpointed; rerun resumes) after this many seconds of one run; 0 = no limit.
  c.train.log_every = 1000  # Steps between log lines.
  c.train.eval_every = 100_000  # Steps between evaluations on data.eval.
  c.train.eval_records = 65_536  # Held-out records per evaluation.
  c.train.ckpt_every = 100_000  # Steps between checkpoints (also on SIGTERM and at the end).
  c.train.ckpt_keep = 3  # Checkpoints kept.
  c.train.compute_dtype = 'auto'  # float32 | bfloat16 | auto (bf16 on GPU/TPU, f32 on CPU).
  c.train.micro_batch = 0  # Rows per forward/backward pass within a step, gradients summed (the same step, less memory; faster on XLA:CPU); 0 = the whole batch.
  c.train.fsdp = 1  # Size of the parameter-sharding mesh axis; data axis = devices / fsdp.
  c.train.init_from = ''  # Checkpoint whose (EMA) params start a new run: fine-tuning ('' = random init; a resume ignores it).
  c.train.init_grow = False  # With init_from: its model may be smaller (graph: widening_factor, num_layers); it starts this one as the same function (training.grow).
  c.train.on_new_data = 'refuse'  # A resume on data other than the checkpoint's: 'refuse' (an error) | 'restart' (read them from their start; params, optimiser and step carry on).
  return c


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


def names() -> list[str]:
  """The configs shipped in the package (``configs/<name>.py``), sorted."""
  files = importlib.resources.files('searchless.configs').iterdir()
  return sorted(f.name[:-3] for f in files if f.name.endswith('.py') and not f.name.startswith('_'))


def config_path(name_or_path: str | pathlib.Path) -> pathlib.Path:
  """The file of a config: a shipped name (``tiny``) or a path to a ``.py`` file."""
  text = str(name_or_path)
  if not text.endswith('.py') and '/' not in text and '\\' not in text:
    if text not in names():
      raise FileNotFoundError(f'no config named {text!r} (shipped: {", ".join(names())}; or give a .py path)')
    return pathlib.Path(str(importlib.resources.files('searchless.configs') / f'{text}.py'))
  return pathlib.Path(text)


def from_file(path: str | pathlib.Path) -> ml_collections.ConfigDict:
  """Imports the `get_config()` of `path` (a shipped name or a file) and returns its config
  (unfrozen; a config may start from another one's, e.g. ``from_file('tiny')``)."""
  file = config_path(path)
  if not file.is_file():
    raise FileNotFoundError(f'config file {str(path)!r} not found')
  spec = importlib.util.spec_from_file_location(f'searchless_config_{file.stem}', file)
  if spec is None or spec.loader is None:
    raise ValueError(f'config file {str(path)!r} is not a Python file')
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  if not hasattr(module, 'get_config'):
    raise AttributeError(f'{path} has no get_config()')
  return module.get_config()


# The allowed range of each numeric field: (smallest, inclusive?). A field missing from a config is not checked.
RANGES: dict[str, tuple[float, bool]] = {
    'num_return_buckets': (2, True), 'model.embedding_dim': (1, True), 'model.num_layers': (1, True),
    'model.num_heads': (1, True), 'model.widening_factor': (0, False), 'model.joint_layers': (0, True),
    'data.batch_size': (1, True), 'data.worker_count': (0, True), 'data.num_records': (1, True),
    'data.max_moves': (1, True), 'model.graph_edge_dim': (1, True), 'model.smolgen': (0, True), 'loss.value_weight': (0, True), 'optim.learning_rate': (0, False), 'optim.max_grad_norm': (0, False),
    'optim.ema_decay': (0, True), 'optim.cooldown_steps': (0, True), 'loss.hl_gauss_sigma': (0, False), 'train.num_steps': (1, True),
    'train.max_seconds': (0, True), 'train.log_every': (1, True), 'train.eval_every': (1, True),
    'train.eval_records': (1, True), 'train.ckpt_every': (1, True), 'train.ckpt_keep': (1, True),
    'train.fsdp': (1, True), 'train.micro_batch': (0, True),
}


def check(config: Config) -> None:
  """Raises ValueError naming the first field outside its `RANGES` range (NaN included).

  >>> check(ml_collections.ConfigDict({'train': {'num_steps': -5}}))
  Traceback (most recent call last):
  ...
  ValueError: train.num_steps must be >= 1, got -5
  """
  for name, (low, inclusive) in RANGES.items():
    value: Any = config
    for part in name.split('.'):
      value = value.get(part) if hasattr(value, 'get') else None
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
      continue
    if not (value >= low if inclusive else value > low):  # NaN fails both.
      raise ValueError(f"{name} must be {'>=' if inclusive else '>'} {low}, got {value}")
  if 'optim' in config and config.optim.get('ema_decay') is not None and not config.optim.ema_decay <= 1:
    raise ValueError(f'optim.ema_decay must be <= 1, got {config.optim.ema_decay}')
  cooldown = config.get('optim', {}).get('cooldown_steps') or 0
  if cooldown and 'train' in config and cooldown > config.train.num_steps:
    raise ValueError(f'optim.cooldown_steps={cooldown} must be <= train.num_steps={config.train.num_steps}: the '
                     'cooldown ends at train.num_steps')


def load(path: str | pathlib.Path, overrides: Sequence[str] = ()) -> ml_collections.FrozenConfigDict:
  """Imports the `get_config()` of `path` (a shipped name or a file), applies `overrides`, checks and freezes it."""
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
    out[key] = _to_dict(value) if isinstance(value, (ml_collections.ConfigDict, ml_collections.FrozenConfigDict)) else value
  return out


def from_json(text: str) -> ml_collections.FrozenConfigDict:
  return ml_collections.FrozenConfigDict(json.loads(text))
