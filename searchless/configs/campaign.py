"""The strength campaign's model (issue 27): graph_tiny, trained for hours on every labelled board.

Run (the campaign command builds the data and resumes this run a few hours at a time):

    python -m searchless.commands.campaign --workdir /root/searchless-data/campaign --config campaign

or by hand on its de-duplicated boards:

    searchless-train --config campaign --workdir /root/searchless-data/campaign/train \\
        --data /root/searchless-data/campaign/boards/train_board_value_data.bagz train.max_seconds=10800

Why this model: at equal wall-clock on the same 23,756 real boards, graph_tiny
solved 5.0% of the dev puzzles against 0.9% for tiny_packed, tau-b 0.183
against 0.040 (benchmarks/RESULTS.md "A graph backbone"). The equal-budget
comparison on >= 200k boards (graph_tiny, a wider and deeper graph, tiny_packed)
has not run yet; until it has, the campaign trains graph_tiny with the
settings below, which are graph_tiny's measured ones.

Should reach: see WORKDIR/curve.jsonl and benchmarks/RESULTS.md "The strength campaign".
"""


import ml_collections

from searchless.training import config as config_lib


def get_config() -> ml_collections.ConfigDict:
  c = config_lib.from_file('graph_tiny')
  # Learning rate 1e-3 (constant), EMA 0.99, log-loss and 32 boards a step are graph_tiny's (tiny's), measured
  # on runs of minutes; the small-scale sweep of issue 27 section 2 has not run yet.
  c.train.num_steps = 100_000_000  # Never the stop: train.max_seconds ends each run and the next resumes.
  c.train.max_seconds = 3 * 3600.0  # One working stretch; the campaign command passes its --train_seconds.
  c.train.log_every = 200  # ~1 log line a minute.
  c.train.eval_every = 100_000_000  # No periodic evaluation: the campaign's evaluate step measures each run.
  c.train.ckpt_every = 2000  # ~12 min of work lost at most when a session ends.
  c.train.ckpt_keep = 2
  return c
