"""Training-step throughput: examples/s, tokens/s and MFU of the jitted update.

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
import pathlib
import time

import jax
import numpy as np

from searchless import configs
from searchless.core import records
from searchless.model import network
from searchless.model import transformer
from searchless.training import sharding
from searchless.training import step as step_lib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def measure(name: str, dtype: str, batch: int, steps: int) -> dict:
  config = configs.load(name,
                           [f'train.compute_dtype={dtype}', f'data.batch_size={batch}', 'data.train=unused'])
  mesh = sharding.make_mesh(config.train.fsdp)
  fns = step_lib.make_functions(config, mesh)
  state = fns.init(jax.random.PRNGKey(0))
  seq_len = records.SEQUENCE_LENGTHS[config.policy]
  rng = np.random.default_rng(0)
  tokens = rng.integers(0, 31, size=(batch, seq_len), dtype=np.int32)
  tokens[:, -1] = rng.integers(0, fns.model_config.output_size, size=batch)
  sequences = jax.device_put(tokens, fns.batch_sharding)
  state, metrics = fns.update(state, sequences)  # Compile.
  jax.block_until_ready(metrics)
  start = time.perf_counter()
  for _ in range(steps):
    state, metrics = fns.update(state, sequences)
  jax.block_until_ready(metrics)
  seconds = (time.perf_counter() - start) / steps
  examples = batch / seconds
  flops = 3 * transformer.flops_per_sequence(fns.model_config, seq_len)
  peak = step_lib.peak_flops_per_device(network.resolve_dtype(dtype))
  state_bytes = sum(x.addressable_shards[0].data.nbytes for x in jax.tree.leaves(state))
  return {'config': name, 'dtype': dtype, 'batch': batch, 'params': network.num_params(state.params),
          'step_ms': 1000 * seconds, 'examples_per_s': examples, 'tokens_per_s': examples * seq_len,
          'mfu': examples * flops / (peak * jax.device_count()) if peak else None,
          'peak_tflops': peak / 1e12 if peak else None, 'state_mib_per_device': state_bytes / 2**20}


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
      mfu = f"{100 * r['mfu']:.1f}% of {r['peak_tflops']:.2f} TFLOP/s" if r['mfu'] is not None else 'n/a'
      print(f"{r['config']:>5s} {r['dtype']:>8s} batch {r['batch']}: {r['params'] / 1e6:.1f}M params, "
            f"{r['step_ms']:.1f} ms/step, {r['examples_per_s']:.0f} examples/s, {r['tokens_per_s']:.0f} tokens/s, "
            f"MFU {mfu}, state {r['state_mib_per_device']:.0f} MiB/device", flush=True)


if __name__ == '__main__':
  main()
