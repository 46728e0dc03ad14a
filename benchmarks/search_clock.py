"""Whether each search of `searchless-uci` keeps its `go` limits: the worst overrun per search and limit.

    .venv/bin/python benchmarks/search_clock.py                        # the shipped model, 5 goes per cell
    .venv/bin/python benchmarks/search_clock.py --checkpoint pretrained-transformer --repeats 10

For each search (``Search`` none: the policy; alphabeta; mcts) one engine
process is started and made ready (``isready``); then each limit is sent
`--repeats` times on positions of a short game (tree reuse included). A go's
overrun is the time from sending ``go`` to reading ``bestmove`` less its limit:
``movetime``, or the share of the clock the engine gives itself
(`searchless.play.uci.search.budget` with no Move Overhead); ``nodes 1 depth 1``
(one simulation, one ply), ``depth 1`` (alpha-beta: one ply; MCTS: one batch of
the root's moves) and ``nodes 1`` (MCTS: one simulation; alpha-beta: the root)
have no time limit: their whole time is the overrun. The README's
promise is an overrun of at most Move Overhead (10 ms) + 30 ms. Prints a
table of the worst overrun (ms) per search and limit, and the load average.
"""

import argparse
import os
import subprocess
import sys
import time

import chess

from searchless.play.uci import protocol
from searchless.play.uci import search as search_lib

MOVE_OVERHEAD_MS = 10
ALLOWED_MS = MOVE_OVERHEAD_MS + 30
LIMITS = (
  'movetime 50',
  'movetime 200',
  'movetime 1000',
  'wtime 100 btime 100',
  'wtime 1000 btime 1000 winc 100 binc 100',
  'wtime 3000 btime 3000 nodes 100000 depth 64',
  'nodes 1 depth 1',
  'depth 1',
  'nodes 1',
)
GAME = 'e2e4 e7e5 g1f3 b8c6 f1b5 a7a6 b5a4 g8f6 e1g1 f8e7 f1e1 b7b5 a4b3 d7d6'.split()


def limit_seconds(board: chess.Board, limit: str) -> float:
  """The time `limit` gives the side to move (0 without one: nodes or depth alone)."""
  request, _ = protocol.parse_go(limit.split())
  seconds = search_lib.budget(board, request, kind='mcts', nodes=1, depth=1, overhead_ms=0)['seconds']
  return float(seconds or 0.0)


def worst_overruns(checkpoint: str, search: str, repeats: int) -> dict[str, float]:
  """{limit: the worst overrun in ms} of one engine process."""
  proc = subprocess.Popen(
    [sys.executable, '-m', 'searchless.commands.uci', '--checkpoint', checkpoint, '--search', search],
    stdin=subprocess.PIPE,
    stdout=subprocess.PIPE,
    stderr=subprocess.DEVNULL,
    text=True,
    bufsize=1,
  )
  assert proc.stdin is not None and proc.stdout is not None

  def send(line: str) -> None:
    proc.stdin.write(line + '\n')
    proc.stdin.flush()

  def until(prefix: str) -> None:
    for line in proc.stdout:
      if line.startswith(prefix):
        return
    raise RuntimeError(f'the engine ended before {prefix!r}')

  send('uci')
  until('uciok')
  send(f'setoption name Move Overhead value {MOVE_OVERHEAD_MS}')
  send('isready')
  until('readyok')
  worst = {}
  for limit in LIMITS:
    overruns = []
    for i in range(repeats):
      moves = GAME[: i % len(GAME)]
      board = chess.Board()
      for move in moves:
        board.push_uci(move)
      send('position startpos' + (' moves ' + ' '.join(moves) if moves else ''))
      start = time.perf_counter()
      send(f'go {limit}')
      until('bestmove')
      overruns.append((time.perf_counter() - start - limit_seconds(board, limit)) * 1000)
    worst[limit] = max(overruns)
  send('quit')
  proc.wait(timeout=60)
  return worst


def main(argv: list[str] | None = None) -> None:
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('--checkpoint', default='pretrained')
  p.add_argument('--repeats', type=int, default=5, help='goes per search and limit (the worst is printed)')
  args = p.parse_args(argv)
  print('| search | ' + ' | '.join(f'go {limit}' for limit in LIMITS) + ' |')
  print('| --- |' + ' --- |' * len(LIMITS))
  failed = []
  for search in ('none', 'alphabeta', 'mcts'):
    worst = worst_overruns(args.checkpoint, search, args.repeats)
    print(
      f'| {"policy" if search == "none" else search} | ' + ' | '.join(f'{worst[limit]:.0f}' for limit in LIMITS) + ' |',
      flush=True,
    )
    failed += [f'{search} go {limit}: {worst[limit]:.0f} ms' for limit in LIMITS if worst[limit] > ALLOWED_MS]
  print(
    f'\nWorst overrun in ms beyond the limit (nodes, depth: the time taken), {args.repeats} goes each, '
    f'{args.checkpoint}; allowed {ALLOWED_MS} ms (Move Overhead {MOVE_OVERHEAD_MS} + 30): '
    + ('all kept.' if not failed else 'NOT kept: ' + '; '.join(failed))
  )
  print(f'{os.cpu_count()} CPUs, load average {" ".join(f"{x:.2f}" for x in os.getloadavg())}.')


if __name__ == '__main__':
  main()
