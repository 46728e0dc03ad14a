"""searchless-evaluate: test-set metrics of a checkpoint on action-value (or board_value) records.

    searchless-evaluate --checkpoint WORKDIR --data DIR_OR_BAG [--policy P] [--num_boards N] --out DIR

Writes ``metrics.json`` and ``boards.jsonl`` into ``--out``; what they hold is
described in `searchless.evaluation.evaluate`.
"""

import argparse
from collections.abc import Sequence
import pathlib

from searchless.evaluation import evaluate
from searchless.play import policy as policy_lib
from searchless.plumbing import cli
from searchless.plumbing import errors


def _parser() -> argparse.ArgumentParser:
  p = cli.ArgumentParser(prog='searchless-evaluate', description=__doc__.split('\n\n')[0])
  p.add_argument(
    '--checkpoint',
    required=True,
    help="Workdir, checkpoint dir, published-layout model dir, or a model's name ('pretrained', 'chessbench-270M').",
  )
  p.add_argument('--data', required=True, help='Action-value or board_value bag spec, or a directory holding one.')
  p.add_argument('--out', required=True, type=cli.output_dir, help='Output directory (metrics.json, boards.jsonl).')
  p.add_argument('--policy', choices=policy_lib.POLICIES, help="Default: the checkpoint's.")
  p.add_argument('--num_boards', type=int, help='Evaluate the first N complete boards (default: all).')
  p.add_argument(
    '--dtype',
    default='auto',
    choices=('auto', 'float32', 'bfloat16'),
    help='compute dtype: auto is bfloat16 on GPU/TPU, float32 on CPU',
  )
  p.add_argument('--batch_boards', type=int, default=32, help='Boards per batched forward pass.')
  return p


def main(argv: Sequence[str] | None = None) -> None:
  args = _parser().parse_args(argv)
  with errors.one_line_errors():
    summary = evaluate.run(
      args.checkpoint,
      args.data,
      args.out,
      policy=args.policy,
      num_boards=args.num_boards,
      dtype=args.dtype,
      batch_boards=args.batch_boards,
    )
  errors.print_or_quit(
    '\n'.join(
      [
        f'{summary["policy"]} on {summary["boards"]} boards of {summary["data"]}'
        f' ({summary["dropped_boards"]} dropped: moves not exactly the legal moves)',
        evaluate.table({k: v for k, v in summary.items() if k not in ('policy', 'checkpoint', 'data')}),
        f'wrote {pathlib.Path(args.out) / "metrics.json"} and boards.jsonl',
      ]
    )
  )


if __name__ == '__main__':
  main()
