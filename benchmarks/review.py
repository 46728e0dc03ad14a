"""``searchless-review``'s throughput on 1 and 2 workers against the raw batched `analyse_many` in the same run.

    .venv/bin/python benchmarks/review.py                          # pretrained, the first 40 games
    .venv/bin/python benchmarks/review.py --games 200 --checkpoint pretrained --games_file PATH

Each worker gets a core of its own (``taskset``), as a review worker on Dataflow has its cores:

* raw: one process pinned to 1 core calls `Policy.analyse_many` on the chunks the job's model handler gets
  (each game's consecutive positions, `review_job.boards_per_call` a call), nothing else: positions/s;
* the job, 1 worker: ``searchless-review`` on the DirectRunner with one worker process, pinned to 1 core
  (its driver and Beam's runner share it), the job's own wall time (reading, parsing, reviewing, writing,
  the workers' start and model load included): games/s and positions/s;
* the job, 2 workers: the same with two worker processes on 2 cores.

Targets: 1 worker at least 0.8 of raw, 2 workers at least 1.8x one. It also prints what a Lichess month would
cost at the 1-worker rate (``--month_games``, positions as these games'), in CPU-hours. Compiled shapes are
shared through one JAX compilation cache (the raw run fills it first).
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
    games = pathlib.Path(work) / 'games.pgn'
    lines = pathlib.Path(args.games_file).read_text(encoding='utf-8').splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith('[Event ')] + [len(lines)]
    games.write_text(''.join(lines[: starts[min(args.games, len(starts) - 1)]]), encoding='utf-8')
    env = {**os.environ, 'JAX_COMPILATION_CACHE_DIR': os.path.join(work, 'jax-cache')}
    env.setdefault('JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS', '0')
    command = ['taskset', '-c', str(cpus[0]), sys.executable, __file__, '--raw', '--games_file', str(games)]
    done = subprocess.run(
      [*command, '--checkpoint', args.checkpoint], check=True, capture_output=True, text=True, env=env
    )
    base = json.loads(done.stdout.splitlines()[-1])
    one = job(str(games), args.checkpoint, 1, str(cpus[0]), os.path.join(work, 'one'), env)
    two = job(str(games), args.checkpoint, 2, f'{cpus[0]},{cpus[1]}', os.path.join(work, 'two'), env)
  print(f'{args.checkpoint}, {one["games"]} games, {one["positions"]} positions, {base["batch"]} positions a call')
  print('| run | cores | games/s | positions/s | seconds |')
  print('|---|---|---|---|---|')
  print(f'| raw `analyse_many` | 1 | | {base["positions_per_s"]:.0f} | {base["seconds"]:.1f} |')
  for name, r, cores in (('job, 1 worker', one, 1), ('job, 2 workers', two, 2)):
    print(f'| {name} | {cores} | {r["games_per_s"]:.2f} | {r["positions_per_s"]:.0f} | {r["seconds"]:.1f} |')
  print(f'1 worker / raw: {one["positions_per_s"] / base["positions_per_s"]:.2f} (target 0.8)')
  print(f'2 workers / 1 worker: {two["positions_per_s"] / one["positions_per_s"]:.2f} (target 1.8)')
  per_game = one['positions'] / one['games']
  hours = args.month_games * per_game / one['positions_per_s'] / 3600
  print(
    f'a Lichess month ({args.month_games:,} games, {per_game:.0f} positions each) at 1 worker/core: '
    f'{hours:,.0f} CPU-hours'
  )


if __name__ == '__main__':
  main()
