"""How near the cores' speed the graph model runs: boards/s beside XLA's own matmul rate.

    .venv/bin/python benchmarks/graph_speed.py                        # pretrained, ~30 s on 2 cores
    .venv/bin/python benchmarks/graph_speed.py --checkpoint DIR --rounds 60 --json out.json
    git worktree add /tmp/before COMMIT && .venv/bin/python benchmarks/graph_speed.py --source /tmp/before

Boards of 33-48 legal moves (so 48 move slots, as most positions) from real Lichess games
go, at 1, 4, 16 and 64 boards a call, through:

* the forward pass: the model's jitted apply as play compiles it (`network.jit_inference`);
* the play path: `load_policy(...).analyse_many`, legal moves, tokens, padding and the
  answers' win probabilities included.

Each round times XLA's dense 1024 x 1024 float32 matmul chain on the same cores, then every
case once; the figures are medians over the rounds, so a busy moment of the machine
touches all of them alike. The share is boards/s x 82 MFLOP (XLA's cost analysis of the
shipped model's forward pass at 48 move slots and 16 boards, before any of its speed-ups:
a fixed yardstick) over the matmul rate. Targets: a share of 0.56 at 16 boards through the
play path, and no batch slower per board than a smaller one.
"""

import argparse
import json
import os
import platform
import statistics
import sys
import time

import chess
import jax
import jax.numpy as jnp
import numpy as np


FLOP_PER_BOARD = 82e6  # The yardstick: the shipped graph model's forward pass, 48 move slots (see above).
TARGET_SHARE = 0.56
SIZES = (1, 4, 16, 64)
MATMUL_N = 1024


def matmul_seconds(reps: int = 5):
  """A timer of `reps` chained [1024, 1024] float32 matmuls: returns seconds per run."""
  a = jnp.ones((MATMUL_N, MATMUL_N), jnp.float32) * 1e-3
  mm = jax.jit(lambda x: x @ x)
  mm(a).block_until_ready()

  def run() -> float:
    start, x = time.perf_counter(), a
    for _ in range(reps):
      x = mm(x)
    x.block_until_ready()
    return (time.perf_counter() - start) / reps

  return run


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--checkpoint', default='pretrained', help='A graph model: a shipped name or a folder.')
  parser.add_argument('--rounds', type=int, default=40, help='Timed rounds (every case once a round).')
  parser.add_argument('--json', default='', help='Also write the figures here.')
  parser.add_argument('--source', default='', help="Measure this checkout's package (an earlier commit's worktree).")
  args = parser.parse_args(argv)
  if args.source:  # Its source first on the path, the editable install of this one set aside.
    sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in getattr(f, '__module__', '')]
    sys.path.insert(0, os.path.abspath(args.source))
  sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
  import boards as boards_lib  # The benchmarks' real boards (it imports searchless: after the --source switch).
  from searchless.core import tokenizer
  from searchless.model import network
  from searchless.play import player as player_lib
  from searchless.play import policy as policy_lib

  policy = player_lib.load_policy(args.checkpoint, compute_dtype='float32')
  predictor = policy.predictor
  config = predictor.model_config
  if config.kind != 'graph':
    parser.error(f'--checkpoint {args.checkpoint}: a {config.kind} model; this benchmark measures the graph model')
  fens = boards_lib.spread_boards(boards_lib.LICHESS_999, 1200)
  boards = [b for b in map(chess.Board, fens) if 33 <= b.legal_moves.count() <= 48][: max(SIZES) * 4]
  # As play compiles it (a checkout from before `jit_inference`: its plain jit).
  inference = getattr(network, 'jit_inference', None)
  forward = inference(config, jnp.float32) if inference else jax.jit(network.build(config, jnp.float32).apply)
  params = predictor._params
  # The rows the play path sends for those boards: 77 FEN tokens and 48 move slots (-1 where unused).
  rows = np.full((len(boards), tokenizer.SEQUENCE_LENGTH + 48), -1, np.int32)
  rows[:, : tokenizer.SEQUENCE_LENGTH] = tokenizer.tokenize_batch([policy_lib.model_fen(b) for b in boards])
  for row, board in zip(rows, boards):
    actions = policy_lib.model_actions(board, policy_lib.ordered_legal_moves(board))
    row[tokenizer.SEQUENCE_LENGTH : tokenizer.SEQUENCE_LENGTH + len(actions)] = actions

  matmul = matmul_seconds()
  cases = {}
  for n in SIZES:
    forward(params, None, rows[:n]).block_until_ready()  # Compiled before the clock.
    policy.analyse_many(boards[:n])
    cases[('forward', n)] = lambda x, n=n: forward(params, None, rows[x : x + n]).block_until_ready()
    cases[('play', n)] = lambda x, n=n: policy.analyse_many(boards[x : x + n])
  times = {key: [] for key in cases}
  rates = []
  for r in range(args.rounds):
    rates.append(2 * MATMUL_N**3 / matmul())
    for (path, n), run in cases.items():
      offset = (r * n) % (len(boards) - n + 1)
      start = time.perf_counter()
      run(offset)
      times[(path, n)].append(time.perf_counter() - start)
  rate = statistics.median(rates)
  per_s = {(path, n): n / statistics.median(t) for (path, n), t in times.items()}

  print(
    f'machine: {platform.processor() or platform.machine()}, {len(os.sched_getaffinity(0))} cores, '
    f'{jax.default_backend()}; searchless of {os.path.dirname(os.path.dirname(os.path.dirname(network.__file__)))}; '
    f'{args.checkpoint}: {network.num_params(params)} params; {len(boards)} boards of '
    f'33-48 legal moves; {args.rounds} rounds, medians'
  )
  print(f'XLA matmul ({MATMUL_N}x{MATMUL_N} float32): {rate / 1e9:.1f} GFLOP/s')
  print('| boards per call | ' + ' | '.join(map(str, SIZES)) + ' |')
  print('|---' * (len(SIZES) + 1) + '|')
  for path, label in (('forward', 'forward pass'), ('play', '`analyse_many`')):
    print(f'| {label}, boards/s | ' + ' | '.join(f'{per_s[(path, n)]:.0f}' for n in SIZES) + ' |')
    print('| share of the matmul rate | ' + ' | '.join(f'{share(per_s[(path, n)], rate):.2f}' for n in SIZES) + ' |')
  play16 = share(per_s[('play', 16)], rate)
  slower = [
    f'{n} boards ({per_s[("play", n)]:.0f}/s) below {m} ({per_s[("play", m)]:.0f}/s)'
    for i, n in enumerate(SIZES)
    for m in SIZES[:i]
    if per_s[('play', n)] < per_s[('play', m)]
  ]
  print(f'play path at 16 boards: share {play16:.2f}, {play16 / TARGET_SHARE:.2f}x the target of {TARGET_SHARE}')
  print(
    'play path, per board, against the best smaller batch: '
    + ', '.join(
      f'{n} boards {per_s[("play", n)] / max(per_s[("play", m)] for m in SIZES if m < n):.2f}x' for n in SIZES[1:]
    )
    + ('; slower: ' + '; '.join(slower) if slower else '; none slower')
  )
  if args.json:
    figures = {
      'matmul_gflops': rate / 1e9,
      'boards_per_s': {f'{path}_{n}': v for (path, n), v in per_s.items()},
      'share': {f'{path}_{n}': share(v, rate) for (path, n), v in per_s.items()},
      'rounds': args.rounds,
    }
    with open(args.json, 'w') as f:
      json.dump(figures, f, indent=2)


def share(boards_per_s: float, rate: float) -> float:
  """The model's FLOP rate (at the fixed yardstick) over the matmul's."""
  return boards_per_s * FLOP_PER_BOARD / rate


if __name__ == '__main__':
  main()
