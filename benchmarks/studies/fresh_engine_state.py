"""The cost of annotating every board from a fresh engine state (``ucinewgame`` per board).

    .venv/bin/python benchmarks/studies/fresh_engine_state.py            # 80 real boards, ~1 minute

`engine.BoardAnnotator` sends ``ucinewgame`` + ``isready`` before each board so
that a board's labels do not depend on the boards searched before it. This times
the same boards with one annotator each way, in alternating runs: fresh state
(the shipped behaviour) and kept state (only ``isready``, as before), per mode at
a small node limit, where the reset weighs most. Prints seconds and the ratio
fresh / kept (1.00 = free).
"""

import argparse
import pathlib
import sys
import time

import chess

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # benchmarks/: its shared boards
import boards as boards_lib  # noqa: E402

from searchless.engines import annotator as engine  # noqa: E402
from searchless.engines import launch  # noqa: E402


def _time(config: engine.EngineConfig, fens: list[str]) -> float:
  with engine.BoardAnnotator(config) as annotator:
    annotator.annotate(fens[0])  # Engine start-up is not part of the figure.
    start = time.perf_counter()
    for fen in fens:
      annotator.annotate(fen)
    return time.perf_counter() - start


def main(argv=None) -> None:
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('--boards', type=int, default=80)
  p.add_argument('--repeats', type=int, default=2, help='alternating runs of each way')
  args = p.parse_args(argv)
  path = launch.find_stockfish()
  if path is None:
    sys.exit('no Stockfish found')
  _, fens = boards_lib.first_games(boards_lib.LICHESS_999, args.boards + 10)
  fens = [f for f in fens if any(chess.Board(f).legal_moves)][: args.boards]
  fresh_start = engine._NewGame.start  # pylint: disable=protected-access

  def kept_start(self):  # The old behaviour: wait for the engine, keep its hash and histories.
    self._engine.send_line('isready')

  print(f'{len(fens)} real boards, {sum(chess.Board(f).legal_moves.count() for f in fens)} moves, {path}')
  for mode, limit in (('per_move', 'nodes=2000'), ('multipv', 'nodes=20000')):
    config = engine.EngineConfig(path=path, limit=launch.SearchLimit.parse(limit), mode=mode)
    seconds = {'fresh': 0.0, 'kept': 0.0}
    try:
      for _ in range(args.repeats):
        for name, start in (('fresh', fresh_start), ('kept', kept_start)):
          engine._NewGame.start = start  # pylint: disable=protected-access
          seconds[name] += _time(config, fens)
    finally:
      engine._NewGame.start = fresh_start  # pylint: disable=protected-access
    print(
      f'{mode} {limit}: fresh {seconds["fresh"]:.2f} s, kept {seconds["kept"]:.2f} s,'
      f' fresh/kept {seconds["fresh"] / seconds["kept"]:.3f}'
    )


if __name__ == '__main__':
  main()
