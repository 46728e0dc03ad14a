"""The report's figures (matplotlib `Figure`s, no pyplot state) and the calibration bins they show.

Calibration (`calibration_bins`): every (board, move) pair of
``eval/boards.jsonl`` goes to bin k of `num_bins` by its predicted win
probability p, k = floor(p * num_bins) (p = 1.0 in the last bin); each bin
reports its count, mean predicted and mean Stockfish win probability.

>>> [tuple(round(v, 3) for v in b) for b in calibration_bins([0.05, 0.15, 0.95], [0.1, 0.3, 0.9], 2)]
[(0.0, 0.5, 2, 0.1, 0.2), (0.5, 1.0, 1, 0.95, 0.9)]
>>> round(calibration_error(calibration_bins([0.05, 0.15, 0.95], [0.1, 0.3, 0.9], 2)), 3)
0.083
>>> round(uniform_loss(128), 2)
4.85
"""

from collections.abc import Sequence
import math
import pathlib
from typing import NamedTuple

from matplotlib.figure import Figure  # No pyplot: no global backend or figure state.
import numpy as np

from searchless.training import plot as plot_lib


def uniform_loss(num_buckets: int) -> float:
  """The log-loss (nats) of a uniform guess over `num_buckets` value buckets: ln(num_buckets)."""
  return math.log(num_buckets)


class CalibrationBin(NamedTuple):
  """One reliability bin: predicted win probabilities in [lower, upper)."""

  lower: float
  upper: float
  count: int  # type: ignore[assignment]  # (shadows tuple.count)
  mean_predicted: float  # nan for an empty bin.
  mean_stockfish: float


def calibration_bins(
  predicted: Sequence[float] | np.ndarray, stockfish: Sequence[float] | np.ndarray, num_bins: int = 10
) -> list[CalibrationBin]:
  """Reliability bins of predicted win probabilities against Stockfish's (see the module docstring)."""
  p = np.asarray(predicted, np.float64)
  s = np.asarray(stockfish, np.float64)
  if p.shape != s.shape:
    raise ValueError(f'predicted {p.shape} and stockfish {s.shape} differ in shape')
  if num_bins < 1:
    raise ValueError(f'num_bins must be >= 1, got {num_bins}')
  index = np.clip(np.floor(p * num_bins).astype(np.int64), 0, num_bins - 1)
  bins = []
  for k in range(num_bins):
    mask = index == k
    count = int(mask.sum())
    bins.append(
      CalibrationBin(
        k / num_bins,
        (k + 1) / num_bins,
        count,
        float(p[mask].mean()) if count else math.nan,
        float(s[mask].mean()) if count else math.nan,
      )
    )
  return bins


def calibration_error(bins: Sequence[CalibrationBin]) -> float:
  """Count-weighted mean |mean predicted - mean Stockfish| over the bins (expected calibration error)."""
  total = sum(b.count for b in bins)
  if not total:
    return math.nan
  return sum(b.count * abs(b.mean_predicted - b.mean_stockfish) for b in bins if b.count) / total


def move_pairs(boards: Sequence[dict]) -> tuple[np.ndarray, np.ndarray]:
  """(predicted, Stockfish) win probability of every (board, move) pair of boards.jsonl records."""
  predicted = [p for b in boards for p in b['predicted']]
  stockfish = [s for b in boards for s in b['stockfish']]
  return np.asarray(predicted, np.float64), np.asarray(stockfish, np.float64)


def _figure(width: float, height: float) -> Figure:
  return Figure(figsize=(width, height), dpi=100, layout='constrained')


def plot_training(records: Sequence[dict], path: pathlib.Path, num_buckets: int) -> None:
  """Train and eval loss (left, beside the uniform guess over `num_buckets`) and eval action accuracy (right)."""
  fig = _figure(11, 4)
  loss_ax, acc_ax = fig.subplots(1, 2)
  for key, label, color in (
    ('loss', 'train loss (mean over log window)', 'tab:blue'),
    ('eval_loss', 'eval loss (EMA params)', 'tab:orange'),
  ):
    steps, values = plot_lib.series(records, key)
    if steps:
      loss_ax.plot(steps, values, label=label, color=color, marker='o' if len(steps) <= 30 else None, ms=3)
  loss_ax.axhline(
    uniform_loss(num_buckets),
    color='grey',
    ls=':',
    lw=1,
    label=f'uniform over {num_buckets} buckets (ln {num_buckets})',
  )
  loss_ax.set(xlabel='step', ylabel='log-loss (nats)', title='Loss')
  loss_ax.legend(fontsize=9)
  steps, values = plot_lib.series(records, 'eval_action_accuracy')
  if steps:
    acc_ax.plot(steps, [100 * v for v in values], color='tab:green', marker='o', ms=4)
    acc_ax.set_ylim(0, max(10.0, 100 * max(values) * 1.25))
  else:
    acc_ax.text(
      0.5,
      0.5,
      'no evaluation records\n(train with --eval_data)',
      ha='center',
      va='center',
      transform=acc_ax.transAxes,
      color='grey',
    )
  acc_ax.set(xlabel='step', ylabel='action accuracy (%)', title='Eval action accuracy (EMA params)')
  for ax in (loss_ax, acc_ax):
    ax.grid(alpha=0.3)
  fig.savefig(path)


def plot_calibration(
  predicted: np.ndarray, stockfish: np.ndarray, bins: Sequence[CalibrationBin], path: pathlib.Path
) -> None:
  """Reliability curve with per-bin counts (left) and every (board, move) pair (right)."""
  fig = _figure(11, 4.8)
  grid = fig.add_gridspec(2, 2, height_ratios=(3, 1))
  curve = fig.add_subplot(grid[0, 0])
  counts = fig.add_subplot(grid[1, 0], sharex=curve)
  scatter = fig.add_subplot(grid[:, 1])
  full = [b for b in bins if b.count]
  curve.plot([0, 1], [0, 1], color='grey', ls='--', lw=1, label='perfect calibration')
  curve.plot(
    [b.mean_predicted for b in full],
    [b.mean_stockfish for b in full],
    color='tab:blue',
    marker='o',
    label='per-bin means',
  )
  curve.set(
    ylabel="Stockfish's win prob. (mean)", xlim=(0, 1), ylim=(0, 1), title='Reliability (binned by predicted win prob.)'
  )
  curve.legend(fontsize=9, loc='upper left')
  curve.grid(alpha=0.3)
  curve.tick_params(labelbottom=False)
  width = bins[0].upper - bins[0].lower if bins else 0.1
  bars = counts.bar(
    [b.lower + width / 2 for b in bins], [b.count for b in bins], width=width * 0.9, color='tab:blue', alpha=0.5
  )
  for bar, b in zip(bars, bins):
    if b.count:
      counts.annotate(
        str(b.count),
        (bar.get_x() + bar.get_width() / 2, bar.get_height()),
        xytext=(0, 1),
        textcoords='offset points',
        ha='center',
        va='bottom',
        fontsize=7,
      )
  counts.set(xlabel="model's predicted win prob.", ylabel='pairs')
  counts.set_ylim(0, max([b.count for b in bins] + [1]) * 1.35)
  counts.grid(alpha=0.3, axis='y')
  alpha = float(np.clip(300 / max(len(predicted), 1), 0.03, 0.6))
  scatter.scatter(predicted, stockfish, s=6, alpha=alpha, color='tab:purple', edgecolors='none')
  scatter.plot([0, 1], [0, 1], color='grey', ls='--', lw=1)
  scatter.set(
    xlim=(0, 1),
    ylim=(0, 1),
    xlabel="model's predicted win prob.",
    ylabel="Stockfish's win prob.",
    title=f'All {len(predicted):,} (board, move) pairs',
  )
  scatter.set_aspect('equal')
  scatter.grid(alpha=0.3)
  fig.savefig(path)


def plot_game(
  plies: Sequence[int],
  model_view: Sequence[float | None],
  stockfish_view: Sequence[float | None],
  title: str,
  path: pathlib.Path,
  opening_plies: int = 0,
) -> None:
  """The model's side's win probability per position, as the model and as Stockfish see it."""
  fig = _figure(11, 3.6)
  ax = fig.subplots()
  if opening_plies:
    ax.axvspan(0, opening_plies, color='grey', alpha=0.12, label='opening (given)')
  ax.axhline(0.5, color='grey', lw=0.8)
  for view, label, color in ((model_view, "model's view", 'tab:blue'), (stockfish_view, "Stockfish's view", 'tab:red')):
    xs = [x for x, v in zip(plies, view) if v is not None]
    if xs:
      ax.plot(xs, [v for v in view if v is not None], label=label, color=color, marker='.', ms=4, lw=1.4)
  ax.set(xlabel='plies played', ylabel="win prob. of the model's side", ylim=(-0.02, 1.02), title=title)
  ax.legend(fontsize=9, loc='best')
  ax.grid(alpha=0.3)
  fig.savefig(path)


def plot_ratings(players: Sequence[dict], path: pathlib.Path, models: set[str], confidence: str) -> None:
  """Each player's BayesElo with its interval (``elo``, ``lower``, ``upper``; an anchor has no interval), best on top.

  The models of this run (`models`) are drawn in blue, their opponents in grey.
  """
  ordered = sorted(players, key=lambda p: p['elo'])
  fig = _figure(7, 0.5 * len(ordered) + 1.4)
  ax = fig.subplots()
  for row, p in enumerate(ordered):
    color = 'tab:blue' if p['name'] in models else 'tab:gray'
    low, high = p.get('lower'), p.get('upper')
    if low is not None and high is not None and high > low:
      ax.errorbar(p['elo'], row, xerr=[[p['elo'] - low], [high - p['elo']]], fmt='o', color=color, capsize=4)
    else:
      ax.plot(p['elo'], row, 'D', color=color)  # An anchor: fixed.
  ax.set_yticks(range(len(ordered)), [p['name'] for p in ordered])
  ax.set(xlabel='BayesElo', title=f'Ratings with their {confidence} intervals (diamond: the anchor, fixed)')
  ax.grid(alpha=0.3, axis='x')
  fig.savefig(path)
