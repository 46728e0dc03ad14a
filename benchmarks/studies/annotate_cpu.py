"""Where an annotation job's CPU goes: the engines' share, and boards per core-hour, before and after.

    .venv/bin/python benchmarks/studies/annotate_cpu.py                           # 100 games, ~12 min on 2 cores
    .venv/bin/python benchmarks/studies/annotate_cpu.py --games 5 --before HEAD~3  # smoke run against another revision

Runs the campaign's label recipe (`searchless-annotate --mode multipv --limit
nodes=20000 --state_value best_move --records board`, 2 workers) twice on the same
real Lichess games: once with the code of ``--before`` (checked out into a
temporary git worktree, put first on PYTHONPATH) and once with this checkout.
Every process of each job (the driver, the Beam workers, the Stockfish
processes) is sampled with psutil while it runs; the engines' share is their
CPU over the whole job's CPU (target >= 0.85). The two jobs' record files are
compared byte for byte: the change must not change a label.

``--before`` defaults to c517391, the last commit whose MultiPV searches went
through python-chess' ``analyse`` (every PV of every ``info`` line played out
on a board).
"""

import argparse
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

import psutil

ROOT = pathlib.Path(__file__).resolve().parents[2]
GAMES = ROOT.parent / 'shared' / 'data' / 'games' / 'lichess_games_Bfx-de-Blr_3970.pgn'
RECIPE = [
  '--mode',
  'multipv',
  '--limit',
  'nodes=20000',
  '--state_value',
  'best_move',
  '--records',
  'board',
  '--test_fraction',
  '0.05',
  '--no_progress',
]


def first_games(path: pathlib.Path, n: int) -> str:
  """The text of the first `n` games of `path`."""
  games = path.read_text().split('\n[Event ')
  return '\n[Event '.join(games[:n]) + '\n'


def run_job(pythonpath: str | None, pgn: pathlib.Path, out: pathlib.Path, workers: int) -> dict:
  """Runs one annotation job, sampling its processes' CPU; returns CPU seconds by kind and wall seconds."""
  env = dict(os.environ)
  if pythonpath:
    env['PYTHONPATH'] = pythonpath
  command = [
    sys.executable,
    '-m',
    'searchless.pipelines.annotate',
    '--input',
    str(pgn),
    '--out',
    str(out),
    *RECIPE,
    f'--direct_num_workers={workers}',
  ]
  start = time.perf_counter()
  # cwd: out's parent, not the checkout, which `-m` would put first on sys.path.
  job = psutil.Popen(command, env=env, cwd=out.parent, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
  cpu: dict[int, tuple[str, float]] = {}  # pid -> (kind, last seen user + system seconds)

  def sample() -> None:
    try:
      processes = [job, *job.children(recursive=True)]
    except psutil.NoSuchProcess:
      return
    for p in processes:
      try:
        times = p.cpu_times()
        kind = 'engine' if 'stockfish' in p.name() else 'driver' if p.pid == job.pid else 'workers'
      except psutil.NoSuchProcess:
        continue
      cpu[p.pid] = (kind, times.user + times.system)

  while job.poll() is None:
    sample()
    time.sleep(0.2)
  wall = time.perf_counter() - start
  if job.returncode:
    raise SystemExit(f'annotation failed ({job.returncode}): {job.stderr.read().decode()[-2000:]}')
  by_kind = {'engine': 0.0, 'driver': 0.0, 'workers': 0.0}
  for kind, seconds in cpu.values():
    by_kind[kind] += seconds
  return {**by_kind, 'python': by_kind['driver'] + by_kind['workers'], 'wall': wall}


def record_files(out: pathlib.Path) -> dict[str, bytes]:
  return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob('*.bag*'))}


def boards(out: pathlib.Path) -> int:
  import json

  manifest = json.loads((out / 'manifest.json').read_text())
  return sum(s['boards'] for s in manifest['splits'].values())


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument(
    '--games', type=int, default=100, help='first N games of the 3,970-game Lichess file (fewer: start-up dominates)'
  )
  p.add_argument('--before', default='c517391', help='the revision to compare with (default: before the fast path)')
  p.add_argument('--workers', type=int, default=2)
  args = p.parse_args()
  print(
    f'machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores | {args.games} games of '
    f'{GAMES.name} | {args.workers} workers | recipe: {" ".join(RECIPE[:8])}',
    flush=True,
  )
  results = {}
  with tempfile.TemporaryDirectory() as tmp:
    tmp_path = pathlib.Path(tmp)
    pgn = tmp_path / 'games.pgn'
    pgn.write_text(first_games(GAMES, args.games))
    worktree = tmp_path / 'before'
    subprocess.run(
      ['git', '-C', str(ROOT), 'worktree', 'add', '--detach', str(worktree), args.before],
      check=True,
      capture_output=True,
    )
    try:
      for name, pythonpath in (('before', str(worktree)), ('after', None)):
        out = tmp_path / name
        job = run_job(pythonpath, pgn, out, args.workers)
        job.update(boards=boards(out), files=record_files(out))
        total = job['engine'] + job['python']
        job['share'] = job['engine'] / total
        job['per_core_hour'] = job['boards'] / (total / 3600)
        job['per_wall_hour'] = job['boards'] / (job['wall'] / 3600)
        print(
          f'{name:6s} ({args.before if name == "before" else "this checkout"}): {job["boards"]} boards in '
          f'{job["wall"]:.0f} s | engine CPU {job["engine"]:.0f} s, rest {job["python"]:.0f} s (driver '
          f'{job["driver"]:.0f} s, Beam workers {job["workers"]:.0f} s), engine share '
          f'{job["share"]:.3f} | {job["per_core_hour"]:,.0f} boards per job core-hour, '
          f'{job["per_wall_hour"]:,.0f} per wall-hour',
          flush=True,
        )
        results[name] = job
    finally:
      subprocess.run(
        ['git', '-C', str(ROOT), 'worktree', 'remove', '--force', str(worktree)], check=False, capture_output=True
      )
  before, after = results['before'], results['after']
  same = before['files'] == after['files']
  print(
    f'after/before: boards per job core-hour {after["per_core_hour"] / before["per_core_hour"]:.2f}x, '
    f'per wall-hour {after["per_wall_hour"] / before["per_wall_hour"]:.2f}x; engine share '
    f'{before["share"]:.3f} -> {after["share"]:.3f} (target >= 0.85)'
  )
  print(
    f'record files byte for byte identical: {same} ({len(after["files"])} files, '
    f'{sum(len(b) for b in after["files"].values()):,} bytes)'
  )
  if not same:
    raise SystemExit('the labels changed')


if __name__ == '__main__':
  main()
