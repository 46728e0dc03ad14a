"""MCTS simulations per second by leaf batch size (virtual loss), and what the batches cost in play.

    .venv/bin/python benchmarks/studies/mcts_batching.py                      # the shipped model, ~2 min

Runs `--sims` simulations from each of a few middlegame boards with leaf
batches of 1, 4, 16 and 64 (`MctsConfig.batch_size`), after compiling every
shape. Prints simulations/s, model calls per simulation, and the ratio to
batch 1; then the same search's move agreement with batch 1 (virtual loss
changes which leaves are expanded, so it changes the search a little).
"""

import argparse
import time

BOARDS = (
  'r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3',
  'r1bq1rk1/ppp2ppp/2np1n2/2b1p3/2B1P3/2PP1N2/PP3PPP/RNBQ1RK1 w - - 0 7',
  'r2q1rk1/pp2bppp/2n1pn2/3p4/3P4/2NBPN2/PP3PPP/R2Q1RK1 w - - 0 10',
  '2r2rk1/pp1b1ppp/4pn2/q7/3P4/P1Q1PN2/1P1B1PPP/2R2RK1 b - - 0 16',
)


def main(argv=None) -> None:
  import chess

  from searchless.play import player
  from searchless.play.search import evaluator as evaluator_lib
  from searchless.play.search import mcts

  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('--checkpoint', default='pretrained')
  p.add_argument('--sims', type=int, default=512)
  p.add_argument('--batches', default='1,4,16,64')
  args = p.parse_args(argv)
  policy = player.load_policy(args.checkpoint, compute_dtype='float32')
  batches = [int(b) for b in args.batches.split(',')]
  evaluator = evaluator_lib.Evaluator(policy)
  evaluator.warm_up(max(batches))
  rows, moves = [], {}
  for batch in batches:
    search = mcts.Mcts(evaluator, mcts.MctsConfig(simulations=args.sims, batch_size=batch, reuse_tree=False))
    search.search(chess.Board(BOARDS[0]))  # Warm: the tree code's first run.
    calls_before = getattr(policy.predictor, 'rows_run', 0)
    start, sims = time.perf_counter(), 0
    moves[batch] = []
    for fen in BOARDS:
      result = search.search(chess.Board(fen))
      sims += result.simulations
      moves[batch].append(result.move)
    seconds = time.perf_counter() - start
    rows.append((batch, sims / seconds, (getattr(policy.predictor, 'rows_run', 0) - calls_before) / sims))
  base = rows[0][1]
  print(f'{args.checkpoint}: {args.sims} simulations from each of {len(BOARDS)} boards')
  print('batch  sims/s  rows/sim  vs batch 1  same move as batch 1')
  for batch, rate, rows_per_sim in rows:
    same = sum(a == b for a, b in zip(moves[batch], moves[batches[0]]))
    print(f'{batch:5d}  {rate:6.0f}  {rows_per_sim:8.2f}  {rate / base:9.2f}x  {same}/{len(BOARDS)}')


if __name__ == '__main__':
  main()
