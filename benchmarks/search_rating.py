"""How strongly the UCI engine plays with search: the BayesElo of each ``Search`` over a model, on a game clock.

    .venv/bin/python benchmarks/search_rating.py --out runs/search_rating          # pretrained, 60+0.6, 20 a pair
    .venv/bin/python benchmarks/search_rating.py --out runs/search_rating --games 30 --clock 30+0.3

Each search (``--searches``: none, the searchless policy; alphabeta; mcts) is one `searchless-uci`
process over `--checkpoint` with Threads 1, started by a wrapper script in ``--out``. It plays on a
game clock of its own (``--clock BASE+INC`` seconds: the engine is sent ``go wtime btime winc binc``
and shares its time itself, `searchless.play.uci.search.budget`; an overrun loses the game,
`searchless.play.agents.Clock`). Its opponents are Stockfish at the ``--ladder`` ``UCI_Elo`` levels
at the strength protocol's limit (`searchless.evaluation.strength.OPPONENT_LIMIT`). Each search
plays each level ``--games`` games, from the same balanced openings made with Stockfish, with both
colours. All games are rated together by BayesElo, anchored on the levels.

Prints each search's score against each level, its BayesElo with the 95% interval, and each
search's gain over the policy. An interrupted run resumes from ``OUT/games.pgn`` (the openings are
kept in ``OUT/openings.pgn``; a resumed run with a larger ``--games`` cycles them). The defaults (180
games at 60+0.6, 2 at once) took 86.5 min on 2 cores, and ``--games 36`` 61.3 min more
(benchmarks/RESULTS.md, "The engine with search, rated").
"""

import argparse
import os
import shlex
import stat
import sys
import time

from searchless.evaluation import openings as openings_lib
from searchless.evaluation import strength
from searchless.evaluation.tournament import games as games_lib
from searchless.evaluation.tournament import runner
from searchless.evaluation.tournament import scheduling
from searchless.play import agents
from searchless.play.uci import engine as uci_engine

OPENINGS_FILE = 'openings.pgn'


def _wrapper(out: str, checkpoint: str, search: str) -> str:
  """An executable that starts `searchless-uci` over `checkpoint` with `search` (a uci: agent takes a path)."""
  path = os.path.join(out, f'uci-{search}.sh')
  command = [sys.executable, '-m', 'searchless.commands.uci', '--checkpoint', checkpoint]
  command += ['--search', search, '--threads', '1']
  with open(path, 'w') as f:
    f.write('#!/bin/sh\nexec ' + shlex.join(command) + '\n')
  os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
  return path


def main(argv: list[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--out', required=True, help='Folder of the games, the openings and results.json.')
  parser.add_argument('--checkpoint', default='pretrained', help='The model searched (a shipped name or a folder).')
  parser.add_argument('--searches', default='none,alphabeta,mcts', help=f'Of {", ".join(uci_engine.SEARCHES)}.')
  parser.add_argument('--clock', default='60+0.6', help='Each engine game clock, BASE+INC seconds.')
  parser.add_argument('--ladder', default='1350,1800,2200', help='Stockfish UCI_Elo levels.')
  parser.add_argument('--games', type=int, default=20, help='Games of each search against each level.')
  parser.add_argument('--workers', type=int, default=2, help='Games played at once.')
  parser.add_argument('--seed', type=int, default=0, help='Seed of the openings.')
  args = parser.parse_args(argv)
  agents.Clock.parse(args.clock)
  searches = args.searches.split(',')
  if unknown := set(searches) - set(uci_engine.SEARCHES):
    parser.error(f'--searches: unknown {sorted(unknown)}; expected some of {uci_engine.SEARCHES}')
  ladder = [int(level) for level in args.ladder.split(',')]
  os.makedirs(args.out, exist_ok=True)

  openings_path = os.path.join(args.out, OPENINGS_FILE)
  if not os.path.exists(openings_path):  # Made once: a resumed run plays the same openings.
    made = openings_lib.make_openings(-(-args.games // 2), openings_lib.MakeOptions(seed=args.seed))
    openings_lib.write_openings(made, openings_path + '.tmp.pgn')
    os.replace(openings_path + '.tmp.pgn', openings_path)
  openings = openings_lib.read_openings(openings_path)

  players = [  # Named by search; 'policy' is Search none.
    f'uci:{_wrapper(args.out, args.checkpoint, s)},clock={args.clock},handshake=120,'
    f'name={"policy" if s == "none" else s}'
    for s in searches
  ]
  opponents = [f'stockfish:{strength.OPPONENT_LIMIT},elo={level},name=stockfish-{level}' for level in ladder]
  entrants = scheduling.resolve_entrants([*players, *opponents])
  pairs = [(p, o) for p in entrants[: len(players)] for o in entrants[len(players) :]]
  tasks = scheduling.schedule(pairs, openings, args.games)
  start = time.monotonic()
  results = runner.run_tournament(
    entrants, tasks, out_dir=args.out, workers=args.workers, adjudication=games_lib.Adjudication()
  )
  minutes = (time.monotonic() - start) / 60

  print(f'\n{args.checkpoint} on a {args.clock} clock against Stockfish {strength.OPPONENT_LIMIT} at UCI_Elo levels')
  print(f'({len(tasks)} games, {minutes:.1f} min this run, load average {os.getloadavg()[0]:.1f})\n')
  print('| search | ' + ' | '.join(f'vs {level}' for level in ladder) + ' | BayesElo (95%) |')
  print('|---' * (len(ladder) + 2) + '|')
  ratings = {r['name']: r for r in (results['elo'] or {}).get('players', [])}
  for player in entrants[: len(players)]:
    cells = []
    for opponent in entrants[len(players) :]:
      pair = next(p for p in results['pairs'] if {p['a'], p['b']} == {player.name, opponent.name})
      score = pair['a_score'] if pair['a'] == player.name else 1 - pair['a_score']
      cells.append(f'{score * pair["games"]:g}/{pair["games"]}')
    r = ratings.get(player.name)
    rating = f'{r["elo"]:.0f} ({r["lower"]:.0f} to {r["upper"]:.0f})' if r else 'not rated'
    print(f'| {player.name} | ' + ' | '.join(cells) + f' | {rating} |')
  policy = ratings.get(entrants[0].name) if searches[0] == 'none' else None
  for player in entrants[1 : len(players)] if policy else ():
    if player.name in ratings:
      print(f'{player.name}: {ratings[player.name]["elo"] - policy["elo"]:+.0f} Elo over the policy')


if __name__ == '__main__':
  main()
