"""The strength campaign's model (issue 27): graph_tiny, trained for hours on every labelled board.

Run (the campaign command builds the data and resumes this run a few hours at a time):

    python -m searchless.commands.campaign --workdir /root/searchless-data/campaign --config campaign

or by hand on its de-duplicated boards:

    searchless-train --config campaign --workdir /root/searchless-data/campaign/train \\
        --data /root/searchless-data/campaign/boards/train_board_value_data.bagz train.max_seconds=10800

Why this model: at equal wall-clock on the 202,961 distinct shared boards, graph_tiny
solved 9.7% of the dev puzzles at 60 minutes (146/1500) and tau-b 0.371, where tiny_packed
solved 1.5% (benchmarks/RESULTS.md "The model for the campaign's budget"); on 23,756
boards it was 5.0% against 0.9% ("A graph backbone"). On a lent H200 (RESULTS "The campaign on
a lent GPU"), graph_tiny continued from its CPU run was the best model per second (312/1500
after 620 s, shipped as `pretrained`); a wider graph and the 4M transformer with the priors,
from scratch, reached 155 and 128 in 430 s. The CPU settings below are graph_tiny's measured
ones; the GPU run used batch 256 and EMA 0.999 (``benchmarks/device_campaign.py``).

Should reach: see WORKDIR/curve.jsonl and benchmarks/RESULTS.md "The strength campaign".
"""


import ml_collections

from searchless.core import config as config_lib


def get_config() -> ml_collections.ConfigDict:
  c = config_lib.from_file('graph_tiny')
  # Learning rate 1e-3 (constant; 3e-4 late, below), log-loss and 32 boards a step (graph_tiny's) are chosen by a
  # small-scale sweep (RESULTS "The campaign's optimiser and loss, measured at small scale"): 15 minutes each on
  # the 202,961 shared boards, all without the value loss, dev puzzles / tau-b / log-loss:
  #   lr 1e-3, EMA 0.99, batch 32, log-loss (these)   132/1500, 0.326, 5.050
  #   lr 3e-3                                         102/1500, 0.289, 5.135
  #   lr 3e-4                                         101/1500, 0.269, 5.179
  #   EMA 0.999                                       121/1500, 0.311, 5.128
  #   batch 128, lr 2e-3                               97/1500, 0.261, 5.274  (0.96x the action-values/s)
  #   HL-Gauss (sigma 0.75 buckets)                   104/1500, 0.305, 5.122
  # EMA 0.999 loses at 15 minutes from scratch (3.7k steps), but late in the campaign it wins: from the campaign's
  # step 37,812, 15 minutes each on the 688,005 merged boards (RESULTS "Late-training EMA"), EMA 0.99 against 0.999:
  # log-loss 4.149 against 4.126, tau-b 0.475 against 0.477, accuracy 0.372 against 0.370, 352 against 351/1500.
  # The campaign runs 0.999 from there (the GPU runs, batch 256, use it too).
  c.optim.ema_decay = 0.999
  # Learning rate 3e-4 from the campaign's step 64,129 on (3.7 h of CPU training after the GPU's): from that checkpoint,
  # 15 minutes each on the 688,005 merged boards (RESULTS "Late-training learning rate"), 1e-3 against 3e-4:
  # log-loss 4.101 against 4.078, tau-b 0.484 against 0.486, accuracy 0.389 against 0.382, 361 against 384/1500.
  # At 1e-3 the held-out log-loss had stopped falling (4.099 at step 64,129, 4.101 at 70,790).
  c.optim.learning_rate = 3e-4
  # No state-value loss: at 15 minutes on the 202,961 shared boards graph_tiny without it reached log-loss 5.050,
  # tau-b 0.326 and 132/1500 dev puzzles, against 5.193, 0.251 and 103/1500 with it; at 30 minutes 147/1500, what
  # it reached with it at 60 (RESULTS "The priors' learning curves"). The head stays in the model (a checkpoint's
  # parameters are unchanged), untrained from here.
  c.loss.value_weight = 0.0
  # Each step's 32 boards go through the network 2 at a time, their gradients summed: the same step (a test pins
  # it), 1.83x the action-values/s on 2 idle cores (benchmarks/graph.py: 7,661 against 4,196; micro-batches of
  # 1, 4, 8 and 16: 1.14x, 1.65x, 1.57x, 1.30x). RESULTS "Micro-batches". An accelerator wants the whole batch (0).
  c.train.micro_batch = 2
  c.train.num_steps = 100_000_000  # Never the stop: train.max_seconds ends each run and the next resumes.
  c.train.max_seconds = 3 * 3600.0  # One working stretch; the campaign command passes its --train_seconds.
  c.train.log_every = 200  # ~1 log line a minute.
  c.train.eval_every = 100_000_000  # No periodic evaluation: the campaign's evaluate step measures each run.
  c.train.ckpt_every = 2000  # ~12 min of work lost at most when a session ends.
  c.train.ckpt_keep = 2
  c.train.on_new_data = 'restart'  # Labels are added between runs (and the boards re-merged): go on with the new bag.
  return c
