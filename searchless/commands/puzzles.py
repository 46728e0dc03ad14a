r"""searchless-puzzles: evaluate an agent on Lichess puzzles, overall and per rating band.

    searchless-puzzles --puzzles lichess_db_puzzle.csv --agent stockfish:nodes=20000 \
        --num 1000 --out runs/puzzles-sf

The rules are `searchless.evaluation.puzzles`'; the last stdout line is
``accuracy: 0.xxxx (k/n)``.
"""

import argparse
from collections.abc import Sequence
import os

from searchless.evaluation import puzzles
from searchless.plumbing import cli
from searchless.plumbing import errors


def _parser() -> argparse.ArgumentParser:
  p = cli.ArgumentParser(prog='searchless-puzzles', description=__doc__.split('\n\n')[0])
  p.add_argument('--puzzles', required=True, type=cli.input_file, help='puzzle CSV (Lichess or ChessBench layout)')
  p.add_argument(
    '--agent',
    required=True,
    help='agent spec: checkpoint:DIR, stockfish:nodes=N, stockfish:time=S, uci:PATH,time=S, ...',
  )
  p.add_argument('--num', type=int, default=None, help='evaluate only the first NUM puzzles')
  p.add_argument('--out', required=True, type=cli.output_dir, help='output directory')
  p.add_argument('--band_width', type=int, default=200, help='rating band width (default 200)')
  p.add_argument('--no_progress', action='store_true', help='no progress bar')
  return p


def main(argv: Sequence[str] | None = None) -> None:
  args = _parser().parse_args(argv)
  with errors.one_line_errors():
    summary = puzzles.run(
      puzzles=args.puzzles,
      agent=args.agent,
      out=args.out,
      num=args.num,
      band_width=args.band_width,
      progress=not args.no_progress,
    )
  errors.print_or_quit(
    '\n'.join(
      [
        f'agent: {summary["agent"]}',
        puzzles.band_table([puzzles.Band(**b) for b in summary['bands']]),
        f'results: {os.path.join(args.out, "results.csv")}',
        f'accuracy: {summary["accuracy"]:.4f} ({summary["solved"]}/{summary["n"]})',
      ]
    )
  )


if __name__ == '__main__':
  main()
