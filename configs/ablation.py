"""Ablation recipe: the paper's cheaper setup for comparing design choices (9M-class model).

Run (one ablation = this config plus the override under study, e.g. loss.kind=hl_gauss,
policy=state_value, model.num_layers=4):

    searchless-train --config configs/ablation.py --workdir runs/ablation \\
        --data 'chessbench/train/action_value-*_data.bag'

How it differs from the main recipe (configs/9m.py, same 8-layer d=256 8-head
model): Adam learning rate 4e-4 instead of 1e-4, batch 1024 instead of 4096, 32
return buckets instead of 128, and fewer steps. The learning rate, batch size,
bucket count and model size are the paper's ablation setup; the step count
(5M) and everything else (clip 1.0, EMA 0.99, log loss, constant learning rate)
are carried over from the main recipe and are not pinned by a published run.

Should reach: a ranking of variants, not an absolute target: compare test loss,
action accuracy and puzzle accuracy of runs that differ in one field only (the
paper's ablation tables). Cost: 1.38 GFLOPs per sequence forward
(`model.flops_per_sequence`; the 32-bucket head is negligible), ~2.1e19 training
FLOPs for 5M steps of 1024.
"""

import ml_collections
from ml_collections.config_dict import placeholder


def get_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.policy = 'action_value'  # action_value | state_value | behavioral_cloning.
  c.num_return_buckets = 32  # Value classes (uniform buckets of win probability); the ablations' 32.

  c.model = ml_collections.ConfigDict()
  c.model.embedding_dim = 256  # Width d of the residual stream.
  c.model.num_layers = 8  # Transformer blocks.
  c.model.num_heads = 8  # Attention heads (d / num_heads per head), as the published 9M.
  c.model.widening_factor = 4  # SwiGLU hidden size = widening_factor * d.
  c.model.emb_init_scale = 0.02  # Std of the truncated-normal embedding init.
  c.model.apply_post_ln = True  # Final LayerNorm before the output layer.
  c.model.apply_qk_layernorm = False  # LayerNorm on queries and keys.
  c.model.use_causal_mask = False  # The reference predicts from the whole board.
  c.model.seed = 1  # Parameter initialisation seed.

  c.data = ml_collections.ConfigDict()
  c.data.train = ''  # Bag spec/glob of training records (the --data flag sets it).
  c.data.eval = ''  # Bag spec/glob of held-out records ('' = no periodic evaluation).
  c.data.batch_size = 1024  # Global batch size (all devices and hosts together), the ablations'.
  c.data.shuffle = True  # Global uniform shuffle, reshuffled every epoch.
  c.data.seed = 0  # Shuffle seed.
  c.data.worker_count = 8  # grain worker processes per host: a small model eats records fast.
  c.data.num_records = placeholder(int)  # Use only the first N records (None = all).

  c.optim = ml_collections.ConfigDict()
  c.optim.learning_rate = 4e-4  # Adam step size (constant), the ablations'.
  c.optim.max_grad_norm = 1.0  # Global gradient-norm clip.
  c.optim.ema_decay = 0.99  # Decay of the parameter EMA used for evaluation and play.

  c.loss = ml_collections.ConfigDict()
  c.loss.kind = 'log_loss'  # log_loss (paper) | hl_gauss (soft labels).
  c.loss.hl_gauss_sigma = 0.75  # HL-Gauss label std, in bucket widths.

  c.train = ml_collections.ConfigDict()
  c.train.num_steps = 5_000_000  # Optimiser steps (ours; 0.33 epochs of the 15.32B action-values).
  c.train.log_every = 1000  # Steps between log lines.
  c.train.eval_every = 100_000  # Steps between evaluations on data.eval.
  c.train.eval_records = 65_536  # Held-out records per evaluation.
  c.train.ckpt_every = 100_000  # Steps between checkpoints (also on SIGTERM and at the end).
  c.train.ckpt_keep = 3  # Checkpoints kept.
  c.train.compute_dtype = 'auto'  # float32 | bfloat16 | auto (bf16 on GPU/TPU, f32 on CPU).
  c.train.fsdp = 1  # Size of the parameter-sharding mesh axis; data axis = devices / fsdp (9M: replicate).
  return c
