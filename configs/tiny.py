"""Tiny action-value model (4 layers, d=64, 4 heads; the reference's 'local' config) for a CPU.

Run (after `make run` has annotated the sample games):

    searchless-train --config tiny --workdir runs/tiny \\
        --data 'runs/demo/data/train/action_value*' \\
        --eval_data runs/demo/data/test/action_value_data.bag

Should reach (measured, benchmarks/RESULTS.md, 2 CPU cores): with
`optim.learning_rate=1e-3 data.batch_size=128`, 400 steps (~6.5 minutes) take
the train loss from ln(128) = 4.85 to 4.37 and the eval loss to 4.46; the
defaults below (batch 256, 2000 steps) run ~40 minutes and go further.
"""

import ml_collections

from searchless import configs


def get_config() -> ml_collections.ConfigDict:
  c = configs.base()
  c.model.embedding_dim = 64
  c.model.num_layers = 4
  c.model.num_heads = 4
  c.data.batch_size = 256
  c.data.worker_count = 0  # In-process: a CPU run has no core to spare.
  c.optim.learning_rate = 1e-3  # Higher than the paper's 1e-4: short runs.
  c.train.num_steps = 2000
  c.train.log_every = 50
  c.train.eval_every = 500
  c.train.eval_records = 2048
  c.train.ckpt_every = 500
  c.train.ckpt_keep = 2
  c.train.compute_dtype = 'float32'
  return c
