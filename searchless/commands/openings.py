"""searchless-openings: make balanced tournament openings with Stockfish, or sample/convert an openings file.

    searchless-openings --num 50 --out openings.epd
    searchless-openings --from eco.tsv --sample 20 --out openings.pgn

How openings are made, read and written: `searchless.evaluation.openings`.
"""

import argparse
from collections.abc import Sequence

from searchless.evaluation import openings
from searchless.plumbing import cli
from searchless.plumbing import errors


def _parser() -> argparse.ArgumentParser:
  p = cli.ArgumentParser(prog='searchless-openings', description=__doc__.split('\n\n')[0])
  p.add_argument(
    '--out', required=True, type=cli.output_file, help='output file: .epd (positions) or .pgn (moves kept)'
  )
  p.add_argument('--num', type=int, default=None, help='how many openings to make (without --from)')
  p.add_argument('--plies', type=int, default=8, help='plies per made opening')
  p.add_argument('--seed', type=int, default=0, help='seed of the made lines, or of --sample')
  p.add_argument(
    '--engine_path',
    dest='engine',
    default=None,
    help='Stockfish binary (default: $SEARCHLESS_STOCKFISH, PATH, /usr/games)',
  )
  p.add_argument('--limit', default='nodes=2000', help='search limit per position: nodes=N, depth=N or time=S')
  p.add_argument('--max_eval_cp', type=int, default=100, help='keep lines whose end eval is within ± this')
  p.add_argument('--multipv', type=int, default=4, help="choose among the engine's top-k moves ...")
  p.add_argument('--window_cp', type=int, default=50, help='... that score within this of the best')
  p.add_argument('--from', dest='source', default=None, help='read openings from this .pgn/.epd/.tsv file instead')
  p.add_argument('--sample', type=int, default=None, help='with --from: keep N openings drawn with --seed')
  cli.add_deprecated_alias(p, '--engine', '--engine_path')
  return p


def main(argv: Sequence[str] | None = None) -> None:
  args = _parser().parse_args(argv)
  with errors.one_line_errors():
    options = openings.MakeOptions(**cli.keywords(openings.MakeOptions, args, engine_path=args.engine))
    count = openings.run(**cli.keywords(openings.run, args, options=options))
  print(f'wrote {count} openings to {args.out}')


if __name__ == '__main__':
  main()
