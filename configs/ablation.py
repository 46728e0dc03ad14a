"""Ablation recipe: the paper's cheaper setup for comparing design choices (9M-class model).

Run (one ablation = this config plus the override under study, e.g. loss.kind=hl_gauss,
policy=state_value, model.num_layers=4):

    searchless-train --config ablation --workdir runs/ablation \\
        --data 'chessbench/train/action_value-*_data.bag'

How it differs from the main recipe (9m, same 8-layer d=256 8-head
model): Adam learning rate 4e-4 instead of 1e-4, batch 1024 instead of 4096, 32
return buckets instead of 128, and fewer steps. The learning rate, batch size,
bucket count and model size are the paper's ablation setup; the step count
(5M) and everything else (clip 1.0, EMA 0.99, log loss, constant learning rate)
are carried over from the main recipe and are not pinned by a published run.

Should reach: a ranking of variants, not an absolute target: compare test loss,
action accuracy and puzzle accuracy of runs that differ in one field only (the
paper's ablation tables). Cost: 1.38 GFLOPs per sequence forward
(`transformer.flops_per_sequence`; the 32-bucket head is negligible), ~2.1e19 training
FLOPs for 5M steps of 1024.
"""

import ml_collections

from searchless import configs


def get_config() -> ml_collections.ConfigDict:
  c = configs.base()
  c.num_return_buckets = 32  # The ablations' 32 buckets.
  c.data.batch_size = 1024  # The ablations' batch.
  c.data.worker_count = 8
  c.optim.learning_rate = 4e-4  # The ablations' learning rate.
  c.train.num_steps = 5_000_000  # Ours: 0.33 epochs of the 15.32B action-values.
  return c
