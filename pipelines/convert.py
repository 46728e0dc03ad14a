r"""Convert between ChessBench bags and board records (the transforms: `searchless.data.convert`), on any Beam runner.

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
import time

import apache_beam as beam
from bagz.beam import bagzio

from searchless.core import bags
from searchless.core import records
from searchless.data import beam_job
from searchless.data import convert
from searchless.plumbing import cli
from searchless.plumbing import errors
from searchless.plumbing import outputs as output_folders


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
  """Parses `argv` (flags it does not know go to Beam), builds the conversion's graph and runs it, as the one writer
  of OUTPUT_DIR (a conversion replaces the one already there: its files only); its summary, also in convert.json."""
  args, beam_args = _parser().parse_known_args(argv)
  in_records = convert.check_inputs(args.input, args.to, args.state_values, args.skip_bad_boards)
  start = time.time()
  p = beam.Pipeline(options=beam_job.checked_options(beam_args))
  if args.to == 'board':
    values = None
    if args.state_values:
      values = p | 'Read[state_value]' >> convert.ReadRecords(args.state_values, 'state_value')
    grouped = (
      p
      | 'Read[action_value]' >> convert.ReadRecords(args.input, 'action_value')
      | 'GroupIntoBoards' >> convert.GroupIntoBoards(values)
    )
    outputs = {records.BOARD_VALUE: grouped.boards}
    _ = grouped[convert.BAD] | 'WriteBad' >> convert.WriteBadBoards(args.output_dir)
  else:
    outputs = (
      p
      | 'Read[board_value]' >> convert.ReadRecords(args.input, records.BOARD_VALUE)
      | 'ToChessBench' >> convert.BoardsToChessBench()
    )
  for kind, records_of_kind in outputs.items():
    path = bags.sink_path(args.output_dir, kind, args.num_shards, args.compress)
    _ = records_of_kind | f'Write[{kind}]' >> bagzio.WriteToBagz(path, coder=convert.RecordCoder(kind))

  with output_folders.sole_writer(args.output_dir, 'searchless-convert', 'output_dir'):
    existing = convert.existing(args.output_dir, outputs)
    with beam_job.dataset_job(args.output_dir, existing=existing, overwrite=True, flag='output_dir'):
      beam_job.run_pipeline(p)
      return convert.summary(
        args.input, args.output_dir, args.to, list(outputs), in_records, args.skip_bad_boards, start
      )


def main(argv: Sequence[str] | None = None) -> None:
  """``searchless-convert``: `run` as a console command (one-line errors), then its summary."""
  logging.getLogger().setLevel(logging.WARNING)
  with errors.one_line_errors():
    summary = run(argv)
  print(summary.lines())


if __name__ == '__main__':
  main()
