"""The strength campaign's model: the shipped `pretrained` graph grown to 6 layers.

A config of the campaign, not of the package: `python -m campaign` finds it by name (`campaign.run.config_file`);
`searchless-train --config campaign/configs/campaign_deep6.py` takes its path.

Run (from the repository's root; the campaign's train step resumes its run, and a new one starts
from the shipped `pretrained`, grown: `train.init_grow`, two new layers that start as the identity):

    python -m campaign --workdir DIR --shared ../shared --config campaign_deep6 --train_seconds 10800

Why: the 4-layer graph had stopped learning (held-out and training boards scored alike); of the
grown arms of an A/B the deeper one has the new capacity where chess needs it (two more rounds of
messages between squares). The EMA window matches a GPU run's in boards (~256k), so CPU hours
after a GPU run do not undo it (benchmarks/RESULTS.md, the strength campaign).

Should reach: WORKDIR/curve.jsonl; the campaign's last points are in RESULTS (406/1500 dev puzzles
after its GPU run, 397 after 4.6 h more on one core).
"""

import ml_collections

from searchless import configs


def get_config() -> ml_collections.ConfigDict:
  c = configs.get('pretrained')
  c.model.num_layers = 6  # pretrained's 4 and the 2 that `training.grow` adds.
  c.optim.ema_decay = 0.99987  # ~7,700 steps of 32 boards: a GPU run's EMA 0.999 at 256 boards a step.
  return c
