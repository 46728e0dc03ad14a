"""The model for the campaign's budget: learning curves at equal wall-clock on the same boards.

    .venv/bin/python benchmarks/studies/campaign_models.py --shared ../shared \\
        --workdir ~/searchless-data/models          # 3 models x 4 points x 15 min: ~3.5 h on 2 cores, resumable

Each model trains on the same boards (the distinct boards of the shared label chunks,
``../shared/data/labels/chunk_*``: 202,961 boards), in ``--points`` stretches of
``--minutes`` each, the models taking turns (so each stretch of every model sees the same
machine load); after every stretch its checkpoint is measured as the campaign measures it
(`campaign.run.evaluate_model`): held-out log-loss, action accuracy and
Kendall tau-b on the first ``--heldout_boards`` of the shared chunks' test boards, and the
dev puzzles with a 95% Wilson interval. One line per (model, point) goes to
WORKDIR/curves.jsonl; a rerun skips what is there and resumes a stretch a session cut for
the rest of its budget (the seconds its metrics logged up to its last checkpoint).

Models (``--models``, NAME=CONFIG[:KEY=VALUE,...]), by default:

* ``graph_tiny``: the AlphaGateau model the campaign trains now;
* ``graph_wide``: nodes 128 wide, 6 layers (the issue's "bigger graph");
* ``tiny_packed``: the board-packed transformer (the shipped model's architecture).

Ends with the table and, at the last point, each model's puzzles and tau-b as a ratio
to the best.
"""

import argparse
import json
import os
import pathlib
import platform
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # The campaign: a tool of the checkout, beside the benchmarks.

from campaign import model as campaign_model  # noqa: E402
from campaign import boards as campaign_boards  # noqa: E402
from campaign import run as campaign  # noqa: E402
from searchless.evaluation import metrics  # noqa: E402

MODELS = (
  'graph_tiny=graph_tiny',
  'graph_wide=graph_tiny:model.embedding_dim=128,model.num_layers=6',
  'tiny_packed=tiny_packed',
)
# Every model: the wall-clock ends each stretch, never the step count; a checkpoint every ~10 minutes.
COMMON = ['train.num_steps=100000000', 'train.ckpt_every=2000', 'train.log_every=200', 'train.eval_every=100000000']


def parse_model(spec: str) -> tuple[str, str, list[str]]:
  """NAME=CONFIG[:KEY=VALUE,...] -> (name, config, overrides).

  >>> parse_model('wide=graph_tiny:model.embedding_dim=128,model.num_layers=6')
  ('wide', 'graph_tiny', ['model.embedding_dim=128', 'model.num_layers=6'])
  """
  name, _, rest = spec.partition('=')
  config, _, overrides = rest.partition(':')
  if not name or not config:
    raise ValueError(f'bad model {spec!r}: expected NAME=CONFIG[:KEY=VALUE,...]')
  return name, config, [o for o in overrides.split(',') if o]


def logged(train_dir: pathlib.Path, after_step: int) -> tuple[int, float]:
  """(action-values, training seconds) logged after step `after_step` up to the last checkpoint.

  Each metrics line covers its window of steps: its action-values over its action-values per
  second is that window's time. A stretch a session cut keeps these on a rerun.
  """
  from searchless.training import plot

  if not (train_dir / 'metrics.jsonl').exists():
    return 0, 0.0
  saved = campaign_model.latest_step(train_dir)
  window = [
    r for r in plot.read_metrics(train_dir) if after_step < r.get('step', 0) <= saved and r.get('targets_per_s')
  ]
  return sum(r['targets'] for r in window), sum(r['targets'] / r['targets_per_s'] for r in window)


def table(rows: list[dict]) -> str:
  lines = [
    '| model | point | train min | steps | action-values/s | log-loss | action acc. | tau-b | dev puzzles (95% CI) |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ]
  for r in rows:
    low, high = r['puzzles_wilson95']
    lines.append(
      f'| {r["model"]} | {r["point"]} | {r["train_minutes"]:.0f} | {r["steps"]} | '
      f'{r.get("action_values_per_s", "-")} | {r.get("log_loss", float("nan")):.4f} | '
      f'{r.get("action_accuracy", float("nan")):.4f} | {r.get("kendall_tau", float("nan")):.4f} | '
      f'{r["puzzles_solved"]}/{r["puzzles"]} ({100 * low:.1f}-{100 * high:.1f}%) |'
    )
  return '\n'.join(lines)


def main(argv=None) -> None:
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('--workdir', required=True, help='boards, one training folder per model, curves.jsonl')
  p.add_argument('--shared', default=str(ROOT.parent / 'shared'), help='the shared data folder')
  p.add_argument('--models', nargs='+', default=list(MODELS), help='NAME=CONFIG[:KEY=VALUE,...] each')
  p.add_argument('--points', type=int, default=4, help='curve points per model')
  p.add_argument('--minutes', type=float, default=15.0, help='training minutes between points')
  p.add_argument('--heldout_boards', type=int, default=2000)
  p.add_argument('--puzzles', default=None, help='puzzle CSV (default: the shared dev puzzles)')
  args = p.parse_args(argv)
  work, shared = pathlib.Path(args.workdir).resolve(), pathlib.Path(args.shared).resolve()
  puzzles = pathlib.Path(args.puzzles) if args.puzzles else shared / 'data' / 'puzzles' / 'lichess_puzzles_dev.csv'
  models = [parse_model(m) for m in args.models]
  folders = campaign_boards.label_folders(shared)
  train_boards = campaign_boards.merge_boards(folders, work / 'boards', 'train')
  heldout = campaign_boards.merge_boards(folders, work / 'boards', 'test')
  print(
    f'machine: {platform.machine()}, {len(os.sched_getaffinity(0))} cores | {train_boards["distinct_boards"]:,} '
    f'distinct train boards | {args.points} points x {args.minutes:g} min per model',
    flush=True,
  )
  path = work / 'curves.jsonl'
  done = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
  for point in range(1, args.points + 1):
    for name, config, overrides in models:
      if any(r['model'] == name and r['point'] == point for r in done):
        continue
      train_dir = work / name
      start = next((r['steps'] for r in done if r['model'] == name and r['point'] == point - 1), 0)
      spent = logged(train_dir, start)[1]  # A stretch a session cut: only the rest of its budget.
      seconds = max(args.minutes * 60 - spent, 0.0)
      trained = (
        campaign.train_model(config, train_boards['bag'], train_dir, seconds, [*COMMON, *overrides])
        if seconds > 0
        else {'steps': campaign_model.latest_step(train_dir), 'core_hours': 0.0}
      )
      result = campaign.evaluate_model(
        train_dir, heldout['bag'], puzzles, work / 'eval' / f'{name}_{point}', num_boards=args.heldout_boards
      )
      values, logged_s = logged(train_dir, 0)
      row = {
        'model': name,
        'config': config,
        'overrides': overrides,
        'point': point,
        'train_minutes': point * args.minutes,
        'steps': trained['steps'],
        'action_values_per_s': round(values / max(logged_s, 1e-9)),
        'train_core_hours': trained['core_hours'],
        **{k: v for k, v in result.items() if k != 'step'},
      }
      with open(path, 'a') as f:
        f.write(json.dumps(row) + '\n')
      done.append(row)
      print(table([row]).splitlines()[-1], flush=True)
  print(table(sorted(done, key=lambda r: (r['model'], r['point']))))
  last = [r for r in done if r['point'] == args.points]
  if last:
    best = max(last, key=lambda r: r['puzzles_solved'])
    for r in last:
      separated = (
        metrics.wilson(r['puzzles_solved'], r['puzzles'])[1]
        < metrics.wilson(best['puzzles_solved'], best['puzzles'])[0]
      )
      print(
        f'{r["model"]}/{best["model"]}: puzzles {r["puzzles_solved"] / max(best["puzzles_solved"], 1):.2f}x, '
        f'tau-b {r.get("kendall_tau", 0) / best["kendall_tau"]:.2f}x' + (' (intervals apart)' if separated else '')
      )


if __name__ == '__main__':
  main()
