"""The device mesh and how arrays are laid out on it.

The mesh has two axes: ``data`` (data parallel) and ``fsdp`` (parameters,
EMA and optimiser state sharded across it, fully-sharded data parallel). The
batch is split over both axes, so every device sees different examples.
Parameter rule: shard the largest dimension divisible by the ``fsdp`` size;
replicate small or indivisible arrays (LayerNorm scales, biases, scalars).
"""

from collections.abc import Sequence
from typing import Any, TypeAlias

import jax
from jax.experimental import mesh_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import numpy as np

from searchless.plumbing import errors

AXES = ('data', 'fsdp')
PyTree: TypeAlias = Any  # Nested containers of arrays (jax.tree).


def make_mesh(fsdp: int = 1, devices: Sequence[jax.Device] | None = None) -> Mesh:
  """A (devices / fsdp) x fsdp mesh over all (global) devices."""
  devices = jax.devices() if devices is None else devices
  if fsdp < 1 or len(devices) % fsdp:
    raise errors.BadInput(f'fsdp={fsdp} must divide the number of devices ({len(devices)})')
  grid = mesh_utils.create_device_mesh((len(devices) // fsdp, fsdp), devices=devices)
  return Mesh(grid, AXES)


def batch_sharding(mesh: Mesh) -> NamedSharding:
  """Batch dimension split over every device; sequence dimension whole."""
  return NamedSharding(mesh, P(AXES, None))


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, P())


def _spec(shape: tuple[int, ...], fsdp: int) -> P:
  if fsdp == 1 or not shape:
    return P()
  dims = [i for i in np.argsort(shape)[::-1] if shape[i] % fsdp == 0 and shape[i] >= fsdp]
  if not dims:
    return P()
  spec: list[str | None] = [None] * len(shape)
  spec[dims[0]] = 'fsdp'
  return P(*spec)


def state_sharding(mesh: Mesh, tree: PyTree) -> PyTree:
  """NamedShardings for a pytree of arrays / ShapeDtypeStructs by the FSDP rule."""
  fsdp = mesh.shape['fsdp']
  return jax.tree.map(lambda x: NamedSharding(mesh, _spec(tuple(np.shape(x)), fsdp)), tree)


def global_batch(local_sequences: np.ndarray, sharding: jax.sharding.Sharding) -> jax.Array:
  """This process's [B_local, T] batch -> the global [B_local * processes, T] jax.Array on `sharding`.

  `sharding` splits the batch dimension over all devices (e.g.
  ``NamedSharding(mesh, P(('data', 'fsdp'), None))``); process ``p``'s rows are
  rows ``[p * B_local, (p + 1) * B_local)`` of the global batch, as the loader
  deals them out (devices ordered by process, as ``jax.devices()`` is).
  """
  return jax.make_array_from_process_local_data(sharding, local_sequences)
