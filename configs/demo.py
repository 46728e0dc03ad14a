"""The demo job's recipe (`make run`): the tiny model, trained ~8 minutes on 2 CPU cores, and the job's settings.

Run it all (annotate -> train -> evaluate -> puzzles -> match -> report):

    make run        # or: python -m searchless.commands.demo --run_dir runs/demo

or just its training step:

    searchless-train --config demo --workdir runs/demo/train \\
        --data 'runs/demo/data/train/action_value*' --eval_data 'runs/demo/data/test/action_value*'

Should reach (benchmarks/RESULTS.md, "make run"): 800 steps at batch 128 (0.7
epochs of the sample's ~37k train action-values), eval loss ~4.5 from ln(128) =
4.85; the model plays legal but weak chess (the shipped 'pretrained' model is
the stronger one to play). The ``demo`` section is read by the demo job only:
each of its fields is the default of the job's flag of the same name.
"""

import ml_collections

from searchless import configs


def get_config() -> ml_collections.ConfigDict:
  c = configs.get('tiny')
  c.data.batch_size = 128
  c.train.num_steps = 800  # ~8 minutes on 2 CPU cores.
  c.train.eval_every = 200
  c.train.log_every = 20
  c.train.ckpt_every = 200
  c.train.eval_records = 8192

  c.demo = ml_collections.ConfigDict()
  # One MultiPV search of 30k nodes per board scores every move: ~3.5 minutes for the sample on 2 cores.
  c.demo.annotate_args = '--mode multipv --limit nodes=30000 --state_value best_move'
  c.demo.mine_limit = 'nodes=20000'  # Stockfish limit for mining puzzles from the test games.
  c.demo.max_puzzles = 300  # Puzzles to mine at most.
  # A UCI_Elo-limited Stockfish anchors the match's Elo.
  c.demo.match_opponent = 'stockfish:time=0.05,elo=1350,name=stockfish-elo1350'
  c.demo.match_games = 8  # Games of each pair of players (pairs of colours).
  c.demo.match_max_plies = 200  # Plies before a game is drawn.
  return c
