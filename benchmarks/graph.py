"""The graph backbone (AlphaGateau) beside the per-move and the board-packed transformer.

    .venv/bin/python benchmarks/graph.py --quick      # parameters and throughput only, ~2 minutes on 2 cores
    .venv/bin/python benchmarks/graph.py --data ANNOTATED --budget_s 600 --eval_boards 1000 \\
        --puzzles ../shared/data/puzzles/lichess_puzzles_dev.csv --workdir runs/graph   # + the learning comparison

Three CPU-sized configs on the same real Lichess boards: `tiny` (one 79-token
sequence per move), `tiny_packed` (one row per board) and `graph_tiny` (the board
as a graph, every legal move scored from its edge). Measured as
`benchmarks/packing.py` measures the first two:

* parameters, and training action-values per second (the real jitted update, each
  config's own batch, timed after compilation in 3 interleaved rounds, the median
  round of each); the board models also with their batch passed through the network
  in micro-batches (``train.micro_batch``, the same step: ``--micro_batch``);
* play: ms to score every legal move of a board (`Player.analyse`, after `warm_up`),
  median over >= 100 real boards;
* with ``--data``: each trained for the same wall-clock budget on the same
  annotated boards, then action accuracy and Kendall tau-b on the held-out test
  boards and accuracy on the puzzles.

Ends with ``graph/packed: train <X>x action-values/s, play <Y>x boards/s``, the
same against the per-move model, and the micro-batched figures: each board model
against its whole batch, and graph against packed.
"""

import json
import os
import pathlib
import platform
import sys

import chess
import jax

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import boards as boards_lib  # noqa: E402
import packing  # noqa: E402

CONFIGS = {'per-move': 'tiny', 'packed': 'tiny_packed', 'graph': 'graph_tiny'}


def main(argv=None) -> None:
  args = packing.parse_args(__doc__.split('\n\n')[0], argv, budget_s=600, micro_batch=True)

  print(
    f'machine: {platform.processor() or platform.machine()}, {jax.device_count()} {jax.default_backend()} '
    f'device(s), {len(os.sched_getaffinity(0))} cores'
  )
  fens = boards_lib.spread_boards(boards_lib.LICHESS_999, max(args.boards, 256))
  micro = {
    f'{name} m{m}': (CONFIGS[name], [f'train.micro_batch={m}'])
    for m in args.micro_batch
    for name in ('packed', 'graph')
  }
  results = {'train': packing.train_throughput(packing._labelled_boards(fens[:256]), args.steps, {**CONFIGS, **micro})}
  fens = fens[: args.boards]
  for name, r in results['train'].items():
    print(
      f'train {name:9s}: {r["params"]:8d} params, {r["action_values_per_s"]:8.0f} action-values/s '
      f'({r["step_ms"]:.0f} ms/step, {r["action_values_per_step"]:.0f} action-values/step)'
    )
  results['play'] = packing.play_latency(fens, CONFIGS)
  for name, r in results['play'].items():
    print(
      f'play  {name:9s}: median {r["median_ms"]:.1f} ms per board (p95 {r["p95_ms"]:.1f}) over {r["boards"]} '
      f'boards, {sum(chess.Board(f).legal_moves.count() for f in fens) / len(fens):.1f} legal moves on average'
    )
  if args.data:
    results['learning'] = packing.learning(
      args.data, args.budget_s, pathlib.Path(args.workdir), args.puzzles, args.eval_boards, args.num_puzzles, CONFIGS
    )
    for key in ('action_accuracy', 'kendall_tau_b', 'puzzle_accuracy'):
      if key in results['learning']['graph']:
        print(f'learning: {key} ' + ', '.join(f'{name} {results["learning"][name][key]:.4f}' for name in CONFIGS))
  if args.workdir:
    pathlib.Path(args.workdir).mkdir(parents=True, exist_ok=True)
    (pathlib.Path(args.workdir) / 'graph.json').write_text(json.dumps(results, indent=2))
  for other in ('packed', 'per-move'):
    x = results['train']['graph']['action_values_per_s'] / results['train'][other]['action_values_per_s']
    y = results['play'][other]['median_ms'] / results['play']['graph']['median_ms']
    print(f'graph/{other}: train {x:.2f}x action-values/s, play {y:.2f}x boards/s')
  rate = lambda name: results['train'][name]['action_values_per_s']
  for m in args.micro_batch:
    print(
      f'micro-batches of {m}: graph {rate(f"graph m{m}") / rate("graph"):.2f}x its whole batch, packed '
      f'{rate(f"packed m{m}") / rate("packed"):.2f}x; graph/packed: train '
      f'{rate(f"graph m{m}") / rate(f"packed m{m}"):.2f}x '
      f'action-values/s (graph m{m}/packed whole batch: {rate(f"graph m{m}") / rate("packed"):.2f}x)'
    )


if __name__ == '__main__':
  main()
