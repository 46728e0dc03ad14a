"""The shipped `pretrained-transformer`: a board-packed transformer with structural priors (3,970,796 parameters).

tiny_packed's board packing (one pass scores every legal move of a board) at 6 layers, width 192 and 6 heads,
with three of the priors (tiny_packed_priors): the mover's view, the move's squares (tied) and relative square
biases. Trained on a GPU: 256 boards a step, learning rate 5e-4 (no warm-up), EMA 0.999 (runs of tens of
thousands of steps), float32 compute.

Run (on board_value records; the shipped model continued with `train.init_from=searchless/pretrained_transformer`):

    searchless-train --config pretrained_transformer --workdir runs/pretrained_transformer \\
        --data 'runs/demo/data/train/board_value*'

On a lent H200, at full speed: `benchmarks/gpu_playbook.py` (bfloat16, a larger batch).

Should reach (searchless/pretrained_transformer/MODEL_CARD.md): the shipped model is 34,471 such steps
(three lent-GPU runs of 430-480 s, 462,929 distinct boards labelled by 20k-node MultiPV Stockfish): 18.1% of the
1500 dev puzzles, action accuracy 0.366 and Kendall tau-b 0.465 on held-out boards. Throughput: ~7,600 boards/s
on an H200 shared with a second model (float32, batch 256, 7 loader workers); a 2-core CPU runs ~100x fewer.
"""

import ml_collections

from searchless import configs


def get_config() -> ml_collections.ConfigDict:
  c = configs.get('tiny_packed')
  c.model.embedding_dim = 192
  c.model.num_layers = 6
  c.model.num_heads = 6
  c.model.mover_view = True  # Black's boards (and moves) mirrored: every board seen as White.
  c.model.move_squares = 'tied'  # A move token adds its from- and to-square's position rows and its promotion.
  c.model.square_bias = 'relative'  # A learned attention bias per head by the two squares' displacement.
  c.data.batch_size = 256  # Boards a step.
  c.optim.learning_rate = 5e-4
  c.optim.ema_decay = 0.999
  return c
