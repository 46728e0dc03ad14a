r"""Generate chess games by Stockfish self-play into a PGN file.

    python -m pipelines.selfplay --output data/sample_games.pgn --num_games 50 \
        --seed 0 --nodes 10000

Each game opens with random legal moves, then Stockfish plays both sides,
sampling among its MultiPV best moves; see `searchless.selfplay` for the
rules (adjudication, determinism).
"""

import argparse
import os
import sys
import time

import chess.engine
import chess.pgn
import tqdm

from searchless import engine as engine_lib
from searchless import selfplay


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
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
  p.add_argument('--output', required=True, help='the PGN file to write (overwritten)')
  p.add_argument('--num_games', type=_positive, default=50, help='how many games')
  p.add_argument('--seed', type=int, default=0, help='random seed: same seed, same games (with a node limit)')
  p.add_argument('--engine_path', default=engine_lib.find_stockfish(), help='UCI engine binary (Stockfish)')
  p.add_argument('--nodes', type=_positive, default=10_000, help='engine nodes per move (one MultiPV search)')
  p.add_argument('--opening_plies', type=_range, default='4,8', help='MIN,MAX random plies before the engine plays')
  p.add_argument('--max_plies', type=_positive, default=selfplay.Adjudication.max_plies, help='adjudicate a draw after this many plies')
  p.add_argument('--win_threshold_cp', type=_positive, default=selfplay.Adjudication.win_threshold_cp, help='adjudicate a win when the eval is at least this (or a mate)...')
  p.add_argument('--win_plies', type=_positive, default=selfplay.Adjudication.win_plies, help='...on this many consecutive plies, for the same side')
  p.add_argument('--multipv', type=_positive, default=4, help='sample each move among the engine\'s best N')
  p.add_argument('--temperature_cp', type=float, default=50.0, help='softmax temperature (centipawns) of that sampling; 0 plays the best move')
  p.add_argument('--date', default=selfplay.UNKNOWN_DATE, help='PGN Date tag (YYYY.MM.DD); unknown by default so output is reproducible')
  return p


def run(argv=None) -> dict:
  """Writes the games; returns a summary (games, plies, results, seconds)."""
  args = _parser().parse_args(argv)
  if not args.engine_path or not os.access(args.engine_path, os.X_OK):
    raise SystemExit(f'engine binary {args.engine_path!r} not found or not executable; install Stockfish'
                     ' (Debian: apt-get install stockfish) or pass --engine_path')
  games = selfplay.play_games(
      args.engine_path, args.num_games, seed=args.seed, opening_plies=args.opening_plies,
      limit=chess.engine.Limit(nodes=args.nodes), multipv=args.multipv,
      temperature_cp=args.temperature_cp, max_plies=args.max_plies,
      win_threshold_cp=args.win_threshold_cp, win_plies=args.win_plies, date=args.date)
  start = time.monotonic()
  summary = {'games': 0, 'plies': 0, 'results': {}}
  directory = os.path.dirname(args.output)
  if directory:
    os.makedirs(directory, exist_ok=True)
  with open(args.output, 'w', encoding='utf-8') as f, tqdm.tqdm(total=args.num_games, unit='game') as bar:
    exporter = chess.pgn.FileExporter(f)
    for game in games:
      game.accept(exporter)
      summary['games'] += 1
      summary['plies'] += int(game.headers['PlyCount'])
      result = game.headers['Result']
      summary['results'][result] = summary['results'].get(result, 0) + 1
      bar.set_postfix(plies=summary['plies'])
      bar.update()
  summary['seconds'] = round(time.monotonic() - start, 1)
  summary['output'] = args.output
  return summary


def main(argv=None) -> None:
  s = run(argv)
  results = ', '.join(f'{r}: {n}' for r, n in sorted(s['results'].items()))
  print(f"{s['games']} games, {s['plies']} plies ({results}) in {s['seconds']} s -> {s['output']}")


if __name__ == '__main__':
  main(sys.argv[1:])
