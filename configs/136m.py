"""136M action-value model (8 layers, d=1024, 8 heads): the paper's middle main model.

Run (on the ChessBench training bags, or your own annotated ones):

    searchless-train --config 136m --workdir runs/136m \\
        --data 'chessbench/train/action_value-*_data.bag'

(set data.eval to 'chessbench/test/action_value_data.bag' for periodic evaluation).

Paper fidelity: architecture, 128 return buckets, log loss, Adam at a constant
1e-4, batch 4096, global-norm clip 1.0, EMA 0.99 and 10M steps (2.67 epochs of
the 15.32B action-values) are the paper's and the reference code's; the published
136M checkpoint is its step 6,400,000. Ours only: bfloat16 matmuls on
GPU/TPU (`train.compute_dtype`; 'float32' for the reference's precision), the
evaluation/checkpoint cadence and loader workers.

Should reach: the published 136M model's test loss and play: compare with it
directly (`searchless.model.loading.load_model('checkpoints/136M')`) and with the 136M
row of the paper's Table 1 (between 9M and 270M; 270M is the one at Lichess
blitz Elo 2895). Cost: 21.4 GFLOPs per sequence forward
(`transformer.flops_per_sequence`), so ~2.6e21 training FLOPs (3x forward) for 10M steps of 4096.
"""

import ml_collections

from searchless import configs


def get_config() -> ml_collections.ConfigDict:
  c = configs.base()
  c.model.embedding_dim = 1024
  c.data.worker_count = 8
  # fsdp stays 1: ~2.2 GB of fp32 params + EMA + Adam fit every accelerator.
  return c
