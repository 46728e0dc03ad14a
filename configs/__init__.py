"""Experiment configs, by name: ``configs/<name>.py``, each a ``get_config()`` whose docstring says how to run it.

`base` is every field of an experiment config at the paper's main recipe; a config
file starts from it (or from another config, ``get('tiny')``) and changes what
differs. `load` finds a config by name (or takes the path of any ``.py`` file with
``get_config()``), applies ``key=value`` overrides and checks it, model included.

>>> c = load('tiny', ['optim.learning_rate=3e-4'])
>>> c.optim.learning_rate, c.model.num_layers
(0.0003, 4)
>>> names()[:3]
['136m', '270m', '9m']
>>> load('tiny', ['model.num_layers=0'])
Traceback (most recent call last):
...
ValueError: model.num_layers must be >= 1, got 0
"""

from collections.abc import Sequence
import importlib.resources
import pathlib

import ml_collections

from searchless.core import config as config_lib


def names() -> list[str]:
  """The configs shipped in the package (``configs/<name>.py``), sorted."""
  files = importlib.resources.files(__name__).iterdir()
  return sorted(f.name[:-3] for f in files if f.name.endswith('.py') and not f.name.startswith('_'))


def path(name_or_path: str | pathlib.Path) -> pathlib.Path:
  """The file of a config: a shipped name (``tiny``) or a path to a ``.py`` file."""
  text = str(name_or_path)
  if not text.endswith('.py') and '/' not in text and '\\' not in text:
    if text not in names():
      raise FileNotFoundError(f'no config named {text!r} (shipped: {", ".join(names())}; or give a .py path)')
    return pathlib.Path(str(importlib.resources.files(__name__) / f'{text}.py'))
  return pathlib.Path(text)


def get(name_or_path: str | pathlib.Path) -> ml_collections.ConfigDict:
  """The config `name_or_path` as its ``get_config()`` returns it (unfrozen, unchecked): a config file may start
  from another's."""
  return config_lib.from_file(path(name_or_path))


def load(name_or_path: str | pathlib.Path, overrides: Sequence[str] = ()) -> ml_collections.FrozenConfigDict:
  """The config `name_or_path` with `overrides` applied, checked (its model too) and frozen."""
  config = config_lib.load(path(name_or_path), overrides)
  if 'model' in config:
    from searchless.model import config as model_config  # JAX-free, but only a load needs it.

    model_config.ModelConfig.from_config(config)  # Its checks, with one-line errors naming the field.
  return config


def base() -> ml_collections.ConfigDict:
  """Every field of an experiment config, at the paper's main recipe (the 9M model).

  Config files (``configs/*.py``) start from this and change what differs; this
  is where each field is defined and documented.
  """
  from ml_collections.config_dict import placeholder  # Only configs need it.
  from searchless.model import config as model_config

  c = ml_collections.ConfigDict()
  c.policy = 'action_value'  # action_value | state_value | behavioral_cloning.
  c.num_return_buckets = 128  # Value classes (uniform buckets of win probability).

  # The model's fields, their defaults (the paper's 9M model) and checks: `searchless.model.config.ModelConfig`.
  c.model = ml_collections.ConfigDict(model_config.ModelConfig.experiment_defaults())

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
  # > 0: the learning rate falls linearly to 0 over the last cooldown_steps of train.num_steps (WSD's cooldown).
  c.optim.cooldown_steps = 0  # 0: constant.

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
  # Rows per forward/backward pass within a step, gradients summed (the same step, less memory; faster on XLA:CPU).
  c.train.micro_batch = 0  # 0: the whole batch.
  c.train.fsdp = 1  # Size of the parameter-sharding mesh axis; data axis = devices / fsdp.
  c.train.init_from = (
    ''  # Checkpoint whose (EMA) params start a new run: fine-tuning ('' = random init; a resume ignores it).
  )
  # With init_from: its model may be smaller (graph: widening_factor, num_layers); it starts this one as the same
  # function (training.grow).
  c.train.init_grow = False
  # A resume on data other than the checkpoint's: 'refuse' (an error) | 'restart' (read them from their start;
  # params, optimiser and step carry on).
  c.train.on_new_data = 'refuse'
  return c
