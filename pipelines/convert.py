r"""Convert between ChessBench bags and board records (`searchless.data.convert`), on any Beam runner.

    searchless-convert 'out/train/action_value*' boards_out --to board
    searchless-convert boards_out/board_value_data.bag chessbench_out --to chessbench

``--to board``: action-value records -> ``OUTPUT_DIR/board_value_data.bag``, one
record per board; ``--to chessbench``: board records -> the three ChessBench
datasets. Flags it does not know go to Beam (``--runner DataflowRunner ...``).
Writes ``OUTPUT_DIR/convert.json`` (counts, bytes per action-value of input and
output).
"""

from searchless.plumbing import beam_check  # noqa: F401  # First: Beam is there, or one line says so.

import argparse
from collections.abc import Sequence
import logging

from searchless.data import convert
from searchless.plumbing import cli
from searchless.plumbing import errors


def _parser() -> argparse.ArgumentParser:
  p = cli.ArgumentParser(prog='searchless-convert', description=__doc__.split('\n\n')[0])
  p.add_argument('input', help='bag spec of the input records: file, name@N_data.bag, glob or comma list')
  p.add_argument(
    'output_dir', type=cli.output_dir, help='where the converted bag(s), convert.json and bad_boards.jsonl go'
  )
  p.add_argument(
    '--to',
    required=True,
    choices=convert.TARGETS,
    help='board: action-value -> board records; chessbench: board records -> the three ChessBench datasets',
  )
  p.add_argument(
    '--state_values',
    default=None,
    help="--to board: state-value records giving each board its value (default: its best move's)",
  )
  p.add_argument(
    '--skip_bad_boards',
    action='store_true',
    help='--to board: leave out (and count) boards whose moves are not exactly their legal moves, instead of failing',
  )
  p.add_argument('--num_shards', type=int, default=1, help='shards per output record set (1 = one <kind>_data.bag)')
  p.add_argument('--compress', action='store_true', help='write zstd-compressed .bagz')
  return p


def run(argv: Sequence[str] | None = None) -> convert.ConversionSummary:
  """Parses `argv` (flags it does not know go to Beam) and runs the conversion (`convert.run`)."""
  args, beam_args = _parser().parse_known_args(argv)
  return convert.run(
    args.input,
    args.output_dir,
    to=args.to,
    state_values=args.state_values,
    skip_bad_boards=args.skip_bad_boards,
    num_shards=args.num_shards,
    compress=args.compress,
    beam_args=beam_args,
  )


def main(argv: Sequence[str] | None = None) -> None:
  """``searchless-convert``: `run` as a console command (one-line errors), then its summary."""
  logging.getLogger().setLevel(logging.WARNING)
  with errors.one_line_errors():
    summary = run(argv)
  print(summary.lines())


if __name__ == '__main__':
  main()
