"""The model shipped in the package (`Player.load('pretrained')`): tiny_packed trained for an hour.

The board-packed tiny transformer (tiny_packed: 4 layers, d=64, 4
heads, ~0.4M parameters, every legal move of a board scored in one pass) on
the board records of real Lichess games labelled by one 20k-node MultiPV
Stockfish search per board. At this machine's budget (2 CPU cores, an hour of
training) the small model is the compute-optimal one.

Run (what `python -m searchless.commands.pretrained` does after annotating the games):

    searchless-train --config pretrained --workdir runs/pretrained/train \\
        --data 'runs/pretrained/data/chunk_*/train/board_value_data.bag'

Should reach: see the model card (searchless/pretrained/MODEL_CARD.md) and
benchmarks/RESULTS.md "The shipped pretrained model".
"""


import ml_collections

from searchless import configs


def get_config() -> ml_collections.ConfigDict:
  c = configs.get('tiny_packed')
  c.train.num_steps = 10_000_000  # The wall-clock budget below ends the run.
  c.train.max_seconds = 3600.0  # One hour of training (compilation and checkpoints included).
  c.train.log_every = 100
  c.train.eval_every = 10_000_000  # No periodic evaluation: benchmarks/pretrained_strength.py measures it.
  c.train.ckpt_every = 1000
  return c
