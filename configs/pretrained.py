"""The model shipped as `pretrained` (`Player.load('pretrained')`): graph_tiny trained on the campaign's boards.

The AlphaGateau graph model of graph_tiny (4 layers, nodes d=64, edges 32, 4 heads; 303,936
parameters, every legal move of a board scored in one pass) on the board records of real Lichess
games, one record per position, labelled by one 20k-node MultiPV Stockfish search per board.

Run (the strength campaign builds the boards and resumes this run a few hours at a time; from the
repository's root, campaign/README.md):

    python -m campaign --workdir DIR --shared ../shared --config pretrained --start_from ''

or by hand on the campaign's boards:

    searchless-train --config pretrained --workdir runs/pretrained \\
        --data DIR/boards/train_board_value_data.bag train.max_seconds=10800

Why this model, and these settings: at equal wall-clock on the same 202,961 boards it learned
fastest of the models a CPU can train (benchmarks/RESULTS.md, "The model for the campaign's
budget"); the optimiser, loss and batch won a small-scale sweep, EMA 0.999 and learning rate 3e-4
won late A/Bs, and micro-batches of 2 make the same step faster on a CPU (RESULTS, the strength
campaign). On an accelerator give it the whole batch (``train.micro_batch=0``).

Should reach: the shipped model's card (searchless/pretrained/MODEL_CARD.md): 382/1500 dev puzzles.
"""

import ml_collections

from searchless import configs


def get_config() -> ml_collections.ConfigDict:
  c = configs.get('graph_tiny')
  c.optim.ema_decay = 0.999
  c.optim.learning_rate = 3e-4
  c.loss.value_weight = 0.0  # The state-value head stays in the model, untrained: without it the moves learn faster.
  c.train.micro_batch = 2  # The same step as the whole batch of 32, 1.83x faster on 2 CPU cores.
  c.train.num_steps = 100_000_000  # Never the stop: train.max_seconds ends each run and the next resumes.
  c.train.max_seconds = 3 * 3600.0  # One working stretch; the campaign passes its --train_seconds.
  c.train.log_every = 200
  c.train.eval_every = 100_000_000  # No periodic evaluation: the campaign's evaluate step measures each run.
  c.train.ckpt_every = 2000
  c.train.ckpt_keep = 2
  c.train.on_new_data = 'restart'  # Labels are added between runs (and the boards merged again): go on with them.
  return c
