"""``searchless-tournament``: play a tournament between agents and rate them (`searchless.evaluation.tournament`).

    searchless-tournament --agent checkpoint:runs/demo/train --agent stockfish:nodes=1000,elo=1500 \\
        --make_openings 10 --out runs/demo/ladder

Writes ``OUT/games.pgn`` (a rerun resumes it) and ``OUT/results.json``, and
prints the pair results and the Elo table.
"""

import argparse
from collections.abc import Sequence
import os

from searchless.evaluation import tournament
from searchless.plumbing import cli
from searchless.plumbing import errors


def _parser() -> argparse.ArgumentParser:
  p = cli.ArgumentParser(
    prog='searchless-tournament',
    description='Play a tournament between agents (checkpoint:DIR, stockfish:LIMIT[,elo=N], uci:PATH,LIMIT) '
    'and rate them (BayesElo).',
  )
  p.add_argument(
    '--agent',
    action='append',
    default=[],
    metavar='SPEC',
    help='an agent spec (repeat); add ,name=NAME to name it (see searchless.play.agents)',
  )
  p.add_argument('--gauntlet', action='store_true', help='the first --agent plays each of the others (else all pairs)')
  p.add_argument('--openings', nargs='+', default=None, metavar='FILE', help='openings: .pgn, .epd or .tsv files')
  p.add_argument(
    '--make_openings',
    type=int,
    default=None,
    metavar='N',
    help='make N balanced openings with Stockfish (saved as OUT/openings.pgn)',
  )
  p.add_argument('--opening_plies', type=int, default=8, help='plies of the made openings')
  p.add_argument('--seed', type=int, default=0, help='seed of --make_openings, and of sampling --openings')
  p.add_argument(
    '--games_per_pair',
    type=int,
    default=None,
    help='games per pair (default: every opening with both colours); fewer than that samples '
    'ceil(N/2) of the --openings with --seed',
  )
  p.add_argument('--workers', type=int, default=1, help='games played in parallel (processes)')
  p.add_argument(
    '--out', required=True, type=cli.output_dir, help='output directory: games.pgn, results.json; rerun to resume'
  )
  p.add_argument('--max_plies', type=int, default=400, help='draw after this many plies from the opening')
  p.add_argument(
    '--adjudicate_cp',
    type=int,
    default=1300,
    help='win when Stockfish finds a mate or |eval| > this (0: no evaluating Stockfish)',
  )
  p.add_argument('--eval_limit', default='time=0.01', help='search limit of the evaluating Stockfish')
  p.add_argument(
    '--draw_cp',
    type=int,
    default=None,
    help='draw when |eval| < this for --draw_plies plies after move 40 (default: off)',
  )
  p.add_argument('--draw_plies', type=int, default=10, help='see --draw_cp')
  p.add_argument(
    '--engine_path',
    dest='engine',
    default=None,
    help='Stockfish for adjudication and --make_openings (default: found)',
  )
  p.add_argument(
    '--anchor',
    default='auto',
    help='NAME[=ELO] fixes one rating; ladder: the UCI_Elo of stockfish:...,elo=N agents; '
    'none: mean 0; auto: ladder if there are such agents, else none',
  )
  p.add_argument('--event', default=tournament.EVENT, help='PGN Event tag')
  p.add_argument('--no_progress', action='store_true', help='no progress bar')
  cli.add_deprecated_alias(p, '--engine', '--engine_path')
  return p


def main(argv: Sequence[str] | None = None) -> None:
  args = _parser().parse_args(argv)
  with errors.one_line_errors():
    given = {'out_dir': args.out, 'progress': not args.no_progress}
    results = tournament.run(**cli.keywords(tournament.run, args, agents=args.agent, **given))
  errors.print_or_quit(
    f'{tournament.summary(results)}\n'
    f'results: {os.path.join(os.path.dirname(results["games_file"]), tournament.RESULTS_FILE)}'
  )


if __name__ == '__main__':
  main()
