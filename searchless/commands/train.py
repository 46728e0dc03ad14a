"""``searchless-train``: train (or resume) a transformer from a config.

    searchless-train --config tiny --workdir runs/tiny --data 'out/train/action_value*' \\
        --eval_data out/test/action_value_data.bag train.num_steps=800

The library does the work (`searchless.training.train.run`); rerunning resumes.
"""

import argparse
from collections.abc import Sequence
import sys

from searchless import configs
from searchless.plumbing import cli
from searchless.plumbing import errors


def _parser() -> argparse.ArgumentParser:
  p = cli.ArgumentParser(prog='searchless-train', description=__doc__.split('\n\n')[0])
  p.add_argument(
    '--config', required=True, help=f'a shipped config ({", ".join(configs.names())}) or a .py file with get_config()'
  )
  p.add_argument('--workdir', required=True, type=cli.output_dir, help='all outputs go here; rerun to resume')
  p.add_argument('--data', default=None, help='training records: bag file, @N spec or glob (sets data.train)')
  p.add_argument('--eval_data', default=None, help='held-out records (sets data.eval)')
  p.add_argument(
    '--distributed',
    action='store_true',
    help='multi-host with auto-detected cluster (Cloud TPU pods, SLURM): jax.distributed.initialize()',
  )
  p.add_argument('--coordinator', default=None, help='multi-host: jax.distributed coordinator host:port')
  p.add_argument('--num_processes', type=int, default=None, help='multi-host: number of processes')
  p.add_argument('--process_id', type=int, default=None, help='multi-host: this process')
  p.add_argument('--no_progress', action='store_true', help='no progress bar')
  p.add_argument('overrides', nargs='*', help='key=value config overrides, type-checked, e.g. optim.learning_rate=3e-4')
  return p


def _dashed_override(argv: Sequence[str]) -> str | None:
  """What to write instead of an ml_collections-style ``--config.X=V`` flag (overrides take no dashes), if any.

  >>> _dashed_override(['--config', 'tiny', '--config.model.num_layers=abc'])
  'unknown flag --config.model.num_layers=abc: write the override as model.num_layers=abc'
  >>> _dashed_override(['--config', 'tiny', 'model.num_layers=2']) is None
  True
  """
  for i, arg in enumerate(argv):
    if arg == '--':
      return None
    if arg.startswith('--config.'):
      key, sep, value = arg[len('--config.') :].partition('=')
      if not sep:
        value = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith('-') else 'VALUE'
      return f'unknown flag {arg}: write the override as {key}={value}'
  return None


def main(argv: Sequence[str] | None = None) -> None:
  argv = list(sys.argv[1:] if argv is None else argv)
  if (said := _dashed_override(argv)) is not None:
    errors.fail(said)
  args = _parser().parse_args(argv)
  from searchless.training import train  # JAX only once the flags parse.
  from searchless.training import write_errors

  # A failed write (a full disk) in one line: not once more per orbax or tensorboardX thread.
  with errors.one_line_errors(), write_errors.quiet():
    summary = train.run(
      args.config,
      args.workdir,
      data=args.data,
      eval_data=args.eval_data,
      overrides=args.overrides,
      distributed=args.distributed,
      coordinator=args.coordinator,
      num_processes=args.num_processes,
      process_id=args.process_id,
      progress=not args.no_progress,
    )
  state = 'complete' if summary.complete else 'stopped'
  print(
    f'{state} at step {summary.step}/{summary.num_steps} ({summary.num_params:,} parameters); '
    f'summary: {args.workdir}/summary.json'
  )


if __name__ == '__main__':
  main()
