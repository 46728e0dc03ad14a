"""searchless-improve: self-play with search, fine-tuning on the search's values, measured each iteration.

    searchless-improve --checkpoint pretrained --workdir runs/improve --iterations 3 \\
        --puzzles ../shared/data/puzzles/lichess_puzzles_dev.csv

Each iteration: MCTS over the current model plays ``--games`` games against
itself, every searched board becomes a training record (the search's move
values), the model is fine-tuned on them, and the new model without search is
measured against the starting one (puzzles, a match with BayesElo);
`searchless.training.improve` describes the loop. Rerun the same command to
resume a killed run. Prints one line per iteration; WORKDIR/summary.json has
them all.
"""

import argparse
from collections.abc import Sequence

from searchless.plumbing import cli
from searchless.plumbing import errors
from searchless.training import improve

_DEFAULTS = improve.ImproveConfig()


def _parser() -> argparse.ArgumentParser:
  p = cli.ArgumentParser(prog='searchless-improve', description=__doc__.split('\n\n')[0])
  p.add_argument('--checkpoint', required=True, help="the starting model: workdir, checkpoint dir or 'pretrained'")
  p.add_argument(
    '--workdir', required=True, type=cli.output_dir, help='outputs (iteration_NNN/, summary.json); rerun to resume'
  )
  for field in (
    'iterations',
    'games',
    'sims',
    'sample_plies',
    'opening_plies',
    'max_plies',
    'resign_plies',
    'steps',
    'batch_size',
    'min_visits',
    'num_puzzles',
    'match_games',
    'workers',
    'seed',
  ):
    p.add_argument(f'--{field}', type=int, default=getattr(_DEFAULTS, field), help=_help(field))
  for field in ('noise', 'resign', 'learning_rate'):
    p.add_argument(f'--{field}', type=float, default=getattr(_DEFAULTS, field), help=_help(field))
  for field in ('replay', 'puzzles'):
    p.add_argument(f'--{field}', default=getattr(_DEFAULTS, field), help=_help(field))
  p.add_argument('--openings', nargs='*', default=[], help=_help('openings'))
  p.add_argument('--no_progress', dest='quiet', action='store_true', help='no progress bars')
  cli.add_deprecated_alias(p, '--quiet', '--no_progress')
  return p


def _help(field: str) -> str:
  """The field's comment in `ImproveConfig` (one home for what each setting means)."""
  import inspect

  for line in inspect.getsource(improve.ImproveConfig).splitlines():
    if line.strip().startswith(f'{field}:') and '#' in line:
      return line.split('#', 1)[1].strip()
  return field


def main(argv: Sequence[str] | None = None) -> None:
  args = _parser().parse_args(argv)
  fields = {k: v for k, v in vars(args).items() if k not in ('checkpoint', 'workdir', 'quiet')}
  fields['openings'] = tuple(fields['openings'])
  with errors.one_line_errors():
    config = improve.ImproveConfig(**fields)
    improve.run(args.checkpoint, args.workdir, config, progress=not args.quiet)


if __name__ == '__main__':
  main()
