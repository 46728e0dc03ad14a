"""Training-step throughput: examples/s, tokens/s, MFU and memory of the jitted update (gpu_playbook's part a).

    .venv/bin/python benchmarks/train_step.py                       # tiny and 9m on this machine
    .venv/bin/python benchmarks/train_step.py --configs 9m 136m 270m --dtypes float32 bfloat16   # a GPU

Random token batches (the step's cost does not depend on the data), the real
`searchless.training.step.make_functions` update (loss, grads, Adam, clip, EMA) on all local
devices. MFU = 3 x forward FLOPs (transformer.flops_per_sequence) x examples/s /
peak; the peak is the device's dense peak for the dtype (GPU/TPU table) or,
on CPU, the f32 matmul rate this CPU sustains, measured in the same run.
Also prints the memory one device holds for the training state.
"""

import argparse
from collections.abc import Sequence
import time

import jax
import numpy as np

from searchless import configs
from searchless.core import records
from searchless.core import tokenizer
from searchless.core.moves import NUM_ACTIONS
from searchless.data import packing
from searchless.model import network
from searchless.model import transformer as model
from searchless.training import sharding
from searchless.training import step as step_lib


def _setup(name: str, dtype: str, batch: int, overrides: Sequence[str]):
  """(config, functions, state, batch on the devices, tokens a row) of a config's real update on random tokens:
  per-move sequences, or a packed config's rows with every move slot filled (`packing.split_packed`)."""
  config = configs.load(
    name, [f'train.compute_dtype={dtype}', f'data.batch_size={batch}', 'data.train=unused', *overrides]
  )
  fns = step_lib.make_functions(config, sharding.make_mesh(config.train.fsdp))
  rng = np.random.default_rng(0)
  buckets = fns.model_config.output_size
  if packing.packed(config):
    moves = config.data.max_moves
    seq_len = model.BOARD_TOKENS + moves  # What the trainer counts FLOPs on.
    tokens = np.concatenate(
      [
        rng.integers(0, 31, size=(batch, tokenizer.SEQUENCE_LENGTH)),
        rng.integers(0, NUM_ACTIONS, size=(batch, moves)),
        rng.integers(0, buckets, size=(batch, moves + 1)),
      ],
      axis=1,
    ).astype(np.int32)
  else:
    seq_len = records.SEQUENCE_LENGTHS[config.policy]
    tokens = rng.integers(0, 31, size=(batch, seq_len), dtype=np.int32)
    tokens[:, -1] = rng.integers(0, buckets, size=batch)
  return config, fns, fns.init(jax.random.PRNGKey(0)), jax.device_put(tokens, fns.batch_sharding), seq_len


def _bytes(compiled) -> int:
  m = compiled.memory_analysis()
  return int(m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes - m.alias_size_in_bytes)


def compiled_bytes(name: str, dtype: str, batch: int, overrides: Sequence[str] = ()) -> int:
  """Bytes the compiled update needs on one device (XLA's memory analysis: arguments, outputs, temporaries),
  without running it."""
  _, fns, state, tokens, _ = _setup(name, dtype, batch, overrides)
  return _bytes(fns.update.lower(state, tokens).compile())


def measure(
  name: str,
  dtype: str,
  batch: int,
  steps: int,
  overrides: Sequence[str] = (),
  profile_dir: str | None = None,
  limit: int | None = None,
) -> dict:
  """One config's update timed over `steps` steps (after one to warm), with its FLOPs two ways and memory.

  `mfu` counts the model's matmuls (3 x `model.flops_per_sequence`, forward + backward); `mfu_xla` counts what
  XLA's cost analysis of the compiled update says (every op of the step, the optimiser too). With `profile_dir`,
  two more steps are traced there (`jax.profiler`). Raises MemoryError, before running anything, when the compiled
  update needs more than `limit` bytes a device.
  """
  config, fns, state, tokens, seq_len = _setup(name, dtype, batch, overrides)
  dtype = config.train.compute_dtype  # An override may have said otherwise.
  update = fns.update.lower(state, tokens).compile()  # Compiled once: the timed steps run this.
  if limit and _bytes(update) > limit:
    raise MemoryError(
      f'{name} {dtype} batch {batch} {list(overrides)}: needs {_bytes(update) / 2**30:.1f} GiB '
      f'a device, over its {limit / 2**30:.1f} GiB'
    )
  cost = update.cost_analysis()
  cost = cost[0] if isinstance(cost, list) else cost  # A list of one dict in older JAX.
  xla_flops = float(cost.get('flops', 0.0)) if cost else 0.0
  state, metrics = update(state, tokens)  # Warm.
  jax.block_until_ready(metrics)
  start = time.perf_counter()
  for _ in range(steps):
    state, metrics = update(state, tokens)
  jax.block_until_ready(metrics)
  seconds = (time.perf_counter() - start) / steps
  if profile_dir:
    with jax.profiler.trace(profile_dir):
      for _ in range(2):
        state, metrics = update(state, tokens)
      jax.block_until_ready(metrics)
  examples = batch / seconds
  flops = 3 * model.flops_per_sequence(fns.model_config, seq_len)
  peak = step_lib.peak_flops_per_device(network.resolve_dtype(dtype))
  devices = jax.device_count()
  state_bytes = sum(x.addressable_shards[0].data.nbytes for x in jax.tree.leaves(state))
  stats = jax.devices()[0].memory_stats() or {}
  return {
    'config': name,
    'dtype': dtype,
    'batch': batch,
    'micro_batch': config.train.micro_batch,
    'params': network.num_params(state.params),
    'step_ms': 1000 * seconds,
    'examples_per_s': examples,
    'tokens_per_s': examples * seq_len,
    'model_flops_per_step': flops * batch,
    'xla_flops_per_step': xla_flops,
    'mfu': examples * flops / (peak * devices) if peak else None,
    'mfu_xla': xla_flops / seconds / (peak * devices) if peak and xla_flops else None,
    'peak_tflops': peak / 1e12 if peak else None,
    'state_mib_per_device': state_bytes / 2**20,
    'compiled_mib_per_device': _bytes(update) / 2**20,
    'peak_mib_per_device': stats['peak_bytes_in_use'] / 2**20 if 'peak_bytes_in_use' in stats else None,
  }


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('--configs', nargs='+', default=['tiny', '9m'])
  p.add_argument('--dtypes', nargs='+', default=['float32'])
  p.add_argument('--batch', type=int, default=256)
  p.add_argument('--steps', type=int, default=10)
  args = p.parse_args(argv)
  device = jax.devices()[0]
  print(f'devices: {jax.device_count()} x {device.device_kind} ({device.platform})')
  for name in args.configs:
    for dtype in args.dtypes:
      r = measure(name, dtype, args.batch, args.steps)
      mfu = f'{100 * r["mfu"]:.1f}% of {r["peak_tflops"]:.2f} TFLOP/s' if r['mfu'] is not None else 'n/a'
      print(
        f'{r["config"]:>5s} {r["dtype"]:>8s} batch {r["batch"]}: {r["params"] / 1e6:.1f}M params, '
        f'{r["step_ms"]:.1f} ms/step, {r["examples_per_s"]:.0f} examples/s, {r["tokens_per_s"]:.0f} tokens/s, '
        f'MFU {mfu}, state {r["state_mib_per_device"]:.0f} MiB/device',
        flush=True,
      )


if __name__ == '__main__':
  main()
