"""The board-packed tiny transformer with the structural priors of issue 28: the best combination measured.

tiny_packed (4 layers, d=64, 4 heads, one row per board: 77 FEN tokens and up to 64
move tokens) with all four priors of `searchless.model.priors` switched on: the
mover's view, move tokens that add their squares' position rows (tied), relative
square biases in attention and a smolgen map 32 wide. The tokens are the paper's;
only what the network knows about them changes.

Run (after `make run` has annotated the sample games; any board_value records do):

    searchless-train --config tiny_packed_priors --workdir runs/tiny_packed_priors \\
        --data 'runs/demo/data/train/board_value*' \\
        --eval_data runs/demo/data/test/board_value_data.bag

Why this combination (benchmarks/RESULTS.md "The priors' learning curves", 2 idle CPU
cores, the 202,961 distinct shared boards): at 15 minutes it had the best held-out
log-loss (5.201), action accuracy (0.181) and tau-b (0.206) of every prior alone and
combined, against 5.320, 0.147 and 0.166 for tiny_packed, at 0.86x its action-values
per second.

Should reach (measured there, 60 minutes of 2 CPU cores, batch 32, lr 1e-3, EMA 0.99):
log-loss 4.880, action accuracy 0.250, tau-b 0.271 on 2,000 held-out boards and
82/1500 dev puzzles (4.4-6.7%), against tiny_packed's 5.067, 0.175, 0.203 and 22/1500
in the same time; graph_tiny reached 4.708, 0.291, 0.371 and 146/1500.
"""


import ml_collections

from searchless.core import config as config_lib


def get_config() -> ml_collections.ConfigDict:
  c = config_lib.from_file('tiny_packed')
  c.model.mover_view = True  # Black's boards (and moves) mirrored: every board seen as White.
  c.model.move_squares = 'tied'  # A move token adds its from- and to-square's position rows and its promotion.
  c.model.square_bias = 'relative'  # A learned attention bias per head by the two squares' displacement.
  c.model.smolgen = 32  # A board-dependent 64 x 64 attention bias per head, from a 32-wide summary.
  return c
