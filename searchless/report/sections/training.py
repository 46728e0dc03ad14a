"""The "Training" section: the model, the optimiser, how far training got and its curves.

Reads ``train/config.json`` (the resolved experiment config), ``train/metrics.jsonl``
(the training log) and ``train/summary.json`` (`artefacts.TrainingSummary`: the
parameter count, bucket count and whether the run is complete).

>>> records = [{'step': 10, 'examples_per_s': 100.0}, {'step': 20, 'examples_per_s': 200.0}]
>>> round(training_wall_seconds(records, batch_size=32), 3)
4.8
"""

from collections.abc import Sequence

import numpy as np

from searchless.core import artefacts
from searchless.report import figures
from searchless.report.context import Context, read_json, read_jsonl
from searchless.report.document import (
  Facts,
  Image,
  Section,
  Table,
  format_count,
  format_duration,
  format_number,
  format_params,
  format_percent,
)

TRAINING_PNG = 'training.png'


def training_wall_seconds(records: Sequence[dict], batch_size: int) -> float | None:
  """Training time estimated from the logged throughput (each log window's steps / its examples/s)."""
  total, previous = 0.0, 0
  for r in sorted((r for r in records if r.get('examples_per_s')), key=lambda r: r['step']):
    total += (r['step'] - previous) * batch_size / r['examples_per_s']
    previous = r['step']
  return total or None


def _epochs(examples: int, ctx: Context, policy: str) -> str:
  """', 0.50 epochs' of the annotated train split (action-value records), or ''."""
  if policy != 'action_value' or ctx.manifest is None:
    return ''
  total = ctx.manifest.splits.get('train', {}).get('action_values')
  return f', {examples / total:.2f} epochs' if total else ''


def training_section(ctx: Context) -> Section:
  """The training run of ``train/``; sets the 'Model' and 'Training' facts."""
  section = Section('Training', 'training')
  train_dir = ctx.paths.train
  config = read_json(train_dir / 'config.json')
  metrics_path = train_dir / 'metrics.jsonl'
  if config is None or not metrics_path.exists():
    missing = 'config.json' if config is None else 'metrics.jsonl'
    return ctx.not_run(section, f'No training run: `{train_dir / missing}` is missing.', 'train')
  summary = artefacts.TrainingSummary.read_or_none(ctx.paths.training_summary)
  records = read_jsonl(metrics_path)
  train_records = [r for r in records if 'loss' in r]
  eval_records = [r for r in records if 'eval_loss' in r]
  m, policy = config['model'], config.get('policy', '?')
  if summary is not None:
    steps, num_steps, complete = summary.step, summary.num_steps, summary.complete
    batch, buckets, params = summary.batch_size, summary.num_return_buckets, summary.num_params
  else:  # A run that has not finished once (or from before summary.json): what config and log say.
    steps, num_steps = max((r['step'] for r in records), default=0), config['train']['num_steps']
    complete = steps >= num_steps
    batch, buckets, params = config['data']['batch_size'], config['num_return_buckets'], None
  # The throughput log covers every step of every invocation (a resumed run: all its parts).
  wall = training_wall_seconds(train_records, batch)
  examples = steps * batch
  epochs = _epochs(examples, ctx, policy)
  window = train_records[1:] or train_records
  throughput = float(np.median([r['examples_per_s'] for r in window])) if train_records else None
  mfu = [r['mfu'] for r in window if r.get('mfu') is not None]
  blocks = section.blocks
  blocks.append(
    Facts(
      [
        (
          'Model',
          f'{policy} transformer: {m["num_layers"]} layers, d={m["embedding_dim"]}, '
          f'{m["num_heads"]} heads, SwiGLU ×{m["widening_factor"]}, {buckets} value buckets',
        ),
        ('Parameters', format_params(params)),
        (
          'Optimiser',
          f'Adam, learning rate {config["optim"]["learning_rate"]:g}, batch {batch}, '
          f'clip {config["optim"]["max_grad_norm"]:g}, EMA {config["optim"]["ema_decay"]:g}, '
          f'loss `{config["loss"]["kind"]}`',
        ),
        (
          'Steps',
          f'{format_count(steps)} of {format_count(num_steps)}'
          + ('' if complete else ' (not finished: rerun to resume)')
          + f' = {format_count(examples)} examples{epochs}',
        ),
        ('Wall time', f'≈ {format_duration(wall)} (from the logged throughput: steps and evaluations, not start-up)'),
        (
          'Throughput',
          (f'{throughput:,.0f} examples/s (median)' if throughput else 'n/a')
          + (f', MFU {format_percent(float(np.median(mfu)), 2)}' if mfu else ''),
        ),
        ('Data', f'`{config["data"].get("train", "")}`; eval: `{config["data"].get("eval", "") or "none"}`'),
      ]
    )
  )
  rows = []
  if train_records:
    last = train_records[-1]
    rows.append(['train loss (last log window)', format_number(last['loss']), f'step {last["step"]}'])
  if eval_records:
    last = eval_records[-1]
    rows.append(['eval loss', format_number(last['eval_loss']), f'step {last["step"]}'])
    if 'eval_action_accuracy' in last:
      best = max(eval_records, key=lambda r: r.get('eval_action_accuracy', -1))
      rows.append(
        [
          'eval action accuracy',
          format_percent(last['eval_action_accuracy']),
          f'step {last["step"]} (best {format_percent(best["eval_action_accuracy"])} at step {best["step"]}; '
          f'{last.get("eval_boards", "?")} boards)',
        ]
      )
  if rows:
    blocks.append(Table(['', 'value', 'when'], rows, numeric=(1,)))
  if records:
    figures.plot_training(records, ctx.out_dir / TRAINING_PNG, buckets)
    blocks.append(
      Image(
        TRAINING_PNG,
        'training curves',
        f'Losses in nats (ln {buckets} = {figures.uniform_loss(buckets):.2f} is a uniform guess over the '
        f'{buckets} value buckets). Evaluation uses the EMA parameters on the first `train.eval_records` '
        'test records.',
      )
    )
  ctx.facts['Model'] = (
    f'{policy} transformer, {m["num_layers"]} layers × d={m["embedding_dim"]}, {format_params(params)} parameters'
  )
  ctx.facts['Training'] = (
    f'{format_count(steps)} steps × batch {batch}'
    + ('' if complete else ' (unfinished)')
    + f' ({format_count(examples)} examples{epochs}), ≈ {format_duration(wall)}'
  )
  return section
