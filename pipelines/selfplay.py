r"""Self-play data: chess games by Stockfish self-play into a PGN file (one engine process; no Beam).

    searchless-selfplay --out searchless/samples/sample_games.pgn --num_games 50 \
        --seed 0 --nodes 10000

Each game opens with random legal moves, then Stockfish plays both sides,
sampling among its MultiPV best moves; see `searchless.data.selfplay` for the
rules (adjudication, determinism).
"""

import argparse
from collections.abc import Sequence

from searchless.data import selfplay
from searchless.plumbing import cli
from searchless.plumbing import errors


def _range(text: str) -> tuple[int, int]:
  try:
    low, high = (int(x) for x in text.split(','))
  except ValueError:
    raise argparse.ArgumentTypeError(f'expected MIN,MAX (two integers), got {text!r}') from None
  if not 0 <= low <= high:
    raise argparse.ArgumentTypeError(f'expected 0 <= MIN <= MAX, got {text!r}')
  return low, high


def _positive(text: str) -> int:
  value = int(text)
  if value < 1:
    raise argparse.ArgumentTypeError(f'expected a positive integer, got {text!r}')
  return value


def _parser() -> argparse.ArgumentParser:
  p = cli.ArgumentParser(prog='searchless-selfplay', description=__doc__.split('\n\n')[0])
  p.add_argument(
    '--out', dest='output', required=True, type=cli.output_file, help='the PGN file to write (overwritten)'
  )
  p.add_argument('--num_games', type=_positive, default=50, help='how many games')
  p.add_argument('--seed', type=int, default=0, help='random seed: same seed, same games (with a node limit)')
  p.add_argument(
    '--engine_path',
    default=None,
    help='UCI engine binary (default: $SEARCHLESS_STOCKFISH, stockfish on PATH, /usr/games/stockfish)',
  )
  p.add_argument('--nodes', type=_positive, default=10_000, help='engine nodes per move (one MultiPV search)')
  p.add_argument('--opening_plies', type=_range, default='4,8', help='MIN,MAX random plies before the engine plays')
  p.add_argument(
    '--max_plies',
    type=_positive,
    default=selfplay.Adjudication.max_plies,
    help='adjudicate a draw after this many plies',
  )
  p.add_argument(
    '--win_threshold_cp',
    type=_positive,
    default=selfplay.Adjudication.win_threshold_cp,
    help='adjudicate a win when the eval is at least this (or a mate)...',
  )
  p.add_argument(
    '--win_plies',
    type=_positive,
    default=selfplay.Adjudication.win_plies,
    help='...on this many consecutive plies, for the same side',
  )
  p.add_argument('--multipv', type=_positive, default=4, help="sample each move among the engine's best N")
  p.add_argument(
    '--temperature_cp',
    type=float,
    default=50.0,
    help='softmax temperature (centipawns) of that sampling; 0 plays the best move',
  )
  p.add_argument(
    '--date',
    default=selfplay.UNKNOWN_DATE,
    help='PGN Date tag (YYYY.MM.DD); unknown by default so output is reproducible',
  )
  cli.add_deprecated_alias(p, '--output', '--out')
  return p


def run(argv: Sequence[str] | None = None) -> selfplay.SelfplaySummary:
  """Parses `argv` and plays the games (`selfplay.run`); returns its summary."""
  args = _parser().parse_args(argv)
  return selfplay.run(**cli.keywords(selfplay.run, args))


def main(argv: Sequence[str] | None = None) -> None:
  """``searchless-selfplay``: `run` as a console command (one-line errors), then its summary."""
  with errors.one_line_errors():
    summary = run(argv)
  print(summary.line())


if __name__ == '__main__':
  main()
