"""The "Test-set metrics" section: the model against Stockfish on held-out boards, and its calibration.

Reads ``eval/metrics.json`` (`artefacts.EvaluationMetrics`) and, for the
calibration bins and plot, ``eval/boards.jsonl``.
"""

from searchless.core import artefacts
from searchless.report import figures
from searchless.report.context import Context, read_jsonl
from searchless.report.document import Callout, Image, Section, Table, Text, format_count, format_number, format_percent

CALIBRATION_PNG = 'calibration.png'
CALIBRATION_BINS = 20
METRIC_MEANINGS = {
  'action_accuracy': ('Action accuracy', "boards where the model's best move is one of Stockfish's best moves"),
  'kendall_tau': (
    "Kendall's tau-b",
    "rank agreement of the model's move values with Stockfish's, tau-b on the "
    'values (ties handled), mean over boards where it is defined',
  ),
  'kendall_tau_reference_argsort': (
    "Kendall's tau (reference argsort variant)",
    'what the reference code computes (tau between argsort permutations); '
    "shown only to compare with the paper's numbers",
  ),
  'log_loss': ('Log-loss (bits)', "mean −log2 p(Stockfish's value bucket) per move"),
  'l2_win_prob': ('L2 win prob.', 'mean squared error of the predicted vs Stockfish win probability per move'),
  'entropy': ('Entropy (bits)', "mean entropy of the model's bucket distribution per move"),
  'consistency': ('Consistency', '(board value − best next-board value)², state-value policy'),
}


def metrics_section(ctx: Context) -> Section:
  """The evaluation's means and calibration; sets the 'Action accuracy' and "Kendall's tau-b" headlines."""
  section = Section('Test-set metrics', 'metrics')
  summary = artefacts.EvaluationMetrics.read_or_none(ctx.paths.eval_metrics)
  if summary is None:
    return ctx.not_run(section, f'No evaluation: `{ctx.paths.eval_metrics}` is missing.', 'evaluate')
  blocks = section.blocks
  blocks.append(
    Text(
      f'Policy `{summary.policy}` on **{format_count(summary.boards)} test boards** '
      f'(every legal move scored by Stockfish; {format_count(summary.dropped_boards)} '
      'boards dropped because their records were not exactly their legal moves).'
    )
  )
  rows = []
  for key, (name, meaning) in METRIC_MEANINGS.items():
    value = getattr(summary, key, None)
    if value is None:  # Not a metric of this policy.
      continue
    text = format_percent(value) if key == 'action_accuracy' else format_number(value, 4 if key == 'l2_win_prob' else 3)
    if key == 'kendall_tau':
      meaning += f' ({format_count(summary.kendall_tau_boards)} boards)'
    rows.append([name, text, meaning])
  blocks.append(Table(['metric', 'value', 'meaning'], rows, numeric=(1,)))
  if summary.action_accuracy is not None:
    ctx.headlines['Action accuracy'] = (
      format_percent(summary.action_accuracy),
      f'{format_count(summary.boards)} test boards',
    )
  if summary.kendall_tau is not None:
    ctx.headlines["Kendall's tau-b"] = (
      format_number(summary.kendall_tau),
      f'argsort variant {format_number(summary.kendall_tau_reference_argsort)}',
    )
  if not ctx.paths.eval_boards.exists():
    blocks.append(Callout('note', f'No calibration plot: `{ctx.paths.eval_boards}` is missing.'))
    return section
  if summary.policy == 'behavioral_cloning':
    blocks.append(
      Text('No calibration plot: a behavioral-cloning policy predicts move probabilities, not win probabilities.')
    )
    return section
  predicted, stockfish = figures.move_pairs(read_jsonl(ctx.paths.eval_boards))
  if not len(predicted):
    return section
  bins = figures.calibration_bins(predicted, stockfish, CALIBRATION_BINS)
  figures.plot_calibration(predicted, stockfish, bins, ctx.out_dir / CALIBRATION_PNG)
  blocks.append(
    Text(
      '**Calibration.** Is a predicted win probability of 70% worth 70% to Stockfish? Every '
      f'(board, move) pair ({format_count(len(predicted))}) is binned by the predicted win probability; '
      'points on the diagonal are calibrated, points above it mean the model underrates those moves. '
      f'Expected calibration error (count-weighted |gap|): **{format_number(figures.calibration_error(bins))}**.'
    )
  )
  blocks.append(Image(CALIBRATION_PNG, 'calibration: predicted vs Stockfish win probability'))
  blocks.append(
    Table(
      ['predicted win prob.', 'pairs', 'mean predicted', 'mean Stockfish'],
      [
        [
          f'{b.lower:.2f}–{b.upper:.2f}',
          format_count(b.count),
          format_number(b.mean_predicted),
          format_number(b.mean_stockfish),
        ]
        for b in bins
        if b.count
      ],
      numeric=(1, 2, 3),
      caption='Calibration bins (empty bins left out).',
    )
  )
  return section
