"""The strength campaign's model from session 18 on (issue 27): graph_tiny grown to 6 layers.

Run (the campaign's train step resumes its run, or starts from the model it restored from `--keep_dir`):

    python -m searchless.commands.campaign --workdir /root/searchless-data/campaign --config campaign_deep6 \\
        --keep_dir campaign_kept --steps train,evaluate,match,keep --train_seconds 10800

On a new machine with nothing kept, the first run grows the shipped model (graph_tiny's parameters) to 6 layers:
add `--set train.init_from=searchless/pretrained train.init_grow=True` (session 20 did).

How it was made: `train.init_from` the campaign's graph_tiny (step 11,117) with `train.init_grow=True
model.num_layers=6` (`searchless.training.grow`): two new layers that start as the identity, the same function
at step 0 (435,712 parameters against 303,936).

Why: graph_tiny had stopped learning (RESULTS "The campaign, session 17": held-out and training boards score
alike, and 80 minutes on the CPU changed nothing). In the grow A/B (RESULTS "The campaign, session 18"), 40
minutes of one core each from that checkpoint, paired against it on the same 2,000 held-out boards and 1,500
dev puzzles, every arm stayed where it was:
  graph_tiny continued (6,168 steps)     log-loss -0.0011 +- 0.0056, 411/1500
  MLPs 8 wide (4,950 steps)              log-loss -0.0008 +- 0.0056, 406/1500
  6 layers (3,809 steps; these)          log-loss -0.0012 +- 0.0053, 416/1500
  a 6,000-step cooldown                  log-loss -0.0025 +- 0.0054, 409/1500
graph_tiny is known flat over two hours; of the grown ones, the deeper has the new capacity where chess needs it
(two more rounds of messages between squares), so the remaining hours go to it, and its curve says whether it
rises. The optimiser is the campaign's (lr 3e-4, batch 32 in micro-batches of 2) with a longer EMA (0.99987, below).

Should reach: see WORKDIR/curve.jsonl and benchmarks/RESULTS.md "The strength campaign".
"""


import ml_collections

from searchless.core import config as config_lib


def get_config() -> ml_collections.ConfigDict:
  c = config_lib.from_file('campaign')
  c.model.num_layers = 6  # GATEAU layers: graph_tiny's 4 and the 2 that `training.grow` added (the grow A/B's deep6).
  # Measured on this model (RESULTS "The campaign, session 21"): from its step 6,757, 50 minutes on one core each,
  # paired on 2,000 held-out boards against that step, log-loss +0.0042 +- 0.0044 at 3e-4 (a new optimiser) and
  # +0.0241 +- 0.0069 at 1e-3 falling to 1e-4 over its last 1,200 steps; a cooldown of 3e-4 to 0 gave -0.0025 +- 0.0054
  # on graph_tiny (session 18). Neither a higher rate nor a lower one moves the model: 3e-4 stays.
  c.optim.learning_rate = 3e-4
  # EMA over ~7,700 steps (256k boards at 32 a step: the window of the GPU's EMA 0.999 at 256 a step). From the H200's
  # step 16,807 (RESULTS "The campaign, session 22"), 45 minutes on one core each, paired on the 2,000 held-out boards
  # against that step, every arm with a shorter window lost ground: EMA 0.999 at lr 3e-4 +0.0067 +- 0.0042, at 1e-4
  # +0.0051 +- 0.0028; batch 256 with EMA 0.992 +0.0041 +- 0.0028. This one (RESULTS "The campaign, session 23"):
  # 65 minutes (4,327 steps) -0.0016 +- 0.0016, 406 against 406/1500; 55 more (8,180) -0.0027 +- 0.0030, 404/1500.
  # The CPU's hours no longer undo the GPU's.
  c.optim.ema_decay = 0.99987
  return c
