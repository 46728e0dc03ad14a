"""Which XLA:CPU options the graph model gets by core count (`network.graph_cpu_options`), and their speed.

    .venv/bin/python benchmarks/graph_cpu_options.py                 # 1 and 2 cores (taskset), ~2 min
    .venv/bin/python benchmarks/graph_cpu_options.py --cores 1,2,4 --rounds 20

For each core count, a process pinned to that many cores (``taskset``) times the shipped graph model's
forward pass (as play compiles it, `network.jit_inference`) on real boards of 33-48 legal moves at 16 and 64
boards a call, compiled three ways, interleaved round by round (medians):

* ``defaults``: XLA's own options;
* ``kernels``: YNNPACK fusions and the MLIR fusion emitters off, matmuls multi-threaded (XLA's default);
* ``single-thread matmuls``: the same, and each matmul on one thread.

It prints boards/s of each, which one `graph_cpu_options` picks for that many cores, and the pick's speed as a
ratio to the defaults and to the best of the three (the rule holds where the pick is the best, within noise,
and never slower than the defaults).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

SIZES = (16, 64)
KERNELS = {'xla_cpu_experimental_ynn_fusion_type': '', 'xla_cpu_use_fusion_emitters': False}
SETS = {
  'defaults': {},
  'kernels': KERNELS,
  'single-thread matmuls': {**KERNELS, 'xla_cpu_multi_thread_eigen': False},
}


def child(rounds: int) -> dict:
  """Boards/s of each option set at each batch size, on the cores this process may use."""
  import chess
  import jax.numpy as jnp
  import numpy as np

  sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
  import boards as boards_lib
  from searchless.core import tokenizer
  from searchless.model import network
  from searchless.play import player as player_lib
  from searchless.play import policy as policy_lib

  policy = player_lib.load_policy('pretrained', compute_dtype='float32')
  config, params = policy.predictor.model_config, policy.predictor._params
  fens = boards_lib.spread_boards(boards_lib.LICHESS_999, 1200)
  boards = [b for b in map(chess.Board, fens) if 33 <= b.legal_moves.count() <= 48][: max(SIZES) * 2]
  rows = np.full((len(boards), tokenizer.SEQUENCE_LENGTH + 48), -1, np.int32)
  rows[:, : tokenizer.SEQUENCE_LENGTH] = tokenizer.tokenize_batch([policy_lib.model_fen(b) for b in boards])
  for row, board in zip(rows, boards):
    actions = policy_lib.model_actions(board, policy_lib.ordered_legal_moves(board))
    row[tokenizer.SEQUENCE_LENGTH : tokenizer.SEQUENCE_LENGTH + len(actions)] = actions
  forwards = {name: network.jit_inference(config, jnp.float32, cpu_options=options) for name, options in SETS.items()}
  for forward in forwards.values():
    for n in SIZES:
      forward(params, None, rows[:n]).block_until_ready()  # Compiled before the clock.
  times: dict[str, list[float]] = {f'{name}/{n}': [] for name in SETS for n in SIZES}
  for r in range(rounds):
    for name, forward in forwards.items():
      for n in SIZES:
        offset = (r * n) % (len(boards) - n + 1)
        start = time.perf_counter()
        forward(params, None, rows[offset : offset + n]).block_until_ready()
        times[f'{name}/{n}'].append(time.perf_counter() - start)
  picked = network.graph_cpu_options(network.cpu_cores())
  return {
    'cores': network.cpu_cores(),
    'picked': next(name for name, options in SETS.items() if options == picked),
    'boards_per_s': {key: int(key.split('/')[1]) / statistics.median(t) for key, t in times.items()},
  }


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--cores', default='1,2', help='Core counts to pin a process to, comma-separated.')
  parser.add_argument('--rounds', type=int, default=30, help='Timed rounds (every case once a round).')
  parser.add_argument('--child', action='store_true', help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.child:
    print(json.dumps(child(args.rounds)))
    return
  available = sorted(os.sched_getaffinity(0))
  print('| cores | batch | ' + ' | '.join(SETS) + ' | picked | picked / defaults | picked / best |')
  print('|---' * (len(SETS) + 5) + '|')
  for cores in (int(c) for c in args.cores.split(',')):
    if cores > len(available):
      print(f'| {cores} | (this machine has {len(available)} cores) |')
      continue
    cpus = ','.join(map(str, available[:cores]))
    command = [
      'taskset',
      '-c',
      cpus,
      sys.executable,
      os.path.abspath(__file__),
      '--child',
      '--rounds',
      str(args.rounds),
    ]
    found = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
    rates = found['boards_per_s']
    for n in SIZES:
      row = [rates[f'{name}/{n}'] for name in SETS]
      pick = rates[f'{found["picked"]}/{n}']
      print(
        f'| {cores} | {n} | ' + ' | '.join(f'{r:.0f}' for r in row) + f' | {found["picked"]} | '
        f'{pick / rates[f"defaults/{n}"]:.2f} | {pick / max(row):.2f} |'
      )


if __name__ == '__main__':
  main()
