"""Plot a run's curves: ``searchless-plot WORKDIR`` (`searchless.commands.plot`) writes WORKDIR/curves.png.

Reads ``metrics.jsonl`` (written by training): train loss, eval loss, gradient
norm and throughput against the step.
"""

from collections.abc import Iterable, Mapping
import json
import pathlib
from typing import Any

from matplotlib.figure import Figure  # No pyplot: no global backend or figure state.


def read_metrics(workdir: pathlib.Path) -> list[dict]:
  path = workdir / 'metrics.jsonl'
  if not path.exists():
    raise FileNotFoundError(f'no metrics.jsonl in {workdir} (has it trained?)')
  return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def series(records: Iterable[Mapping[str, Any]], key: str) -> tuple[list[int], list[float]]:
  """(steps, values) of `key` over the records that have it, by step (a later record of a step wins)."""
  points = sorted({r['step']: r[key] for r in records if r.get(key) is not None}.items())
  return [p[0] for p in points], [p[1] for p in points]


def plot(workdir: str | pathlib.Path) -> pathlib.Path:
  """Writes and returns ``<workdir>/curves.png``."""
  workdir = pathlib.Path(workdir)
  records = read_metrics(workdir)
  fig = Figure(figsize=(15, 4))
  axes = fig.subplots(1, 3)
  for key, label in (('loss', 'train loss'), ('eval_loss', 'eval loss')):
    steps, values = series(records, key)
    if steps:
      axes[0].plot(steps, values, label=label, marker='.' if len(steps) < 30 else None)
  axes[0].set(xlabel='step', ylabel='log-loss (nats)', title='loss')
  axes[0].legend()
  steps, values = series(records, 'grad_norm')
  axes[1].plot(steps, values)
  axes[1].set(xlabel='step', ylabel='global norm', title='gradient norm (before clipping)')
  steps, values = series(records, 'examples_per_s')
  axes[2].plot(steps, values)
  axes[2].set(xlabel='step', ylabel='examples/s', title='throughput')
  for ax in axes:
    ax.grid(alpha=0.3)
  fig.suptitle(str(workdir))
  fig.tight_layout()
  out = workdir / 'curves.png'
  fig.savefig(out, dpi=100)
  return out
