"""``searchless-analyse-game``: analyses a sample game of a run's match for its report.

    searchless-analyse-game --run_dir runs/demo

Picks a game of ``RUN_DIR/match/games.pgn`` (the model's longest win), asks the
checkpoint in ``RUN_DIR/train`` and Stockfish how they judge each move and
writes ``RUN_DIR/report/sample_game.json`` (see `searchless.report.sample_game`),
whose path is the last stdout line; ``searchless-report`` then shows it.
"""

import argparse
from collections.abc import Sequence

from searchless.plumbing import cli
from searchless.plumbing import errors
from searchless.report import sample_game


def _parser() -> argparse.ArgumentParser:
  p = cli.ArgumentParser(prog='searchless-analyse-game', description=__doc__.split('\n\n')[0])
  p.add_argument('--run_dir', required=True, help='the run directory (match/, train/)')
  p.add_argument('--no_model', action='store_true', help="don't load the checkpoint (no model's view of the moves)")
  p.add_argument(
    '--stockfish_nodes',
    type=int,
    default=sample_game.DEFAULT_STOCKFISH_NODES,
    help="Stockfish's nodes per position (0: no Stockfish)",
  )
  p.add_argument('--engine_path', default=None, help='Stockfish binary (default: found on PATH or /usr/games)')
  return p


def main(argv: Sequence[str] | None = None) -> None:
  args = _parser().parse_args(argv)
  with errors.one_line_errors():
    path = sample_game.analyse(
      args.run_dir, stockfish_nodes=args.stockfish_nodes, use_model=not args.no_model, engine_path=args.engine_path
    )
  print(path)


if __name__ == '__main__':
  main()
