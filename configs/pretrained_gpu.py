"""The shipped `pretrained` graph as a lent GPU trains it: the whole batch at once, 256 boards a step.

Run (on a lent GPU, by the GPU playbook: ``--train pretrained_gpu --init pretrained``; benchmarks/gpu_playbook.py):

    python3 benchmarks/gpu_playbook.py --wheels .whl --data .device/data --out $OUT --seconds 540 \\
        --parts train --train pretrained_gpu --init pretrained

Then adopt it in the campaign (campaign/README.md). Should reach: one 480 s H200 call took the campaign's
6-layer graph from 384 to 406/1500 dev puzzles (RESULTS, the strength campaign).
"""

import ml_collections

from searchless import configs


def get_config() -> ml_collections.ConfigDict:
  c = configs.get('pretrained')
  c.data.batch_size = 256
  c.train.micro_batch = 0  # An accelerator wants the whole batch in one pass.
  c.train.log_every = 100
  c.train.ckpt_every = 5000
  c.train.ckpt_keep = 1
  return c
