"""Tiny action-value model (4 layers, d=64, 4 heads; the reference's 'local' config) for a CPU.

Run (after `make run` has annotated the sample games):

    searchless-train --config configs/tiny.py --workdir runs/tiny \\
        --data 'runs/demo/data/train/action_value*'

Should reach: on the bundled sample games, train loss falls from ~4.85
(ln 128) to below 3.0 within ~2000 steps (a few minutes on 2 CPU cores).
"""

import ml_collections
from ml_collections.config_dict import placeholder


def get_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.policy = 'action_value'  # action_value | state_value | behavioral_cloning.
  c.num_return_buckets = 128  # Value classes (uniform buckets of win probability).

  c.model = ml_collections.ConfigDict()
  c.model.embedding_dim = 64  # Width d of the residual stream.
  c.model.num_layers = 4  # Transformer blocks.
  c.model.num_heads = 4  # Attention heads (d / num_heads per head).
  c.model.widening_factor = 4  # SwiGLU hidden size = widening_factor * d.
  c.model.emb_init_scale = 0.02  # Std of the truncated-normal embedding init.
  c.model.apply_post_ln = True  # Final LayerNorm before the output layer.
  c.model.apply_qk_layernorm = False  # LayerNorm on queries and keys.
  c.model.use_causal_mask = False  # The reference predicts from the whole board.
  c.model.seed = 1  # Parameter initialisation seed.

  c.data = ml_collections.ConfigDict()
  c.data.train = ''  # Bag spec/glob of training records (the --data flag sets it).
  c.data.eval = ''  # Bag spec/glob of held-out records ('' = no periodic evaluation).
  c.data.batch_size = 256  # Global batch size (all devices and hosts together).
  c.data.shuffle = True  # Global uniform shuffle, reshuffled every epoch.
  c.data.seed = 0  # Shuffle seed.
  c.data.worker_count = 0  # grain worker processes per host (0 = in-process).
  c.data.num_records = placeholder(int)  # Use only the first N records (None = all).

  c.optim = ml_collections.ConfigDict()
  c.optim.learning_rate = 1e-4  # Adam step size (constant, as the paper).
  c.optim.max_grad_norm = 1.0  # Global gradient-norm clip.
  c.optim.ema_decay = 0.99  # Decay of the parameter EMA used for evaluation and play.

  c.loss = ml_collections.ConfigDict()
  c.loss.kind = 'log_loss'  # log_loss (paper) | hl_gauss (soft labels).
  c.loss.hl_gauss_sigma = 0.75  # HL-Gauss label std, in bucket widths.

  c.train = ml_collections.ConfigDict()
  c.train.num_steps = 2000  # Optimiser steps.
  c.train.log_every = 50  # Steps between log lines.
  c.train.eval_every = 500  # Steps between evaluations on data.eval.
  c.train.eval_records = 2048  # Held-out records per evaluation.
  c.train.ckpt_every = 500  # Steps between checkpoints (also on SIGTERM and at the end).
  c.train.ckpt_keep = 2  # Checkpoints kept.
  c.train.compute_dtype = 'auto'  # float32 | bfloat16 | auto (bf16 on GPU/TPU, f32 on CPU).
  c.train.fsdp = 1  # Size of the parameter-sharding mesh axis; data axis = devices / fsdp.
  return c
