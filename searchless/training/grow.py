"""A bigger model started as a smaller one's function: wider MLPs or more layers, nothing it knew forgotten.

A model that has stopped learning for want of capacity (the campaign's graph_tiny, whose
held-out and training-board metrics agree) can go on from where it is, in a bigger shape,
instead of from scratch (``train.init_from`` with ``train.init_grow=True``):

* every weight of the small model is copied into the big one's leading slice;
* a weight grown along its output axis (an MLP's gate and up, ``widening_factor``) keeps
  its random init in the new columns: the new hidden units compute something;
* a weight grown along its input axis (the MLP's down projection) gets zeros in the new
  rows: what the new units compute is not yet read;
* a layer the small model lacks (``num_layers``, appended after its layers) keeps its
  random init except the weights that write into the node and edge streams
  (`graph.RESIDUAL_WRITERS`), which start at zero: the layer starts as the identity.

The grown model must then give the small model's `network.probe` output to within
`TOLERANCE`; anything else (a wider residual stream, more heads, another kind) is refused
with the difference named, before a step is taken.
"""

from collections.abc import Mapping
from typing import Any

import numpy as np

from searchless.model import graph
from searchless.model import network
from searchless.model.config import ModelConfig
from searchless.plumbing import errors

TOLERANCE = 1e-5  # Largest total-variation distance between the two models' probe outputs (float32 rounding).


def grow(
  small: Mapping[str, Mapping[str, Any]], big: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, np.ndarray]]:
  """`big` (a fresh init of the bigger model: haiku {module: {name: array}}) holding `small`'s weights.

  >>> small = {'mlp_0/linear': {'w': np.ones((2, 2))}, 'mlp_0/linear_2': {'w': np.ones((2, 2))}}
  >>> big = {'mlp_0/linear': {'w': np.full((2, 3), 7.0)}, 'mlp_0/linear_2': {'w': np.full((3, 2), 7.0)},
  ...        'mlp_1/linear_2': {'w': np.full((3, 2), 7.0)}}
  >>> grown = grow(small, big)
  >>> grown['mlp_0/linear']['w'].tolist(), grown['mlp_0/linear_2']['w'].tolist(), grown['mlp_1/linear_2']['w'].tolist()
  ([[1.0, 1.0, 7.0], [1.0, 1.0, 7.0]], [[1.0, 1.0], [1.0, 1.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
  """
  missing = sorted(f'{m}/{n}' for m, names in small.items() for n in names if n not in big.get(m, {}))
  if missing:
    raise errors.BadInput(
      f'cannot grow a model into one without its weights: {missing[0]} is missing from the bigger model'
    )
  grown: dict[str, dict[str, np.ndarray]] = {}
  for module, names in big.items():
    grown[module] = {}
    for name, fresh in names.items():
      new = np.array(fresh)
      if module not in small:  # A new layer: the identity until its residual writers learn.
        if module.split('/')[-1] in graph.RESIDUAL_WRITERS:
          new[...] = 0
        grown[module][name] = new
        continue
      old = np.asarray(small[module][name])
      grown[module][name] = _widened(f'{module}/{name}', old, new)
  return grown


def _widened(name: str, old: np.ndarray, new: np.ndarray) -> np.ndarray:
  """`old` in the leading slice of `new`; new input rows zero, new output columns as `new` has them."""
  if old.shape == new.shape:
    return old.astype(new.dtype)
  grown_axes = [axis for axis, (a, b) in enumerate(zip(old.shape, new.shape)) if a != b]
  if old.ndim != 2 or new.ndim != 2 or len(grown_axes) != 1 or old.shape[grown_axes[0]] > new.shape[grown_axes[0]]:
    raise errors.BadInput(
      f'cannot grow {name} from {old.shape} to {new.shape}: only a weight matrix grown along '
      'one axis keeps what the model computes'
    )
  if grown_axes == [0]:  # New inputs: read nowhere yet.
    new[old.shape[0] :] = 0
  new[: old.shape[0], : old.shape[1]] = old
  return new


def check_same_function(small_config: ModelConfig, small: Any, big_config: ModelConfig, big: Any, source: str) -> None:
  """Refuses a grown model whose probe output is not the small one's (`source` names the small checkpoint)."""
  distance = network.probe_distance(network.probe(small_config, small), network.probe(big_config, big))
  if distance > TOLERANCE:
    changed = [
      f'{f} {getattr(small_config, f)} -> {getattr(big_config, f)}'
      for f in small_config.__dataclass_fields__
      if getattr(small_config, f) != getattr(big_config, f)
    ]
    raise errors.BadInput(
      f'growing {source} into this config changes what it computes (probe distance {distance:.3g} > '
      f'{TOLERANCE:g}; changed: {", ".join(changed) or "nothing"}): only widening_factor and '
      'num_layers grow a graph model as the same function'
    )
