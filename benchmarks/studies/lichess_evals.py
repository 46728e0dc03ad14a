"""Imported labels: how fast `searchless-import` reads, and what its state values teach against ours.

    python benchmarks/studies/lichess_evals.py --workdir ~/searchless-data/lichess_evals  # ~1 h on 2 cores, resumable

1. Speed: `searchless-import` on the whole 46k-game file (`../shared/data/games/
   lichess_games_js_magnus_46177.pgn.zst`: 10k games carry [%eval]) on the DirectRunner
   with 2 workers: boards read and written per second of wall-clock and per core-second,
   against annotation's boards per core-second at the campaign's recipe (MultiPV,
   20,000 nodes; `benchmarks/RESULTS.md`).
2. Learning: the same boards, two sets of state values. The evaluated games of the shared
   label chunks (chunk_000..005, made again from the shared file as `make_chunks.py` makes
   them) are imported with the chunks' own split (5% test, by game); their train boards that
   our labels also hold get two state_value datasets, Lichess's values and ours (the best
   move's value at 20,000 nodes). A state-value `tiny` model trains on each: the first (free)
   for --minutes, the second for as many steps (the same boards, the same compute whatever
   else the machine runs), then both are measured as the
   campaign measures: tau-b and action accuracy against our labels (the deep reference) on
   the chunks' held-out test boards, and the dev puzzles with Wilson intervals.

Ends with ``import: <X> boards/s`` and ``free/ours: tau-b <R>x, puzzles <P>x``.
"""

import argparse
import json
import os
import pathlib
import platform
import resource
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # The campaign: a tool of the checkout, beside the benchmarks.

from campaign import games as campaign_games  # noqa: E402
from campaign import boards as campaign_boards  # noqa: E402
from campaign import run as campaign  # noqa: E402
from searchless.core import bags  # noqa: E402
from searchless.core import records  # noqa: E402
from searchless.data import pgn  # noqa: E402
from searchless.evaluation import metrics  # noqa: E402

GAMES = 'data/games/lichess_games_js_magnus_46177.pgn.zst'
# A state-value model of the tiny transformer; the wall-clock ends training, never the step count.
TRAIN = [
  'policy=state_value',
  'train.num_steps=100000000',
  'train.ckpt_every=1000',
  'train.log_every=100',
  'train.eval_every=100000000',
]


def _children_cpu() -> float:
  usage = resource.getrusage(resource.RUSAGE_CHILDREN)
  return usage.ru_utime + usage.ru_stime


def _import(inputs: list[str], out: pathlib.Path, extra: list[str]) -> dict:
  """Runs searchless-import in a child process (its workers' CPU counted); returns the manifest and costs."""
  import subprocess
  import sys

  if (out / 'manifest.json').exists():
    manifest = json.loads((out / 'manifest.json').read_text())
    return {'manifest': manifest, **manifest.get('benchmark', {})}
  cpu, start = _children_cpu(), time.time()
  subprocess.run(
    [
      sys.executable,
      '-m',
      'searchless.pipelines.import_labels',
      *inputs,
      '--out',
      str(out),
      '--overwrite',
      '--direct_num_workers=2',
      *extra,
    ],
    check=True,
    stdout=subprocess.DEVNULL,
  )
  costs = {'wall_seconds': round(time.time() - start, 2), 'core_seconds': round(_children_cpu() - cpu, 2)}
  manifest = json.loads((out / 'manifest.json').read_text())
  manifest['benchmark'] = costs
  (out / 'manifest.json').write_text(json.dumps(manifest, indent=2, sort_keys=True) + '\n')
  return {'manifest': manifest, **costs}


def _same_boards(free_bag: pathlib.Path, ours: str, out: pathlib.Path) -> int:
  """Writes out/{free,ours}/state_value_data.bag: the boards both hold (ours' order), each side's value."""
  if (out / 'ours' / 'state_value_data.bag').exists():
    return len(bags.reader(str(out / 'ours' / 'state_value_data.bag')))
  free = {' '.join(r.fen.split(' ')[:4]): r for r in bags.read_records(str(free_bag), 'state_value')}
  pairs = []
  for board in bags.read_records(ours, records.BOARD_VALUE):
    match = free.pop(' '.join(board.fen.split(' ')[:4]), None)
    if match is not None:
      pairs.append((records.StateValue(board.fen, match.win_prob), records.StateValue(board.fen, board.state_value)))
  for name, column in (('free', 0), ('ours', 1)):
    (out / name).mkdir(parents=True, exist_ok=True)
    bags.write_records(str(out / name / 'state_value_data.bag'), 'state_value', [p[column] for p in pairs])
  return len(pairs)


def main(argv=None) -> None:
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('--workdir', required=True, help='imports, datasets, training runs and results.jsonl')
  p.add_argument('--shared', default=str(ROOT.parent / 'shared'), help='the shared data folder')
  p.add_argument('--minutes', type=float, default=25.0, help='training wall-clock of each model')
  p.add_argument('--heldout_boards', type=int, default=2000)
  p.add_argument(
    '--annotate_boards_per_core_hour',
    type=float,
    default=140_541,
    help="annotation's figure at the campaign's recipe (RESULTS: benchmarks/studies/annotate_cpu.py)",
  )
  args = p.parse_args(argv)
  work, shared = pathlib.Path(args.workdir).resolve(), pathlib.Path(args.shared).resolve()
  work.mkdir(parents=True, exist_ok=True)
  print(f'machine: {platform.machine()}, {len(os.sched_getaffinity(0))} cores', flush=True)

  whole = _import([str(shared / GAMES)], work / 'import_46k', [])
  m = whole['manifest']
  read = m['games']['read']
  boards = sum(s['boards'] for s in m['splits'].values())
  seen = sum(s['boards_seen'] for s in m['splits'].values())
  per_core_s = seen / whole['core_seconds']
  annotate_per_core_s = args.annotate_boards_per_core_hour / 3600
  print(
    f'import 46k games: {read} games ({m["games"]["with_evals"]} with evals), {seen} labelled boards read, '
    f'{boards} written in {whole["wall_seconds"]:.0f} s wall, {whole["core_seconds"]:.0f} core-s: '
    f'{seen / whole["wall_seconds"]:.0f} boards/s, {per_core_s:.0f} boards per core-second '
    f'(annotation: {annotate_per_core_s:.1f}): {per_core_s / annotate_per_core_s:.0f}x',
    flush=True,
  )

  chunks_dir = work / 'chunks'
  chunks_dir.mkdir(exist_ok=True)
  sources, games_per_chunk = campaign_games.read_sources()
  source = next(s for s in sources if s.path == GAMES)
  if not (chunks_dir / f'{source.name}_000.pgn').exists():
    texts = campaign_games.chunk_texts([g.text for g in pgn.iter_raw_games(str(shared / GAMES))], games_per_chunk)
    for i in range(source.shared_labels):
      (chunks_dir / f'{source.name}_{i:03d}.pgn').write_text(texts[i])
  inputs = [str(chunks_dir / f'{source.name}_{i:03d}.pgn') for i in range(source.shared_labels)]
  free = _import(inputs, work / 'import_chunks', ['--test_fraction', '0.05'])
  folders = campaign_boards.label_folders(shared)
  ours_train = campaign_boards.merge_boards(folders, work / 'ours_boards', 'train')
  heldout = campaign_boards.merge_boards(folders, work / 'ours_boards', 'test')
  count = _same_boards(work / 'import_chunks' / 'train' / 'state_value_data.bag', ours_train['bag'], work / 'same')
  print(
    f"same boards: {count} train boards hold both Lichess's and our state values "
    f'({free["manifest"]["splits"]["train"]["boards"]} imported from {len(inputs)} chunks)',
    flush=True,
  )

  results_path = work / 'results.jsonl'
  done = (
    {r['labels']: r for r in map(json.loads, results_path.read_text().splitlines())} if results_path.exists() else {}
  )
  puzzles = shared / 'data' / 'puzzles' / 'lichess_puzzles_dev.csv'
  for name in ('free', 'ours'):
    if name in done:
      continue
    train_dir = work / f'train_{name}'
    budget = TRAIN if name == 'free' else [*TRAIN, f'train.num_steps={done["free"]["steps"]}']
    seconds = args.minutes * 60 if name == 'free' else 10 * args.minutes * 60  # 'ours': the step count ends it.
    trained = campaign.train_model(
      'tiny', str(work / 'same' / name / 'state_value_data.bag'), train_dir, seconds, budget
    )
    result = campaign.evaluate_model(
      train_dir, heldout['bag'], puzzles, work / f'eval_{name}', num_boards=args.heldout_boards
    )
    done[name] = {'labels': name, 'boards': count, 'minutes': args.minutes, 'steps': trained['steps'], **result}
    with open(results_path, 'a') as f:
      f.write(json.dumps(done[name]) + '\n')
  for name in ('free', 'ours'):
    r = done[name]
    low, high = r['puzzles_wilson95']
    print(
      f'{name:4s}: {r["steps"]} steps, tau-b {r["kendall_tau"]:.4f}, action accuracy {r["action_accuracy"]:.4f}, '
      f'dev puzzles {r["puzzles_solved"]}/{r["puzzles"]} ({100 * low:.1f}-{100 * high:.1f}%)'
    )
  f_, o = done['free'], done['ours']
  apart = (
    metrics.wilson(f_['puzzles_solved'], f_['puzzles'])[1] < metrics.wilson(o['puzzles_solved'], o['puzzles'])[0]
    or metrics.wilson(o['puzzles_solved'], o['puzzles'])[1] < metrics.wilson(f_['puzzles_solved'], f_['puzzles'])[0]
  )
  print(
    f'free/ours: tau-b {f_["kendall_tau"] / o["kendall_tau"]:.2f}x, '
    f'puzzles {f_["puzzles_solved"] / max(o["puzzles_solved"], 1):.2f}x' + (' (intervals apart)' if apart else '')
  )


if __name__ == '__main__':
  main()
