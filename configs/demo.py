"""The demo job's recipe (`make run`): the tiny graph model, trained ~3 minutes on 2 CPU cores, and the job's settings.

Run it all (annotate -> train -> evaluate -> puzzles -> match -> report):

    make run        # or: python -m searchless.commands.demo --run_dir runs/demo

or just its training step:

    searchless-train --config demo --workdir runs/demo/train \\
        --data 'data/demo/train/board_value*' --eval_data 'data/demo/test/board_value*'

Should reach (benchmarks/RESULTS.md, "make run"): 400 steps of 32 boards (~2.5
epochs of the sample's ~5,100 train boards, every legal move of each scored),
action accuracy ~8% on the test boards, as the per-move `tiny` transformer
reached in 800 steps at batch 128 and twice the time or more. The model is
graph_tiny, the shipped `pretrained` model's kind at a CPU's size; it plays
legal but weak chess (the shipped model is the stronger one to play). The
``demo`` section is read by the demo job only: each of its fields is the
default of the job's flag of the same name.
"""

import ml_collections

from searchless import configs


def get_config() -> ml_collections.ConfigDict:
  c = configs.get('graph_tiny')  # Batches of 32 boards; eval_records: 512 boards.
  c.train.num_steps = 400  # ~3 minutes on 2 CPU cores.
  c.train.eval_every = 100
  c.train.log_every = 20
  c.train.ckpt_every = 100

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
