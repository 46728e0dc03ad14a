"""270M action-value model (16 layers, d=1024, 8 heads): the paper's largest model.

Run (on the ChessBench training bags, or your own annotated ones):

    searchless-train --config configs/270m.py --workdir runs/270m \\
        --data 'chessbench/train/action_value-*_data.bag'

(set data.eval to 'chessbench/test/action_value_data.bag' for periodic evaluation).

Paper fidelity: architecture, 128 return buckets, log loss, Adam at a constant
1e-4, batch 4096, global-norm clip 1.0, EMA 0.99 and 10M steps (2.67 epochs of
the 15.32B action-values) are the paper's and the reference code's; the published
270M checkpoint is its step 6,400,000. Ours only: bfloat16 matmuls on
GPU/TPU (`train.compute_dtype`; 'float32' for the reference's precision), the
evaluation/checkpoint cadence and loader workers.

Should reach: the published 270M model's test loss and play: compare with it
directly (`searchless.checkpoint.load_model('checkpoints/270M')`) and with the
paper's headline model: Lichess blitz Elo 2895 against humans, the strongest of
the three sizes on puzzles and action accuracy (Table 1). Cost: 42.8 GFLOPs per
sequence forward (`model.flops_per_sequence`), so ~5.3e21 training FLOPs (3x forward) for 10M steps of 4096.
"""

import ml_collections
from ml_collections.config_dict import placeholder


def get_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.policy = 'action_value'  # action_value | state_value | behavioral_cloning.
  c.num_return_buckets = 128  # Value classes (uniform buckets of win probability).

  c.model = ml_collections.ConfigDict()
  c.model.embedding_dim = 1024  # Width d of the residual stream.
  c.model.num_layers = 16  # Transformer blocks.
  c.model.num_heads = 8  # Attention heads (d / num_heads per head), as the published 270M.
  c.model.widening_factor = 4  # SwiGLU hidden size = widening_factor * d.
  c.model.emb_init_scale = 0.02  # Std of the truncated-normal embedding init.
  c.model.apply_post_ln = True  # Final LayerNorm before the output layer.
  c.model.apply_qk_layernorm = False  # LayerNorm on queries and keys.
  c.model.use_causal_mask = False  # The reference predicts from the whole board.
  c.model.seed = 1  # Parameter initialisation seed.

  c.data = ml_collections.ConfigDict()
  c.data.train = ''  # Bag spec/glob of training records (the --data flag sets it).
  c.data.eval = ''  # Bag spec/glob of held-out records ('' = no periodic evaluation).
  c.data.batch_size = 4096  # Global batch size (all devices and hosts together), as the paper.
  c.data.shuffle = True  # Global uniform shuffle, reshuffled every epoch.
  c.data.seed = 0  # Shuffle seed.
  c.data.worker_count = 8  # grain worker processes per host (tokenising 4096 records a step).
  c.data.num_records = placeholder(int)  # Use only the first N records (None = all).

  c.optim = ml_collections.ConfigDict()
  c.optim.learning_rate = 1e-4  # Adam step size (constant, as the paper).
  c.optim.max_grad_norm = 1.0  # Global gradient-norm clip.
  c.optim.ema_decay = 0.99  # Decay of the parameter EMA used for evaluation and play.

  c.loss = ml_collections.ConfigDict()
  c.loss.kind = 'log_loss'  # log_loss (paper) | hl_gauss (soft labels).
  c.loss.hl_gauss_sigma = 0.75  # HL-Gauss label std, in bucket widths.

  c.train = ml_collections.ConfigDict()
  c.train.num_steps = 10_000_000  # Optimiser steps (the paper: 10M, 2.67 epochs at batch 4096).
  c.train.log_every = 1000  # Steps between log lines.
  c.train.eval_every = 100_000  # Steps between evaluations on data.eval.
  c.train.eval_records = 65_536  # Held-out records per evaluation.
  c.train.ckpt_every = 100_000  # Steps between checkpoints (also on SIGTERM and at the end).
  c.train.ckpt_keep = 3  # Checkpoints kept.
  c.train.compute_dtype = 'auto'  # float32 | bfloat16 | auto (bf16 on GPU/TPU, f32 on CPU).
  c.train.fsdp = 1  # Size of the parameter-sharding mesh axis; data axis = devices / fsdp (270M: ~4.3 GB of fp32 params+EMA+Adam; 8 on 16 GB TPUs).
  return c
