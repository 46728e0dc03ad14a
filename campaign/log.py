"""The strength campaign's records: WORKDIR/runs.jsonl (every step and its cost), curve.jsonl, curve.png, README.md.

`campaign.run` appends to them after every step; the ship step reads them.
"""

from collections.abc import Sequence
import io
import json
import pathlib
import resource
import time
from typing import Any

from searchless.plumbing import atomic

COSTED_STEPS = ('labels', 'train', 'evaluate', 'match', 'ship')  # The steps whose records carry a cost.


def children_cpu_seconds() -> float:
  """CPU seconds (user + system) of this process's finished children and theirs: a subprocess step's cost."""
  usage = resource.getrusage(resource.RUSAGE_CHILDREN)
  return usage.ru_utime + usage.ru_stime


def log_run(workdir: pathlib.Path, record: dict[str, Any]) -> None:
  """Appends `record` (with the date) to WORKDIR/runs.jsonl."""
  record = {'date': time.strftime('%Y-%m-%d %H:%M:%S %Z'), **record}
  with open(workdir / 'runs.jsonl', 'a') as f:
    f.write(json.dumps(record) + '\n')


def read_runs(workdir: pathlib.Path) -> list[dict[str, Any]]:
  """Every record `log_run` appended to WORKDIR/runs.jsonl, in order."""
  path = workdir / 'runs.jsonl'
  return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def read_curve(workdir: pathlib.Path) -> list[dict[str, Any]]:
  """Every evaluation the evaluate step appended to WORKDIR/curve.jsonl, in order."""
  path = workdir / 'curve.jsonl'
  return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def campaign_points(curve: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
  """The evaluations of the campaign's own model in `curve` (`read_curve`): its training runs and the models it
  adopted, in order; side models (evaluated by path, e.g. a transformer from a GPU run) are left out.

  >>> [r['checkpoint_step'] for r in campaign_points([{'checkpoint_step': 1}, {'checkpoint_step': 2, 'model': 'train'},
  ...     {'checkpoint_step': 7, 'model': '/gpu/run1/wide'}, {'checkpoint_step': 9, 'model': 'adopted/alone'}])]
  [1, 2, 9]
  """
  return [r for r in curve if r.get('model', 'train') == 'train' or str(r.get('model')).startswith('adopted/')]


def training_hours(point: dict[str, Any]) -> float:
  """A curve point's training so far, in wall-clock hours: on CPU cores, and on an accelerator (a device run's
  `train` record holds the device's wall-clock, so `train_wall_hours` already counts it)."""
  return float(point.get('train_wall_hours', 0))


def plot_curve(workdir: pathlib.Path) -> pathlib.Path | None:
  """Writes WORKDIR/curve.png from curve.jsonl, the campaign's points only (None when it has none).

  Left: dev puzzles solved (95% Wilson intervals) against training hours (CPU wall-clock plus accelerator);
  middle: held-out tau-b and action accuracy against the same; right: dev puzzles against label core-hours.
  """
  from matplotlib.figure import Figure  # No pyplot: no global backend or figure state.

  points = campaign_points(read_curve(workdir))
  if not points:
    return None
  hours = [training_hours(p) for p in points]
  solved = [100 * p['puzzles_solved'] / p['puzzles'] for p in points]
  errors = [
    [s - 100 * p['puzzles_wilson95'][0] for s, p in zip(solved, points)],
    [100 * p['puzzles_wilson95'][1] - s for s, p in zip(solved, points)],
  ]
  fig = Figure(figsize=(15, 4))
  left, middle, right = fig.subplots(1, 3)
  left.errorbar(hours, solved, yerr=errors, marker='o', capsize=3)
  device = [p.get('train_device_hours', 0) for p in points]
  for h, s, now, before in zip(hours, solved, device, [0, *device]):
    if now > before:  # Where accelerator hours were added: the steep part is not CPU time.
      left.annotate(
        f'+{now - before:.2f} h on an accelerator', (h, s), textcoords='offset points', xytext=(6, -14), fontsize=8
      )
  left.set(
    xlabel='training hours (CPU wall-clock + accelerator)',
    ylabel='dev puzzles solved (%)',
    title='dev puzzles (95% Wilson)',
  )
  middle.plot(hours, [p['kendall_tau'] for p in points], marker='o', label='tau-b')
  middle.plot(hours, [p['action_accuracy'] for p in points], marker='s', label='action accuracy')
  middle.set(xlabel='training hours (CPU wall-clock + accelerator)', title='held-out boards (deep labels)')
  middle.legend()
  right.plot([p.get('labels_core_hours', 0) for p in points], solved, marker='o')
  right.set(
    xlabel="label core-hours (the campaign's own)", ylabel='dev puzzles solved (%)', title='dev puzzles against labels'
  )
  for ax in (left, middle, right):
    ax.grid(alpha=0.3)
  fig.suptitle(f'the strength campaign: {workdir}')
  fig.tight_layout()
  out, image = workdir / 'curve.png', io.BytesIO()
  fig.savefig(image, format='png', dpi=100)
  atomic.write_bytes(out, image.getvalue(), durable=False)  # Readers and a second campaign process see a whole file.
  return out


def totals(runs: Sequence[dict[str, Any]]) -> dict[str, float]:
  """Core-hours and wall-clock hours of every step in `runs` (`read_runs`), and training's accelerator hours."""
  # Kept to the runs' own 4 decimals: a coarser total would let a short run (a few seconds) add nothing to the curve.
  out: dict[str, float] = {}
  for step in COSTED_STEPS:
    done = [r for r in runs if r.get('step') == step]
    out[f'{step}_core_hours'] = round(sum(r.get('core_hours', 0) for r in done), 4)
    out[f'{step}_wall_hours'] = round(sum(r.get('wall_seconds', 0) for r in done) / 3600, 4)
  out['train_device_hours'] = round(sum(r.get('device_hours', 0) for r in runs if r.get('step') == 'train'), 4)
  return out


def write_readme(workdir: pathlib.Path, shared: pathlib.Path, config_name: str) -> None:
  """WORKDIR/README.md: what each folder is, the resume command, the totals and the log of runs."""
  runs = read_runs(workdir)
  t = totals(runs)
  boards = workdir / 'boards' / 'train.json'
  distinct = json.loads(boards.read_text())['distinct_boards'] if boards.exists() else None
  lines = [
    '# The strength campaign',
    '',
    'Written by `python -m campaign` after every step; do not edit by hand.',
    '',
    "## Resume everything (in the background, from the repository's root)",
    '',
    '    make setup stockfish',
    f'    nohup setsid .venv/bin/python -m campaign --workdir {workdir} --shared {shared} --config {config_name} '
    f'--workers 1 > {workdir}/logs/campaign.log 2>&1 &',
    '',
    "The default steps make labels and pack the next lent-GPU call's boards (`device/data`); `--workers 1` "
    'leaves a core free. Every step continues where it stopped; a new machine starts again from `--shared` (games, '
    'the shared labels) and the shipped model. Training runs on a lent GPU (`benchmarks/gpu_playbook.py`, its '
    'model taken in with `--steps adopt,evaluate --model OUT/NAME`), not on these cores.',
    '',
    '## Folders',
    '',
    '- `games/`: the shared Lichess games as chunk PGN files (`SOURCE_NNN.pgn`; `SOURCE.json` says from where).',
    '- `labels/`: one `searchless-annotate` output per chunk (the shipped recipe); a folder without '
    '`manifest.json` is unfinished and is labelled again.',
    '- `boards/`: the distinct boards of every label folder (train and held-out test), one bag each, '
    'with the folders they came from (`train.json`, `test.json`).',
    "- `device/data/`: the train boards as columns within a device call's carry (`device/data.json`: how many): "
    'copy it to `.device/data` in the checkout for the GPU playbook.',
    '- `train/`: the training run (orbax checkpoints, metrics.jsonl), resumed by every train step. When a model '
    'trained elsewhere was adopted (`--steps adopt --model DIR`, e.g. on a lent GPU), the run before it is kept '
    'as `train_until_STEP/`, the model itself in `adopted/NAME/` (`adopted.json` names it), and the next train '
    'step starts from its parameters.',
    '- `eval/STEP/`: the evaluation folder (`searchless-strength measure`) of the checkpoint at STEP '
    "(`eval/NAME/`: of an adopted or side model); `curve.jsonl` one line each, with the model's name; "
    "`curve.png` the campaign's own points (`plot_curve`).",
    "- `logs/`: each label job's output, the campaign's own log.",
    '- `runs.jsonl`: every step that ran (date, what, wall-clock, core-hours).',
    '',
    '## Totals',
    '',
    f'- label folders done: {len(list((workdir / "labels").glob("*/manifest.json")))} campaign chunks, '
    f'plus the shared chunks; distinct train boards in the last merge: {distinct if distinct is not None else "-"}',
    f'- labels: {t["labels_core_hours"]} core-hours, {t["labels_wall_hours"]} h wall-clock',
    f'- training: {t["train_core_hours"]} core-hours, {t["train_wall_hours"]} h wall-clock'
    + (f', of which {t["train_device_hours"]} h on an accelerator' if t['train_device_hours'] else ''),
    f'- evaluation: {t["evaluate_core_hours"]} core-hours; matches against Stockfish: {t["match_core_hours"]} '
    'core-hours',
    '',
    '## Runs',
    '',
    '| date | step | what | wall s | core-hours |',
    '| --- | --- | --- | --- | --- |',
  ]
  for r in runs:
    what = ', '.join(f'{k}={v}' for k, v in r.items() if k not in ('date', 'step', 'wall_seconds', 'core_hours'))
    lines.append(f'| {r["date"]} | {r["step"]} | {what} | {r.get("wall_seconds", "")} | {r.get("core_hours", "")} |')
  # A temporary file of this process's own: a label job and a training job of one campaign rewrite it at once.
  atomic.write_text(workdir / 'README.md', '\n'.join(lines) + '\n', durable=False)
