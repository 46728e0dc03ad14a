"""The board-packed tiny transformer with the structural priors (`model.priors`): the best combination measured.

tiny_packed (4 layers, d=64, 4 heads, one row per board: 77 FEN tokens and up to 64
move tokens) with five priors of `searchless.model.priors` switched on: the mover's
view, move tokens that add their squares' position rows (tied), relative square biases
in attention, a smolgen map 32 wide, and move tokens that read their from- and
to-square's states before every block (move gather). The tokens are the paper's; only
what the network knows about them changes.

Run (after `make run` has annotated the sample games; any board_value records do):

    searchless-train --config tiny_packed_priors --workdir runs/tiny_packed_priors \\
        --data 'runs/demo/data/train/board_value*' \\
        --eval_data runs/demo/data/test/board_value_data.bag

Why this combination (benchmarks/RESULTS.md "The priors' learning curves", "A move read
from its squares" and "The move gather to 60 minutes", 2 idle CPU cores, the 202,961
distinct shared boards, batch 32, lr 1e-3, EMA 0.99): priors 1-4 had the best held-out
log-loss, action accuracy and tau-b of every prior alone and combined at 15 minutes; the
move gather on top of them then solved 98/1500 dev puzzles (5.4-7.9%) in 15 minutes
against 13/1500 for priors 1-4 and 79/1500 for graph_tiny on the same machine.

What it reaches at 60 minutes there (10,605 steps): 100/1500 dev puzzles (5.5-8.0%),
held-out log-loss 4.955, action accuracy 0.265, tau-b 0.288 against the deep reference;
graph_tiny on the same boards and machine, 111/1500 (6.2-8.8%), 4.874, 0.261, 0.332. Its
update runs 0.80-0.81x tiny_packed's action-values/s (`benchmarks/studies/priors.py`).
"""

import ml_collections

from searchless import configs


def get_config() -> ml_collections.ConfigDict:
  c = configs.get('tiny_packed')
  c.model.mover_view = True  # Black's boards (and moves) mirrored: every board seen as White.
  c.model.move_squares = 'tied'  # A move token adds its from- and to-square's position rows and its promotion.
  c.model.square_bias = 'relative'  # A learned attention bias per head by the two squares' displacement.
  c.model.smolgen = 32  # A board-dependent 64 x 64 attention bias per head, from a 32-wide summary.
  c.model.move_gather = True  # Before every block a move token adds a map of its two squares' states.
  return c
