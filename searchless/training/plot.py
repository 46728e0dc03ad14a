"""Plot a run's curves: ``searchless-plot WORKDIR`` (`searchless.commands.plot`) writes WORKDIR/curves.png.

Reads ``metrics.jsonl`` (written by training): train loss, eval loss, gradient
norm and throughput against the step.
"""

from collections.abc import Iterable, Mapping
import json
import pathlib
from typing import Any

from matplotlib.figure import Figure  # No pyplot: no global backend or figure state.

from searchless.plumbing import errors


def read_metrics(workdir: pathlib.Path) -> list[dict]:
  path = workdir / 'metrics.jsonl'
  if not path.exists():
    raise errors.MissingInput(f'no metrics.jsonl in {workdir} (has it trained?)')
  return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def series(records: Iterable[Mapping[str, Any]], key: str) -> tuple[list[int], list[float]]:
  """(steps, values) of `key` over the records that have it, by step (a later record of a step wins)."""
  points = sorted({r['step']: r[key] for r in records if r.get(key) is not None}.items())
  return [p[0] for p in points], [p[1] for p in points]


PANELS = (  # (keys and their labels, y label, title) of each panel.
  ((('loss', 'train loss'), ('eval_loss', 'eval loss')), 'log-loss (nats)', 'loss'),
  ((('grad_norm', None),), 'global norm', 'gradient norm (before clipping)'),
  ((('examples_per_s', None),), 'examples/s', 'throughput'),
)


def figure(records: Iterable[Mapping[str, Any]], title: str) -> Figure:
  """The curves of `records` (metrics.jsonl's lines); a short run's few points are drawn as points, and a panel
  with none says so. Raises ValueError when no record has a value to draw."""
  records = list(records)
  if not any(series(records, key)[0] for keys, _, _ in PANELS for key, _ in keys):
    raise errors.BadInput('no step logged yet: too little to plot')
  fig = Figure(figsize=(15, 4))
  for ax, (keys, ylabel, name) in zip(fig.subplots(1, len(PANELS)), PANELS):
    drawn = False
    for key, label in keys:
      steps, values = series(records, key)
      if steps:
        ax.plot(steps, values, label=label, marker='.' if len(steps) < 30 else None)
        drawn = True
    if not drawn:
      ax.text(0.5, 0.5, 'not logged yet', ha='center', va='center', transform=ax.transAxes)
    elif any(label for _, label in keys):
      ax.legend()
    ax.set(xlabel='step', ylabel=ylabel, title=name)
    ax.grid(alpha=0.3)
  fig.suptitle(title)
  fig.tight_layout()
  return fig


def plot(workdir: str | pathlib.Path) -> pathlib.Path:
  """Writes and returns ``<workdir>/curves.png``."""
  workdir = pathlib.Path(workdir)
  records = read_metrics(workdir)
  try:
    fig = figure(records, str(workdir))
  except ValueError as error:
    raise errors.BadInput(f'{workdir / "metrics.jsonl"}: {error}') from None
  out = workdir / 'curves.png'
  fig.savefig(out, dpi=100)
  return out
