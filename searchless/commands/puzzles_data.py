r"""Build the puzzle evaluation set and measure its overlap with a training set.

    searchless-puzzles-data --puzzles lichess_db_puzzle.csv.zst \
        --output eval/puzzles.csv --train_dir data/train --remove_train_overlap

reads the puzzles (Lichess or ChessBench CSV layout), writes the kept ones to
``--output`` in the Lichess columns, counts the puzzles whose start board occurs
in the ChessBench training records (``--train_dir``: a directory or a bag spec)
and with ``--remove_train_overlap`` leaves those out. A summary goes to stdout
and to ``<output>.json``. See `searchless.data.puzzle_set`.
"""

from searchless.plumbing import beam_check  # noqa: F401  # First: Beam is there, or one line says so.

import argparse
from collections.abc import Sequence

from searchless.core import records
from searchless.data import puzzle_set
from searchless.plumbing import cli
from searchless.plumbing import errors


def _parser() -> argparse.ArgumentParser:
  p = cli.ArgumentParser(prog='searchless-puzzles-data', description=__doc__.split('\n\n')[0])
  p.add_argument(
    '--puzzles',
    required=True,
    type=cli.input_file,
    help='puzzle CSV (Lichess lichess_db_puzzle.csv[.zst] or ChessBench puzzles.csv)',
  )
  p.add_argument(
    '--out',
    dest='output',
    required=True,
    type=cli.output_file,
    help='the evaluation set to write (CSV in the Lichess columns); the summary goes to OUTPUT.json',
  )
  p.add_argument(
    '--train_dir',
    default=None,
    help='ChessBench training records: a directory, a bag file, an @N spec, a glob or a comma list',
  )
  p.add_argument(
    '--train_kind',
    choices=records.KINDS,
    default=None,
    help='record kind of a --train_dir bag spec (default: from its file name)',
  )
  p.add_argument(
    '--remove_train_overlap', action='store_true', help='leave out the puzzles whose start board is in the training set'
  )
  p.add_argument('--num', dest='limit', type=int, default=None, help='read only the first N puzzles')
  p.add_argument('--no_progress', action='store_true', help='no progress bars')
  cli.add_deprecated_alias(p, '--output', '--out')
  cli.add_deprecated_alias(p, '--limit', '--num')
  return p


def main(argv: Sequence[str] | None = None) -> None:
  args = _parser().parse_args(argv)
  with errors.one_line_errors():
    summary = puzzle_set.run(
      args.puzzles,
      args.output,
      train_dir=args.train_dir,
      train_kind=args.train_kind,
      remove_train_overlap=args.remove_train_overlap,
      limit=args.limit,
      progress=not args.no_progress,
    )
  print(summary.lines())


if __name__ == '__main__':
  main()
