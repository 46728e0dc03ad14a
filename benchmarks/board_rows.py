"""What a batch of board rows costs the training loader: decoding, and completing partial boards.

    cd /tmp && /work/main/.venv/bin/python /work/main/benchmarks/board_rows.py     # ~1 minute, CPU time

The board-packed transformer and the graph model train on packed board rows
(`searchless.data.packing.packed_rows`), made in the training process from board
records (`worker_count=0` on a CPU: no core to spare). Measured on real boards (the
shared labels' chunk_000, 500 Lichess games, MultiPV labels) in batches of 32, as CPU
seconds of this process (so the figure holds whatever else the machine runs):

* decode: `codecs.decode_boards` (bytes -> `BoardValue`);
* rows, every board checked: `packed_rows(partial=None)`, each board's legal moves
  generated to find partial ones (what the loader did before);
* rows, by the bag's kind: `packed_rows(partial=...)`, as the loader does now: only the
  boards of partial_board_value bags are completed (none here).

Ends with ``rows by kind / every board checked: <X>x CPU per batch``.
"""

import argparse
import pathlib
import platform
import time

import numpy as np

from searchless.core import bags
from searchless.core import codecs
from searchless.core import values
from searchless.data import packing

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _cpu_ms(fn, batches) -> float:
  start = time.process_time()
  for batch in batches:
    fn(batch)
  return 1000 * (time.process_time() - start) / len(batches)


def main(argv=None) -> None:
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument(
    '--bag',
    default=str(ROOT.parent / 'shared' / 'data' / 'labels' / 'chunk_000' / 'train' / 'board_value_data.bagz'),
    help='board_value records',
  )
  p.add_argument('--batches', type=int, default=200, help='batches of 32 boards timed')
  p.add_argument('--max_moves', type=int, default=64, help="move slots per row (the configs')")
  args = p.parse_args(argv)
  reader = bags.reader(args.bag)
  raw = [reader[i] for i in range(min(len(reader), 32 * args.batches))]
  batches = [raw[i : i + 32] for i in range(0, len(raw) - 31, 32)]
  edges, _ = values.uniform_buckets(128)
  decoded = [codecs.decode_boards(b) for b in batches]
  complete = np.zeros(32, bool)
  decode_ms = _cpu_ms(codecs.decode_boards, batches)
  checked_ms = _cpu_ms(lambda b: packing.packed_rows(b, args.max_moves, edges), decoded)
  by_kind_ms = _cpu_ms(lambda b: packing.packed_rows(b, args.max_moves, edges, partial=complete), decoded)
  print(f'machine: {platform.machine()} | {len(batches)} batches of 32 real boards from {args.bag}')
  print(f'decode:                      {decode_ms:6.2f} ms CPU per batch')
  print(f'rows, every board checked:   {checked_ms:6.2f} ms CPU per batch (+ decode: {decode_ms + checked_ms:.2f})')
  print(f"rows, by the bag's kind:     {by_kind_ms:6.2f} ms CPU per batch (+ decode: {decode_ms + by_kind_ms:.2f})")
  print(f'rows by kind / every board checked: {(decode_ms + by_kind_ms) / (decode_ms + checked_ms):.2f}x CPU per batch')


if __name__ == '__main__':
  main()
