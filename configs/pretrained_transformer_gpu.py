"""The shipped `pretrained-transformer` as a lent GPU trains it: bfloat16, long runs of large batches.

Run (on a lent GPU, by the GPU playbook, which picks the batch that keeps the chip busy and continues
the shipped parameters; benchmarks/gpu_playbook.py's docstring has the one-line device command):

    python3 benchmarks/gpu_playbook.py --wheels .whl --data .device/data --out $OUT --seconds 540

or by hand: ``searchless-train --config pretrained_transformer_gpu --workdir W --data BOARDS
train.init_from=pretrained-transformer data.batch_size=2048 train.max_seconds=480``.

Should reach: more than the shipped model's 271/1500 dev puzzles after a call (RESULTS, the GPU playbook).
"""

import ml_collections

from searchless import configs


def get_config() -> ml_collections.ConfigDict:
  c = configs.get('pretrained_transformer')
  c.train.compute_dtype = 'bfloat16'
  c.data.batch_size = 2048  # The playbook measures and sets its own (the smallest at >= 30% MFU).
  c.train.num_steps = 100_000_000  # The wall-clock ends the run (train.max_seconds).
  c.train.log_every = 100
  c.train.eval_every = 100_000_000  # No periodic evaluation: the campaign's evaluate step measures the export.
  c.train.ckpt_every = 5000
  c.train.ckpt_keep = 1
  c.train.micro_batch = 0
  return c
