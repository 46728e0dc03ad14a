"""A model for other frameworks: safetensors weights, its config, and a serialized JAX forward function.

`export(out, model_config, params, experiment)` writes into the folder `out`:

* ``model.safetensors``: every parameter as float32, named by its haiku path
  (``multi_head_dot_product_attention_3/linear_1/w``: module/parameter), with the
  model config (JSON) in the file's metadata under ``searchless.model_config``;
* ``config.json``: the experiment config (our checkpoints) or null (published
  ones), and the `ModelConfig`;
* ``forward.jax`` (``jax_forward=True``): `jax.export`'s serialization of the
  forward pass with these weights baked in, for any batch size: int32 tokens
  ``[B, T]`` (T as in `ModelConfig`: 79 for the paper's action-value model) to
  float32 log-probs ``[B, T, V]``; a board-packed model takes ``[B, 77 + 218]``
  (218 move slots, the most legal moves a position has; -1 in unused slots) and
  gives ``[B, 218, V]``. Load it with `load_forward` (or
  ``jax.export.deserialize``) and call ``.call(tokens)``: no haiku, no searchless.

`load_safetensors` reads the weights back as the nested dict haiku uses.

>>> import tempfile
>>> from searchless.model import network
>>> cfg = ModelConfig(embedding_dim=16, num_layers=1, num_heads=2, output_size=8, max_sequence_length=79)
>>> params = network.init_params(cfg)
>>> out = export(tempfile.mkdtemp(), cfg, params, None, jax_forward=False)
>>> weights, saved = load_safetensors(out / WEIGHTS)
>>> saved == cfg, sorted(weights) == sorted(params)
(True, True)
"""

from collections.abc import Mapping
import dataclasses
import json
import os
import pathlib
from typing import Any

import jax
from jax import export as jax_export  # A submodule that older jax does not import with jax.
import jax.numpy as jnp
import numpy as np
import safetensors.numpy

from searchless.core import config as config_lib
from searchless.core import tokenizer
from searchless.model import network
from searchless.model.config import ModelConfig
from searchless.plumbing import atomic

WEIGHTS, CONFIG, FORWARD = 'model.safetensors', 'config.json', 'forward.jax'
MOVE_SLOTS = 218  # A packed model's exported move slots: the most legal moves of any chess position.
_CONFIG_KEY = 'searchless.model_config'  # safetensors metadata key of the ModelConfig JSON.


def export(
  out: str | os.PathLike,
  model_config: ModelConfig,
  params: Mapping[str, Any],
  experiment: Any,
  *,
  jax_forward: bool = True,
) -> pathlib.Path:
  """Writes the folder described in the module docstring; returns it. `experiment`: a config or None."""
  out_dir = pathlib.Path(out)
  out_dir.mkdir(parents=True, exist_ok=True)
  flat = {
    f'{module}/{name}': np.ascontiguousarray(np.asarray(value, np.float32))
    for module, leaves in params.items()
    for name, value in leaves.items()
  }
  config_json = json.dumps(dataclasses.asdict(model_config), sort_keys=True)
  # Through our atomic writer: safetensors' own save_file leaves the file 0600 whatever the umask.
  atomic.write_bytes(out_dir / WEIGHTS, safetensors.numpy.save(flat, metadata={_CONFIG_KEY: config_json}))
  (out_dir / CONFIG).write_text(
    json.dumps(
      {
        'model': dataclasses.asdict(model_config),
        'experiment': None if experiment is None else json.loads(config_lib.to_json(experiment)),
      },
      indent=2,
      sort_keys=True,
    )
    + '\n'
  )
  if jax_forward:
    (out_dir / FORWARD).write_bytes(_exported_forward(model_config, params).serialize())
  return out_dir


def _exported_forward(model_config: ModelConfig, params: Mapping[str, Any]) -> jax_export.Exported:
  net = network.build(model_config)
  frozen = jax.tree.map(jnp.asarray, params)
  (batch,) = jax_export.symbolic_shape('b')
  length = tokenizer.SEQUENCE_LENGTH + MOVE_SLOTS if model_config.packed else model_config.max_sequence_length
  shape = (batch, length)
  forward = jax.jit(lambda tokens: net.apply(frozen, None, tokens))
  return jax_export.export(forward)(jax.ShapeDtypeStruct(shape, jnp.int32))


def load_safetensors(path: str | os.PathLike) -> tuple[dict[str, dict[str, np.ndarray]], ModelConfig]:
  """(haiku params as {module: {name: array}}, ModelConfig) from an exported ``model.safetensors``."""
  flat = safetensors.numpy.load_file(str(path))
  with open(path, 'rb') as f:  # The header: 8 bytes of length, then JSON with __metadata__.
    header = json.loads(f.read(int.from_bytes(f.read(8), 'little')))
  model_config = ModelConfig(**json.loads(header['__metadata__'][_CONFIG_KEY]))
  params: dict[str, dict[str, np.ndarray]] = {}
  for key, value in flat.items():
    module, name = key.rsplit('/', 1)
    params.setdefault(module, {})[name] = value
  return params, model_config


def load_forward(path: str | os.PathLike) -> jax_export.Exported:
  """The exported forward function (`.call(tokens)`) of a ``forward.jax`` file."""
  return jax_export.deserialize(bytearray(pathlib.Path(path).read_bytes()))
