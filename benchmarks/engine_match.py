"""The UCI engine against an earlier version of itself: a match on a game clock, the score and its 95% interval.

    .venv/bin/python benchmarks/engine_match.py --before COMMIT --out ~/searchless-data/engine-match
    # 100 games of `pretrained` with MCTS on a 60+0.6 clock, 2 at once: about 2 hours on 2 cores.
    # Rerun the same command to resume; --games 200 plays on to 200.

Each side is `searchless-uci --checkpoint CHECKPOINT --search SEARCH --threads 1` from its own
checkout of this repository: `--before` and `--after` (default: HEAD) are commits, each made
a git worktree under ``OUT`` once and run by this virtual environment's Python with its own
source first on the path (the editable install of the working tree set aside). The commits
are kept in ``OUT/match.json``: a rerun with other commits, model, search or clock is refused in
one line (a new ``--out`` starts another match). Openings are sampled from `--openings` (the
named Lichess openings in ../shared/data/openings by default) with `--seed`, each played with
both colours; Stockfish adjudicates as in `searchless-tournament`, whose games.pgn and
results.json are in ``OUT``.

Prints the after engine's wins, draws and losses, its score with the 95% interval (normal,
from the games' own spread), and the Elo difference that score means, with its interval.
"""

import argparse
import glob
import json
import math
import os
import shlex
import stat
import subprocess
import sys

from searchless.evaluation import tournament

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPENINGS = os.path.join(os.path.dirname(ROOT), 'shared', 'data', 'openings')
# Started by each side's wrapper: this Python, the checkout's source first, the editable install set aside.
LAUNCH = (
  'import runpy, sys; '
  "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in getattr(f, '__module__', '')]; "
  'sys.path.insert(0, sys.argv.pop(1)); '
  "runpy.run_module('searchless.commands.uci', run_name='__main__', alter_sys=True)"
)


def _commit(ref: str) -> str:
  command = ['git', '-C', ROOT, 'rev-parse', '--verify', f'{ref}^{{commit}}']
  done = subprocess.run(command, capture_output=True, text=True)
  if done.returncode:
    sys.exit(f'engine_match: {ref!r} is not a commit of {ROOT}')
  return done.stdout.strip()


def _checkout(out: str, side: str, commit: str) -> str:
  """``OUT/<side>-<commit>``: a git worktree of `commit` (made once)."""
  path = os.path.join(out, f'{side}-{commit[:12]}')
  if not os.path.isdir(os.path.join(path, 'searchless')):
    subprocess.run(['git', '-C', ROOT, 'worktree', 'add', '--detach', '--force', path, commit], check=True)
  return path


def _wrapper(out: str, side: str, source: str, args: argparse.Namespace) -> str:
  """An executable that starts the UCI engine of `source` (a uci: agent takes a path)."""
  path = os.path.join(out, f'uci-{side}.sh')
  command = [sys.executable, '-c', LAUNCH, source, '--checkpoint', args.checkpoint, '--search', args.search]
  command += ['--threads', '1']
  with open(path + '.tmp', 'w') as f:
    f.write('#!/bin/sh\nexec ' + shlex.join(command) + '\n')
  os.chmod(path + '.tmp', os.stat(path + '.tmp').st_mode | stat.S_IXUSR)
  os.replace(path + '.tmp', path)
  return path


def interval(wins: int, draws: int, losses: int) -> tuple[float, float, float]:
  """The score and its 95% interval (normal, from the games' spread of 1, 1/2 and 0).

  >>> [round(x, 3) for x in interval(30, 40, 30)]
  [0.5, 0.424, 0.576]
  """
  games = wins + draws + losses
  score = (wins + draws / 2) / games
  variance = (wins * (1 - score) ** 2 + draws * (0.5 - score) ** 2 + losses * score**2) / games
  half = 1.96 * math.sqrt(variance / games)
  return score, score - half, score + half


def elo(score: float) -> float:
  """The Elo difference a score means (logistic): 0.5 is 0, 0.64 about +100.

  >>> round(elo(0.64))
  100
  """
  score = min(max(score, 1e-3), 1 - 1e-3)
  return -400 * math.log10(1 / score - 1)


def main(argv: list[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--before', required=True, help='The earlier engine: a commit of this repository.')
  parser.add_argument('--after', default='HEAD', help='The engine measured: a commit (default: HEAD).')
  parser.add_argument('--out', required=True, help='Folder of the checkouts, games and results; rerun to resume.')
  parser.add_argument('--checkpoint', default='pretrained', help='The model both play (a shipped name or a folder).')
  parser.add_argument('--search', default='mcts', help='The search both use (searchless-uci --search).')
  parser.add_argument('--clock', default='60+0.6', help='Each side game clock, BASE+INC seconds.')
  parser.add_argument('--games', type=int, default=100, help='Games in all (half the openings, both colours).')
  parser.add_argument('--openings', nargs='+', default=sorted(glob.glob(os.path.join(OPENINGS, '*.tsv'))))
  parser.add_argument('--seed', type=int, default=0, help='Seed of the openings sampled.')
  parser.add_argument('--workers', type=int, default=2, help='Games played at once.')
  args = parser.parse_args(argv)
  if not args.openings:
    parser.error(f'--openings: none given, and none found in {OPENINGS}')
  out = os.path.abspath(os.path.expanduser(args.out))
  os.makedirs(out, exist_ok=True)
  match = {
    'before': _commit(args.before),
    'after': _commit(args.after),
    'checkpoint': args.checkpoint,
    'search': args.search,
    'clock': args.clock,
  }
  kept = os.path.join(out, 'match.json')
  if os.path.exists(kept):
    with open(kept) as f:
      earlier = json.load(f)
    if differ := {k: (earlier.get(k), v) for k, v in match.items() if earlier.get(k) != v}:
      sys.exit(f'engine_match: {out} holds another match ({differ}); use another --out')
  else:
    with open(kept + '.tmp', 'w') as f:
      json.dump(match, f, indent=2)
    os.replace(kept + '.tmp', kept)

  sides = {side: _checkout(out, side, match[side]) for side in ('after', 'before')}
  agents = [
    f'uci:{_wrapper(out, side, source, args)},clock={args.clock},handshake=120,name={side}'
    for side, source in sides.items()
  ]
  try:
    results = tournament.run(
      agents, out_dir=out, openings=args.openings, seed=args.seed, games_per_pair=args.games, workers=args.workers
    )
  except KeyboardInterrupt as stopped:
    sys.exit(f'interrupted: {stopped}')  # Its line says what was kept.
  pair = results['pairs'][0]
  wins, draws, losses = (pair['a_wins'], pair['draws'], pair['b_wins'])
  if pair['a'] != 'after':
    wins, losses = losses, wins
  score, low, high = interval(wins, draws, losses)
  print(
    f'\n{match["after"][:12]} against {match["before"][:12]}: {args.checkpoint}, {args.search}, {args.clock}, '
    f'{pair["games"]} games'
  )
  print(f'after: +{wins} ={draws} -{losses}, score {score:.3f} (95%: {low:.3f} to {high:.3f})')
  print(f'Elo difference {elo(score):+.0f} (95%: {elo(low):+.0f} to {elo(high):+.0f})')


if __name__ == '__main__':
  main()
