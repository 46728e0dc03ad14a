"""Cheap annotation modes: throughput and fidelity against a deep reference.

    .venv/bin/python benchmarks/annotate_modes.py                 # ~10 min on 2 cores
    .venv/bin/python benchmarks/annotate_modes.py --boards 5 --reference nodes=20000   # smoke run

On the same real Lichess boards, every mode values every legal move; each is
compared with a deep reference (default: one search per move at 400k nodes):

* best-move agreement: the mode's best move is one of the reference's best moves;
* mean |delta win prob| over all (board, move) pairs;
* Kendall's tau-b between the mode's and the reference's move values, per board
  (on the values, ties handled; boards where either side is constant are left
  out), averaged over boards;
* throughput: action-values/s of one engine process (Threads=1), measured in
  this run, one mode at a time.

The paper's method (50 ms per move) is run twice, so its own noise is measured
the same way (run 2 against run 1). The target is a mode at least as faithful
to the reference as 50 ms per move, at >= 3x its throughput.
"""

import argparse
import json
import multiprocessing
import os
import pathlib
import platform
import sys
import time

import numpy as np
from scipy import stats

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import boards as boards_lib  # noqa: E402

from searchless.engines import annotator as engine_lib  # noqa: E402
from searchless.engines import launch  # noqa: E402

MODES = (  # (name, mode, limit); multipv limits are per board, per_move limits per move.
  ('per_move time=0.05 (paper)', 'per_move', 'time=0.05'),
  ('per_move time=0.05 (paper, run 2)', 'per_move', 'time=0.05'),
  ('per_move nodes=5000', 'per_move', 'nodes=5000'),
  ('per_move nodes=20000', 'per_move', 'nodes=20000'),
  ('per_move nodes=50000', 'per_move', 'nodes=50000'),
  ('multipv nodes=200000', 'multipv', 'nodes=200000'),
  ('multipv nodes=500000', 'multipv', 'nodes=500000'),
  ('multipv nodes=1000000', 'multipv', 'nodes=1000000'),
  ('multipv nodes=2000000', 'multipv', 'nodes=2000000'),
)


def annotate(engine_path: str, mode: str, limit: str, fens: list[str]) -> tuple[list[dict], float]:
  config = engine_lib.EngineConfig(
    path=engine_path, limit=launch.SearchLimit.parse(limit), mode=mode, state_value='best_move', deadline=120
  )
  with engine_lib.BoardAnnotator(config) as annotator:
    start = time.perf_counter()
    values = [dict(annotator.annotate(fen).action_values) for fen in fens]
    return values, time.perf_counter() - start


def _reference_part(args):
  return annotate(*args)[0]


def reference(engine_path: str, limit: str, fens: list[str], workers: int, cache: pathlib.Path) -> list[dict]:
  key = {'engine': engine_path, 'limit': limit, 'fens': fens}
  if cache.exists():
    stored = json.loads(cache.read_text())
    if stored['key'] == key:
      return stored['values']
  chunks = [fens[i::workers] for i in range(workers)]
  with multiprocessing.Pool(workers) as pool:
    parts = pool.map(_reference_part, [(engine_path, 'per_move', limit, chunk) for chunk in chunks])
  values = [None] * len(fens)
  for i, part in enumerate(parts):
    values[i::workers] = part
  cache.write_text(json.dumps({'key': key, 'values': values}))
  return values


def fidelity(values: list[dict], ref: list[dict]) -> dict:
  agree, deltas, taus = 0, [], []
  for got, want in zip(values, ref):
    best = max(got, key=got.get)
    agree += want[best] == max(want.values())
    moves = sorted(want)
    a, b = np.array([got[m] for m in moves]), np.array([want[m] for m in moves])
    deltas.extend(np.abs(a - b))
    if np.ptp(a) > 0 and np.ptp(b) > 0:
      taus.append(stats.kendalltau(a, b, variant='b').statistic)
  return {
    'best_move_agreement': agree / len(ref),
    'mean_abs_delta': float(np.mean(deltas)),
    'kendall_tau_b': float(np.mean(taus)),
    'tau_boards': len(taus),
  }


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('--games', type=pathlib.Path, default=boards_lib.LICHESS_999)
  p.add_argument('--boards', type=int, default=40)
  p.add_argument('--reference', default='nodes=400000', help='per-move limit of the deep reference')
  p.add_argument('--engine_path', default=launch.find_stockfish())
  p.add_argument('--cache', type=pathlib.Path, default=pathlib.Path('/tmp/searchless-modes-reference.json'))
  p.add_argument(
    '--only', nargs='*', help='run only the modes whose name contains one of these words (the paper always runs)'
  )
  args = p.parse_args(argv)

  fens = boards_lib.spread_boards(args.games, args.boards)
  start = time.perf_counter()
  ref = reference(args.engine_path, args.reference, fens, os.cpu_count() or 1, args.cache)
  moves = sum(len(v) for v in ref)
  print(
    f'machine: {platform.machine()}, {os.cpu_count()} cores | {len(fens)} boards, {moves} moves | '
    f'reference: per_move {args.reference} ({time.perf_counter() - start:.0f} s)'
  )
  print(f'{"mode":36s} {"AV/s":>8s} {"x paper":>8s} {"best-move":>10s} {"mean|dP|":>9s} {"tau-b":>7s}')
  rows, paper_runs = [], []
  for name, mode, limit in MODES:
    if args.only and 'paper' not in name and not any(word in name for word in args.only):
      continue
    values, seconds = annotate(args.engine_path, mode, limit, fens)
    rate = moves / seconds
    if 'paper' in name:
      paper_runs.append(values)
    paper_rate = rows[0]['av_per_s'] if rows else rate
    row = {'mode': name, 'av_per_s': rate, 'speedup': rate / paper_rate, **fidelity(values, ref)}
    rows.append(row)
    print(
      f'{name:36s} {rate:8.1f} {row["speedup"]:8.2f} {row["best_move_agreement"]:10.3f} '
      f'{row["mean_abs_delta"]:9.4f} {row["kendall_tau_b"]:7.3f}',
      flush=True,
    )
  noise = fidelity(paper_runs[1], paper_runs[0])
  print(
    f'paper noise (50 ms run 2 vs run 1): best-move agreement {noise["best_move_agreement"]:.3f}, '
    f'mean|dP| {noise["mean_abs_delta"]:.4f}, tau-b {noise["kendall_tau_b"]:.3f}'
  )
  paper = rows[0]
  good = [
    r
    for r in rows[2:]
    if r['best_move_agreement'] >= paper['best_move_agreement']
    and r['kendall_tau_b'] >= paper['kendall_tau_b']
    and r['mean_abs_delta'] <= paper['mean_abs_delta']
  ]
  if good:
    fastest = max(good, key=lambda r: r['speedup'])
    print(
      f'fastest mode at least as faithful as the paper on all three: {fastest["mode"]} at {fastest["speedup"]:.2f}x'
    )
  else:
    print('no cheaper mode is at least as faithful as the paper on all three measures')


if __name__ == '__main__':
  main()
