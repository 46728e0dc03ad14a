"""Pipeline overhead: action-values/s through the whole Beam pipeline vs a minimal UCI loop.

    .venv/bin/python benchmarks/annotate_overhead.py            # the paper limit, ~10 min
    .venv/bin/python benchmarks/annotate_overhead.py --boards 20 --movetime_ms 10   # smoke run

Both sides do the same work on the same boards with the same engine binary and
limit: for each board, one `go movetime T searchmoves <move>` per legal move and
one unrestricted `go movetime T` (the state value). The minimal loop talks UCI
over raw pipes with no library; the pipeline is `searchless.pipelines.annotate.run` on the
DirectRunner (games read, parsed, de-duplicated, annotated, written as bags).

Prints per-worker action-values/s of each and their ratio (target >= 0.98), both
end to end (wall time of the whole job, Beam start-up included) and inside the
annotation stage; then the scaling from 1 to N workers (target >= 0.95 N).
"""

import argparse
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

import chess

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import boards as boards_lib  # noqa: E402

from searchless.engines import launch  # noqa: E402
from searchless.pipelines import annotate as driver  # noqa: E402


def minimal_uci_loop(engine_path: str, fens: list[str], movetime_ms: int) -> tuple[int, int, float]:
  """Returns (action-values, searches, seconds) of a bare UCI loop over `fens`."""
  proc = subprocess.Popen([engine_path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)

  def send(line):
    proc.stdin.write(line + '\n')

  def wait_for(prefix):
    while True:
      line = proc.stdout.readline()
      if not line:
        raise RuntimeError('engine died')
      if line.startswith(prefix):
        return line

  send('uci')
  wait_for('uciok')
  send('setoption name Threads value 1')
  send('setoption name Hash value 16')
  send('isready')
  wait_for('readyok')
  action_values = searches = 0
  start = time.perf_counter()
  for fen in fens:
    moves = [m.uci() for m in chess.Board(fen).legal_moves]
    for move in moves:
      send(f'position fen {fen}')
      send(f'go movetime {movetime_ms} searchmoves {move}')
      wait_for('bestmove')
      action_values += 1
    if moves:
      send(f'position fen {fen}')
      send(f'go movetime {movetime_ms}')
      wait_for('bestmove')
      searches += 1
  seconds = time.perf_counter() - start
  send('quit')
  proc.wait()
  return action_values, searches + action_values, seconds


def pipeline(engine_path: str, games: pathlib.Path, out: pathlib.Path, movetime_ms: int, workers: int) -> dict:
  start = time.perf_counter()
  manifest = driver.run(
    [
      '--input',
      str(games),
      '--out',
      str(out),
      '--limit',
      f'time={movetime_ms / 1000}',
      '--test_fraction',
      '0',
      '--engine_path',
      engine_path,
      '--direct_num_workers',
      str(workers),
      '--no_progress',
    ]
  )
  wall = time.perf_counter() - start
  av = manifest.splits['train']['action_values']
  stage = manifest.timings['ms_per_board']
  return {'action_values': av, 'wall': wall, 'stage_seconds': stage['mean'] * stage['count'] / 1000 / workers}


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('--games', type=pathlib.Path, default=boards_lib.LICHESS_999)
  p.add_argument('--boards', type=int, default=150, help='unique boards (first games of --games)')
  p.add_argument('--movetime_ms', type=int, default=50, help='the paper: 50')
  p.add_argument('--workers', type=int, default=os.cpu_count())
  p.add_argument('--engine_path', default=launch.find_stockfish())
  args = p.parse_args(argv)

  text, fens = boards_lib.first_games(args.games, args.boards)
  tmp = pathlib.Path(tempfile.mkdtemp(prefix='overhead-'))
  games = tmp / 'games.pgn'
  games.write_text(text)
  version = subprocess.run([args.engine_path], input='uci\nquit\n', capture_output=True, text=True).stdout.splitlines()[
    0
  ]
  print(
    f'machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores | engine: {version} | '
    f'{len(fens)} boards | movetime {args.movetime_ms} ms'
  )

  av, searches, seconds = minimal_uci_loop(args.engine_path, fens, args.movetime_ms)
  direct = av / seconds
  print(
    f'minimal UCI loop:        {av} action-values ({searches} searches) in {seconds:.1f} s '
    f'= {direct:.2f} action-values/s'
  )

  one = pipeline(args.engine_path, games, tmp / 'out1', args.movetime_ms, 1)
  assert one['action_values'] == av, (one['action_values'], av)
  e2e, stage = one['action_values'] / one['wall'], one['action_values'] / one['stage_seconds']
  print(
    f'pipeline, 1 worker:      {one["action_values"]} action-values in {one["wall"]:.1f} s = {e2e:.2f}/s end to end '
    f'(ratio {e2e / direct:.3f}), {stage:.2f}/s in the annotation stage (ratio {stage / direct:.3f})'
  )

  if args.workers > 1:
    many = pipeline(args.engine_path, games, tmp / 'outN', args.movetime_ms, args.workers)
    e2e_n = many['action_values'] / many['wall']
    stage_n = many['action_values'] / many['stage_seconds']
    print(
      f'pipeline, {args.workers} workers:     {many["action_values"]} action-values in {many["wall"]:.1f} s '
      f'= {e2e_n:.2f}/s end to end = {e2e_n / e2e:.2f}x one worker (target >= {0.95 * args.workers:.2f}); '
      f'in the annotation stage {stage_n / stage:.2f}x'
    )


if __name__ == '__main__':
  main()
