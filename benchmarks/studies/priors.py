"""The transformer's structural priors: what each costs in throughput and gives in learning.

    .venv/bin/python benchmarks/studies/priors.py                  # training throughput only, ~5 minutes on 2 cores
    cd /tmp && CHECKOUT/.venv/bin/python CHECKOUT/benchmarks/studies/priors.py \\
        --workdir ~/searchless-data/models              # + learning curves: ~1.2 h of both cores per model, resumable

The board-packed transformer (`tiny_packed`) with each prior of `searchless.model.priors`
alone and all together, beside `graph_tiny`:

* training action-values per second of each, on the same real Lichess boards, as a
  ratio to `tiny_packed` (`benchmarks/packing.py`'s measurement: the jitted update,
  each config's batch of 32 boards, timed after compilation in 3 interleaved rounds,
  the median round of each);
* with ``--workdir``: learning curves at equal wall-clock (4 points x 15 minutes) on the
  same 202,961 distinct shared boards, measured by `benchmarks/studies/campaign_models.py` (and
  shared with it: a model both benchmarks name is trained once): held-out log-loss,
  action accuracy, tau-b against the deep reference, dev puzzles with Wilson intervals.

Ends with ``<prior>/tiny_packed: train <X>x action-values/s`` for each prior.
"""

import argparse
import os
import pathlib
import platform
import sys

import jax

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # campaign_models, beside it
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # benchmarks/: boards, packing
import boards as boards_lib  # noqa: E402
import campaign_models  # noqa: E402
import packing  # noqa: E402

# Name -> tiny_packed overrides, in the order the curves are trained (the combinations first).
# 'packed_priors' is priors 1-3 of the issue (tied move squares: no new tables); '_smolgen' adds the 4th.
_COMBINED = ['model.mover_view=True', 'model.move_squares=tied', 'model.square_bias=relative']
PRIORS = {
  'tiny_packed': [],
  'packed_priors': _COMBINED,
  'packed_priors_smolgen': [*_COMBINED, 'model.smolgen=32'],
  'packed_mover': ['model.mover_view=True'],
  'packed_tied': ['model.move_squares=tied'],
  'packed_untied': ['model.move_squares=untied'],
  'packed_relative': ['model.square_bias=relative'],
  'packed_smolgen': ['model.smolgen=32'],
  # The graph's open-line flag as an attention bias (square_bias='open_lines').
  'packed_open_lines': ['model.square_bias=open_lines'],
  'packed_lines': ['model.mover_view=True', 'model.move_squares=tied', 'model.square_bias=open_lines'],
  'packed_lines_smolgen': [
    'model.mover_view=True',
    'model.move_squares=tied',
    'model.square_bias=open_lines',
    'model.smolgen=32',
  ],
  # A move read from both its squares' states before every block (model.move_gather), on priors 1-4.
  'packed_priors_gather': [*_COMBINED, 'model.smolgen=32', 'model.move_gather=True'],
}


def main(argv=None) -> None:
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument(
    '--steps', type=int, default=20, help='timed training steps of each, per round (3 interleaved rounds, median)'
  )
  p.add_argument('--workdir', default=None, help='run the learning curves here (campaign_models layout)')
  p.add_argument('--points', type=int, default=4, help='curve points per model')
  p.add_argument('--minutes', type=float, default=15.0, help='training minutes between points')
  p.add_argument(
    '--only',
    nargs='*',
    choices=sorted(PRIORS),
    default=None,
    help='these priors only (tiny_packed and graph_tiny, the baselines, always)',
  )
  args = p.parse_args(argv)
  names = [n for n in PRIORS if args.only is None or n == 'tiny_packed' or n in args.only]
  print(
    f'machine: {platform.processor() or platform.machine()}, {jax.device_count()} {jax.default_backend()} '
    f'device(s), {len(os.sched_getaffinity(0))} cores',
    flush=True,
  )
  fens = boards_lib.spread_boards(boards_lib.LICHESS_999, 256)
  configs = {name: ('tiny_packed', PRIORS[name]) for name in names}
  configs['graph_tiny'] = ('graph_tiny', [])
  results = packing.train_throughput(packing._labelled_boards(fens), args.steps, configs)
  for name, r in results.items():
    print(
      f'train {name:16s}: {r["params"]:8d} params, {r["action_values_per_s"]:8.0f} action-values/s '
      f'({r["step_ms"]:.0f} ms/step)',
      flush=True,
    )
  if args.workdir:
    models = ['graph_tiny=graph_tiny'] + [f'{name}=tiny_packed:{",".join(PRIORS[name])}' for name in names]
    campaign_models.main(
      ['--workdir', args.workdir, '--points', str(args.points), '--minutes', str(args.minutes), '--models', *models]
    )
  base = results['tiny_packed']['action_values_per_s']
  for name, r in results.items():
    if name != 'tiny_packed':
      print(f'{name}/tiny_packed: train {r["action_values_per_s"] / base:.2f}x action-values/s')


if __name__ == '__main__':
  main()
