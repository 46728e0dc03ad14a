"""Tiny board-packed action-value model: tiny's transformer, one pass per board.

The same transformer as tiny (4 layers, d=64, 4 heads; the same
parameters, name for name), but a training row is a whole board: its 77 FEN
tokens and up to 64 legal-move tokens, every move scored at once (see
`searchless.model.transformer`). It reads board_value records, which `searchless-annotate`
writes beside the ChessBench datasets (`searchless-convert ... --to board`
makes them from action-value records).

Run (after `make run` has annotated the sample games):

    searchless-train --config tiny_packed --workdir runs/tiny_packed \\
        --data 'runs/demo/data/train/board_value*' \\
        --eval_data runs/demo/data/test/board_value_data.bag

Should reach (measured, benchmarks/RESULTS.md "Board packing", 2 CPU cores):
22.6x the action-values per second of tiny (5133 vs 227); trained
for 20 minutes (`train.max_seconds=1200`) on 37k annotated real Lichess boards,
action accuracy 0.094 and Kendall tau-b 0.193 on held-out boards, against 0.071
and 0.177 for tiny in the same time (benchmarks/packing.py).
"""

import ml_collections

from searchless import configs


def get_config() -> ml_collections.ConfigDict:
  c = configs.get('tiny')
  c.model.packing = 'board'
  c.data.batch_size = 32  # Boards per step (~1100 action-values of real games).
  c.data.max_moves = 64  # Move slots per row; real boards have ~35 legal moves, few over 64.
  c.train.eval_records = 512  # Boards.
  return c
