r"""Convert between ChessBench bags and board records (`searchless.boards`).

    searchless-convert 'out/train/action_value*' boards_out --to board
    searchless-convert boards_out/board_value_data.bag chessbench_out --to chessbench

``--to board``: action-value records (ours or the published files; the records
of one board may be anywhere in the input) -> ``OUTPUT_DIR/board_value_data.bag``,
one record per board. Each board's value comes from ``--state_values SPEC``
(state-value records) when given, else from its best move. A board whose moves
are not exactly its legal moves stops the job with its FEN and what is wrong
(all of them listed in ``OUTPUT_DIR/bad_boards.jsonl``), unless
``--skip_bad_boards`` (then they are counted and left out).

``--to chessbench``: board records -> ``OUTPUT_DIR/action_value_data.bag``,
``state_value_data.bag`` and ``behavioral_cloning_data.bag``, named as the
annotation pipeline names them.

Exact both ways: action-value -> board -> action-value gives the same set of
records with identical float values. Runs on the DirectRunner by default; any
Beam runner with the usual options (``--runner DataflowRunner ...``) for the
published dataset's size. Writes ``OUTPUT_DIR/convert.json`` (counts, bytes per
action-value of input and output).
"""

import argparse
import json
import logging
import sys
import time

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions
from bagz.beam import bagzio

from searchless import bags
from searchless import boards as boards_lib
from searchless import dataset
from searchless import manifest as manifest_lib
from searchless import records

TARGETS = ('board', 'chessbench')
_INPUT_KIND = {'board': 'action_value', 'chessbench': records.BOARD_VALUE}


def _parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(prog='searchless-convert', description=__doc__.split('\n\n')[0])
  p.add_argument('input', help='bag spec of the input records: file, name@N_data.bag, glob or comma list')
  p.add_argument('output_dir', help='where the converted bag(s), convert.json and bad_boards.jsonl go')
  p.add_argument('--to', required=True, choices=TARGETS, help='board: action-value -> board records; chessbench: board records -> the three ChessBench datasets')
  p.add_argument('--state_values', default=None, help='--to board: state-value records giving each board its value (default: its best move\'s)')
  p.add_argument('--skip_bad_boards', action='store_true', help='--to board: leave out (and count) boards whose moves are not exactly their legal moves, instead of failing')
  p.add_argument('--num_shards', type=int, default=1, help='shards per output record set (1 = one <kind>_data.bag)')
  p.add_argument('--compress', action='store_true', help='write zstd-compressed .bagz')
  return p


def _size(spec: str) -> int:
  paths = bags.expand(spec).split(',')
  return sum(m.size_in_bytes for p in paths for m in FileSystems.match([p])[0].metadata_list)


def _first_kind_check(spec: str, kind: str) -> int:
  """Number of records in `spec`; raises ValueError naming the spec unless they are `kind`."""
  reader = bags.reader(spec)
  if not len(reader):
    raise ValueError(f'{spec!r} holds no records')
  dataset.check_kind(spec, kind, reader)
  return len(reader)


def run(argv=None) -> dict:
  """Runs the conversion; returns the summary (also written to OUTPUT_DIR/convert.json)."""
  args, beam_args = _parser().parse_known_args(argv)
  if args.to == 'chessbench' and (args.state_values or args.skip_bad_boards):
    raise ValueError('--state_values and --skip_bad_boards apply to --to board only')
  in_kind = _INPUT_KIND[args.to]
  in_records = _first_kind_check(args.input, in_kind)
  if args.state_values:
    _first_kind_check(args.state_values, 'state_value')
  out = args.output_dir
  start = time.time()

  with beam.Pipeline(options=PipelineOptions(beam_args)) as pipeline:
    def read(label, spec, kind):  # Records as `records` types.
      return (pipeline | f'Read[{label}]' >> bagzio.ReadFromBagz(bags.expand(spec))
              | f'Decode[{label}]' >> beam.Map(lambda data, k: records.decode(k, data), kind))

    if args.to == 'board':
      state_values = read('state_value', args.state_values, 'state_value') if args.state_values else None
      grouped = read('action_value', args.input, 'action_value') | 'GroupIntoBoards' >> boards_lib.GroupIntoBoards(state_values)
      outputs = {records.BOARD_VALUE: grouped.boards}
      (grouped[boards_lib.BAD]
       | 'BadToJson' >> beam.Map(lambda b: json.dumps(b, sort_keys=True))
       | 'WriteBad' >> beam.io.WriteToText(FileSystems.join(out, 'bad_boards'), file_name_suffix='.jsonl',
                                           shard_name_template=''))
    else:
      outputs = read('board_value', args.input, records.BOARD_VALUE) | 'ToChessBench' >> boards_lib.BoardsToChessBench()
    for kind, pcoll in outputs.items():
      pcoll | f'Write[{kind}]' >> bagzio.WriteToBagz(
          bags.sink_path(out, kind, args.num_shards, args.compress), coder=records.CODERS[kind])

  written = {kind: bags.find(out, kind) for kind in outputs}
  counts = {kind: len(bags.reader(spec)) for kind, spec in written.items()}
  bad = []
  if args.to == 'board':
    with FileSystems.open(FileSystems.join(out, 'bad_boards.jsonl')) as f:
      bad = [json.loads(line) for line in f.read().decode('utf-8').splitlines() if line]
  action_values = in_records if args.to == 'board' else counts['action_value']
  board_spec = written.get(records.BOARD_VALUE, args.input)
  av_spec = args.input if args.to == 'board' else written['action_value']
  summary = {
      'format': 'searchless-convert/1',
      'code': manifest_lib.code_version(),
      'input': args.input,
      'output_dir': out,
      'to': args.to,
      'input_records': in_records,
      'outputs': {kind: {'files': spec.split(','), 'records': counts[kind]} for kind, spec in written.items()},
      'bad_boards': len(bad),
      'action_values': action_values,
      'bytes_per_action_value': {
          'action_value': _size(av_spec) / max(action_values, 1),
          'board_value': _size(board_spec) / max(action_values, 1),
      },
      'wall_seconds': round(time.time() - start, 3),
  }
  if bad and not args.skip_bad_boards:
    FileSystems.delete([p for spec in written.values() for p in spec.split(',')])
    first = bad[0]
    raise ValueError(
        f'{len(bad)} board(s) of {args.input!r} have moves that are not exactly their legal moves'
        f' (first: {first["fen"]!r}: {first["reason"]}); all listed in'
        f' {FileSystems.join(out, "bad_boards.jsonl")}; --skip_bad_boards converts the others')
  manifest_lib.write(FileSystems.join(out, 'convert.json'), summary)
  return summary


def main(argv=None) -> None:
  logging.getLogger().setLevel(logging.WARNING)
  try:
    summary = run(argv)
  except (FileNotFoundError, ValueError) as e:
    sys.exit(f'error: {e}')
  b = summary['bytes_per_action_value']
  print(f"{summary['input_records']} records -> " + ', '.join(
      f"{o['records']} {kind}" for kind, o in summary['outputs'].items())
        + (f", {summary['bad_boards']} bad boards left out" if summary['bad_boards'] else ''))
  print(f"bytes per action-value: action_value {b['action_value']:.1f}, board_value {b['board_value']:.1f}"
        f" ({b['action_value'] / b['board_value']:.2f}x smaller)")
  print(f"wrote {', '.join(f for o in summary['outputs'].values() for f in o['files'])};"
        f" summary {FileSystems.join(summary['output_dir'], 'convert.json')}")


if __name__ == '__main__':
  main(sys.argv[1:])
