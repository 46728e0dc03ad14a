"""searchless-mine-puzzles: mine Lichess-style puzzles ("only move" tactics) from PGN games with Stockfish.

    searchless-mine-puzzles --games searchless/samples/sample_games.pgn --out runs/demo/puzzles.csv

The method is `searchless.evaluation.puzzle_mining`'s; the CSV has the Lichess
puzzle columns, so ``searchless-puzzles`` reads it unchanged.
"""

import argparse
from collections.abc import Sequence
import sys

from searchless.data import splits
from searchless.evaluation import mined_puzzles
from searchless.evaluation import puzzle_mining
from searchless.plumbing import cli
from searchless.plumbing import errors


def _parser() -> argparse.ArgumentParser:
  p = cli.ArgumentParser(prog='searchless-mine-puzzles', description=__doc__.split('\n\n')[0])
  p.add_argument(
    '--games',
    action='append',
    required=True,
    help='PGN file or glob (.pgn, .pgn.zst, .pgn.bz2, .pgn.gz); repeat for several',
  )
  p.add_argument('--out', required=True, type=cli.output_file, help='puzzle CSV to write (Lichess columns)')
  p.add_argument('--max_puzzles', type=int, default=None, help='stop after this many puzzles')
  p.add_argument('--limit', default=puzzle_mining.DEFAULT_LIMIT, help='per search: nodes=N, depth=N or time=SECONDS')
  p.add_argument(
    '--split',
    choices=puzzle_mining.SPLITS,
    default='test',
    help="games of this split of the annotation pipeline (the demo trains on 'train')",
  )
  p.add_argument(
    '--test_fraction',
    type=float,
    default=splits.DEFAULT_TEST_FRACTION,
    help="the annotation pipeline's --test_fraction",
  )
  p.add_argument('--min_best', type=float, default=0.7, help="the best move's least win probability")
  p.add_argument('--min_gap', type=float, default=0.3, help='its least win-probability lead over the second best')
  p.add_argument('--max_solver_moves', type=int, default=2, help='longest solution, in solver moves')
  p.add_argument(
    '--min_swing',
    type=float,
    default=0.0,
    help="the setup move's least gain in the solver's win probability (0: off; Lichess-like: 0.3)",
  )
  p.add_argument('--workers', type=int, default=1, help='Stockfish processes searching in parallel')
  p.add_argument(
    '--engine_path',
    default=None,
    help='Stockfish binary (default: $SEARCHLESS_STOCKFISH, stockfish on PATH, /usr/games/stockfish)',
  )
  p.add_argument('--no_progress', action='store_true', help='no progress bar')
  return p


def main(argv: Sequence[str] | None = None) -> None:
  args = _parser().parse_args(argv)
  with errors.one_line_errors():
    options = puzzle_mining.MiningOptions(
      **cli.keywords(puzzle_mining.MiningOptions, args, progress=not args.no_progress)
    )
    puzzles, stats = puzzle_mining.run(games=args.games, out=args.out, options=options)
  skipped = sum(stats.games_skipped.values())
  if not puzzles:
    print('warning: no puzzles found (more games, --split all, or lower --min_best / --min_gap)', file=sys.stderr)
  errors.print_or_quit(
    '\n'.join(
      [
        f'games: {stats.games_read} read, {skipped} skipped'
        + (f' {dict(sorted(stats.games_skipped.items()))}' if skipped else '')
        + f', {stats.games_selected} in split {args.split!r}, {stats.games_other_split} in the other split',
        f'positions: {stats.positions} scanned ({stats.positions_terminal} game over or forced,'
        f' {stats.positions_duplicate} repeated, left out); engine: {stats.engine or "-"} at {args.limit}',
        mined_puzzles.rating_histogram(puzzles),
        f'time: {stats.seconds:.1f} s',
        f'puzzles: {len(puzzles)} -> {args.out}',
      ]
    )
  )


if __name__ == '__main__':
  main()
