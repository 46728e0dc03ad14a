"""``searchless-review``'s throughput on 1 and 2 workers against the raw batched `analyse_many` in the same run.

    .venv/bin/python benchmarks/review.py                          # pretrained, the first 40 games
    .venv/bin/python benchmarks/review.py --games 300 --checkpoint pretrained --games_file PATH

Each worker gets a core of its own (``taskset``), as a review worker on Dataflow has its cores:

* raw: one process pinned to 1 core calls `Policy.analyse_many` on the chunks the job's model handler gets
  (each game's consecutive positions, `review_job.boards_per_call` a call), nothing else: positions/s;
* the job, 1 worker: ``searchless-review`` on the DirectRunner with one worker process, pinned to 1 core
  (its driver and Beam's runner share it), the job's own wall time (reading, parsing, reviewing, writing,
  the workers' start and model load included): games/s and positions/s;
* the job, 2 workers: the same with two worker processes on 2 cores.

Each job runs twice, on the first quarter of the games and on all of them. A job's wall time is a fixed cost
(the workers' start, imports and model load, each batch shape traced on first use: seconds a worker, the same
for 300 games as for a month's) and a time a position; the two runs give both: the throughput is the positions
the second run reviewed past the first's over the seconds it took past the first's (the marginal rate, what a
long job gets), and the fixed cost is what the first run took beyond its positions at that rate. The end to end
rates (the whole run's wall time) are printed beside them.

Targets: 1 worker at least 0.8 of raw, 2 workers at least 1.8x one (marginal rates). It also prints what a
Lichess month would cost at the 1-worker rate (``--month_games``, positions as these games'), in CPU-hours.
Compiled shapes are shared through one JAX compilation cache (the raw run fills it first).
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
LICHESS_MONTH_GAMES = 100_000_000  # About a month of standard rated games on database.lichess.org (2024).


def raw(games_file: str, checkpoint: str) -> dict:
  """Positions/s of `analyse_many` on the job's chunks of the games in `games_file`."""
  import chess
  import chess.pgn

  from searchless.evaluation import review_job
  from searchless.play import player

  batch = review_job.default_batch(checkpoint, None)
  chunks = []
  with open(games_file, encoding='utf-8') as f:
    while (game := chess.pgn.read_game(f)) is not None:
      board = game.board()
      positions = [board.copy(stack=False)]
      for move in game.mainline_moves():
        board.push(move)
        positions.append(board.copy(stack=False))
      chunks += [positions[i : i + batch] for i in range(0, len(positions), batch)]
  policy = player.load_policy(checkpoint)  # As the job's handler: no timed warm-up, shapes at first use.
  for chunk in chunks:  # Once untimed: every shape compiled (and in the cache the job reads).
    policy.analyse_many([b for b in chunk if any(b.legal_moves)])
  start = time.perf_counter()
  for chunk in chunks:
    policy.analyse_many([b for b in chunk if any(b.legal_moves)])
  seconds = time.perf_counter() - start
  positions = sum(len(c) for c in chunks)
  return {'positions': positions, 'seconds': seconds, 'positions_per_s': positions / seconds, 'batch': batch}


def job(games_file: str, checkpoint: str, workers: int, cpus: str, out: str, env: dict) -> dict:
  command = ['taskset', '-c', cpus, sys.executable, '-m', 'searchless.pipelines.review', games_file]
  command += ['--checkpoint', checkpoint, '--out', out, '--no_progress', '--direct_num_workers', str(workers)]
  subprocess.run(command, check=True, capture_output=True, text=True, env=env)
  summary = json.loads((pathlib.Path(out) / 'summary.json').read_text())
  seconds = summary['wall_seconds']
  return {
    'games': summary['games']['reviewed'],
    'positions': summary['positions'],
    'seconds': seconds,
    'games_per_s': summary['games']['reviewed'] / seconds,
    'positions_per_s': summary['positions'] / seconds,
  }


def rates(small: dict, large: dict) -> dict:
  """The marginal rate (positions/s and games/s past the small run's) and the fixed cost (s) of two runs."""
  seconds = large['seconds'] - small['seconds']
  per_s = (large['positions'] - small['positions']) / seconds
  return {
    'positions_per_s': per_s,
    'games_per_s': (large['games'] - small['games']) / seconds,
    'fixed': small['seconds'] - small['positions'] / per_s,
  }


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--checkpoint', default='pretrained')
  parser.add_argument('--games', type=int, default=40, help='The first N games of --games_file.')
  parser.add_argument(
    '--games_file',
    default=str(HERE.parent.parent / 'shared' / 'data' / 'games' / 'lichess_db_standard_rated_2021-10_first999.pgn'),
    help='Lichess games (PGN).',
  )
  parser.add_argument('--month_games', type=int, default=LICHESS_MONTH_GAMES)
  parser.add_argument('--raw', action='store_true', help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.raw:
    print(json.dumps(raw(args.games_file, args.checkpoint)))
    return
  if not os.path.exists(args.games_file):
    parser.error(f'--games_file {args.games_file}: not found (the shared Lichess games beside the checkout)')
  cpus = sorted(os.sched_getaffinity(0))
  if len(cpus) < 2:
    parser.error('this benchmark pins 1 and 2 workers to a core each: it needs 2 cores')
  with tempfile.TemporaryDirectory(prefix='searchless-review-bench-') as work:
    lines = pathlib.Path(args.games_file).read_text(encoding='utf-8').splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith('[Event ')] + [len(lines)]
    files = {}
    for size in (max(1, args.games // 4), args.games):
      files[size] = pathlib.Path(work) / f'games-{size}.pgn'
      files[size].write_text(''.join(lines[: starts[min(size, len(starts) - 1)]]), encoding='utf-8')
    small, games = sorted(files)
    env = {**os.environ, 'JAX_COMPILATION_CACHE_DIR': os.path.join(work, 'jax-cache')}
    env.setdefault('JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS', '0')
    command = ['taskset', '-c', str(cpus[0]), sys.executable, __file__, '--raw', '--games_file', str(files[games])]
    done = subprocess.run(
      [*command, '--checkpoint', args.checkpoint], check=True, capture_output=True, text=True, env=env
    )
    base = json.loads(done.stdout.splitlines()[-1])
    runs = {}
    for workers, cores in ((1, str(cpus[0])), (2, f'{cpus[0]},{cpus[1]}')):
      for size in (small, games):
        out = os.path.join(work, f'{workers}-{size}')
        runs[workers, size] = job(str(files[size]), args.checkpoint, workers, cores, out, env)
  one, two = rates(runs[1, small], runs[1, games]), rates(runs[2, small], runs[2, games])
  whole = runs[1, games]
  print(f'{args.checkpoint}, {whole["games"]} games, {whole["positions"]} positions, {base["batch"]} positions a call')
  print(f'(and {runs[1, small]["games"]} games, {runs[1, small]["positions"]} positions: the first run of each job)')
  print('| run | cores | games/s | positions/s | fixed s | end to end positions/s (s) |')
  print('|---|---|---|---|---|---|')
  print(f'| raw `analyse_many` | 1 | | {base["positions_per_s"]:.0f} | | ({base["seconds"]:.1f}) |')
  for name, rate, workers in (('job, 1 worker', one, 1), ('job, 2 workers', two, 2)):
    r = runs[workers, games]
    print(
      f'| {name} | {workers} | {rate["games_per_s"]:.2f} | {rate["positions_per_s"]:.0f} | {rate["fixed"]:.1f} |'
      f' {r["positions_per_s"]:.0f} ({r["seconds"]:.1f}) |'
    )
  print(
    f'1 worker / raw: {one["positions_per_s"] / base["positions_per_s"]:.2f} (target 0.8; end to end:'
    f' {runs[1, games]["positions_per_s"] / base["positions_per_s"]:.2f})'
  )
  print(
    f'2 workers / 1 worker: {two["positions_per_s"] / one["positions_per_s"]:.2f} (target 1.8; end to end:'
    f' {runs[2, games]["positions_per_s"] / runs[1, games]["positions_per_s"]:.2f})'
  )
  per_game = whole['positions'] / whole['games']
  hours = args.month_games * per_game / one['positions_per_s'] / 3600
  print(
    f'a Lichess month ({args.month_games:,} games, {per_game:.0f} positions each) at 1 worker/core: '
    f'{hours:,.0f} CPU-hours (and {one["fixed"]:.0f} s a worker)'
  )


if __name__ == '__main__':
  main()
