"""Loader throughput: records/s decoded + tokenized + batched, ours vs the reference's.

    /tmp/venv/bin/python benchmarks/loader.py --reference /tmp/ref      # ~2 min
    /tmp/venv/bin/python benchmarks/loader.py --seconds 3 --workers 0  # smoke run, no reference

Both loaders read the same action_value bag (by default ~200k synthetic but
valid records: the boards of the compat sample and random continuations of
them, every legal move, random win probabilities; written once to /tmp) with a
shuffle and batch 1024, and are timed in steady state (after a few warm-up
batches, so worker start-up is excluded). The reference loader is the published
``searchless_chess/src/data_loader.py`` imported from ``--reference`` (a
directory holding ``searchless_chess/src/*.py``, materialised from the upstream
repository; never part of this project); without it that comparison is
skipped. Before timing, the two loaders' unshuffled first batches are compared.

To materialise the reference (it needs jaxtyping and dm-haiku installed)::

    R=path/to/google-deepmind/searchless_chess  D=/tmp/ref/searchless_chess/src
    mkdir -p $D && touch $D/../__init__.py $D/__init__.py
    for f in bagz config constants data_loader tokenizer utils; do git -C $R show HEAD:src/$f.py > $D/$f.py; done
"""

import argparse
import gc
import os
import pathlib
import platform
import random
import sys
import tempfile
import time

from absl import flags
import chess
import numpy as np

from searchless.core import bags
from searchless.data import loader as loader_lib
from searchless.data import sequences as sequences_lib
from searchless.core import records

ROOT = pathlib.Path(__file__).resolve().parents[1]
COMPAT_BAG = ROOT.parent / 'shared' / 'compat' / 'action_value_sample.bag'


def make_bag(path: pathlib.Path, num_records: int, seed: int = 0) -> None:
  """Writes `num_records` valid action_value records grown from the compat sample's boards."""
  rng = random.Random(seed)
  if COMPAT_BAG.exists():
    seeds = sorted({r.fen for r in bags.read_records(str(COMPAT_BAG), 'action_value')})
  else:
    seeds = [chess.STARTING_FEN]
  items, boards = [], 0
  while len(items) < num_records:
    board = chess.Board(seeds[boards % len(seeds)])
    for _ in range(rng.randrange(0, 40)):  # A random continuation of a sample board.
      legal = list(board.legal_moves)
      if not legal:
        break
      board.push(rng.choice(legal))
    boards += 1
    fen = board.fen()
    for move in board.legal_moves:
      items.append((fen, move.uci(), rng.random()))
  path.parent.mkdir(parents=True, exist_ok=True)
  bags.write_records(str(path), 'action_value', items[:num_records])


def rate(batches, batch_size: int, seconds: float, warmup: int = 3) -> tuple[float, int]:
  """Records/s over >= `seconds` of steady state; returns (rate, batches timed)."""
  for _ in range(warmup):
    next(batches)
  count, start = 0, time.perf_counter()
  while True:
    batch = next(batches)
    sequences = batch[0] if isinstance(batch, tuple) else batch
    assert sequences.shape[0] == batch_size, sequences.shape
    count += 1
    elapsed = time.perf_counter() - start
    if elapsed >= seconds:
      return count * batch_size / elapsed, count


def ours(bag: str, batch_size: int, shuffle: bool, worker_count: int):
  return iter(
    loader_lib.build_loader(
      bag,
      policy='action_value',
      num_return_buckets=128,
      batch_size=batch_size,
      shuffle=shuffle,
      seed=0,
      num_epochs=None,
      worker_count=worker_count,
    )
  )


def reference(location: str, bag: str, batch_size: int, shuffle: bool):
  """The reference loader (its `build_data_loader`, unchanged) over `bag`.

  It reads ``../data/train/action_value_data.bag`` relative to the working
  directory, so we run it from a scratch directory where that path links to `bag`.
  """
  sys.path.insert(0, location)
  from searchless_chess.src import config as config_lib  # pylint: disable=g-import-not-at-top
  from searchless_chess.src import data_loader  # pylint: disable=g-import-not-at-top

  scratch = pathlib.Path(tempfile.mkdtemp(prefix='ref-loader-'))
  (scratch / 'data' / 'train').mkdir(parents=True)
  (scratch / 'data' / 'train' / 'action_value_data.bag').symlink_to(os.path.abspath(bag))
  (scratch / 'cwd').mkdir()
  config = config_lib.DataConfig(
    batch_size=batch_size,
    shuffle=shuffle,
    seed=0,
    worker_count=0,
    num_return_buckets=128,
    split='train',
    policy='action_value',
  )
  here = os.getcwd()
  os.chdir(scratch / 'cwd')
  try:
    return iter(data_loader.build_data_loader(config))
  finally:
    os.chdir(here)


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument(
    '--bag',
    default='/tmp/searchless-bench/action_value_200k_data.bag',
    help='action_value bag to read (written first if missing)',
  )
  p.add_argument('--records', type=int, default=200_000, help='records to write when --bag is missing')
  p.add_argument('--batch_size', type=int, default=1024)
  p.add_argument('--seconds', type=float, default=15.0, help='steady-state seconds per measurement')
  p.add_argument('--reference', default='/tmp/ref', help='directory holding searchless_chess/src/data_loader.py')
  p.add_argument('--workers', default='0,1,2', help='worker counts of our loader to time')
  args = p.parse_args()
  flags.FLAGS.mark_as_parsed()  # This program's flags are argparse's; grain's workers read absl's defaults.

  bag = pathlib.Path(args.bag)
  if not bag.exists():
    start = time.perf_counter()
    make_bag(bag, args.records)
    print(f'wrote {args.records} records to {bag} in {time.perf_counter() - start:.1f}s')
  size = len(bags.reader(str(bag)))
  print(f'machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}')
  print(
    f'bag: {bag} ({size} records, {bag.stat().st_size / size:.1f} bytes/record); batch {args.batch_size}, '
    f'shuffled, {args.seconds:.0f}s steady state per figure'
  )

  raw = bags.reader(str(bag)).read_indices(np.arange(args.batch_size))
  start, repeats = time.perf_counter(), 50
  for _ in range(repeats):
    sequences_lib.to_sequences('action_value', raw, 128)
  core = repeats * args.batch_size / (time.perf_counter() - start)
  start = time.perf_counter()
  for data in raw[:200]:
    records.decode('action_value', data)
  beam = 200 / (time.perf_counter() - start)
  print(
    f'  decode+tokenize alone (sequences_lib.to_sequences, no grain): {core:,.0f} records/s '
    f'(Beam records.decode alone: {beam:,.0f} records/s)'
  )

  have_reference = (pathlib.Path(args.reference) / 'searchless_chess' / 'src' / 'data_loader.py').exists()
  if have_reference:
    ref_first = next(reference(args.reference, str(bag), args.batch_size, shuffle=False))[0]
    our_first = next(ours(str(bag), args.batch_size, shuffle=False, worker_count=0))
    same = np.array_equal(ref_first, our_first)
    print(
      f'  parity, unshuffled first batch: {"identical values" if same else "DIFFERENT"} '
      f'(reference {ref_first.shape} {ref_first.dtype}, ours {our_first.shape} {our_first.dtype})'
    )
  else:
    print(
      f'  reference loader not found under {args.reference!r}: skipping the comparison '
      '(materialise searchless_chess/src/*.py there)'
    )

  results = {}
  if have_reference:
    batches = reference(args.reference, str(bag), args.batch_size, shuffle=True)
    results['reference'], n = rate(batches, args.batch_size, args.seconds, warmup=2)
    del batches
    print(f'  reference, worker_count=0: {results["reference"]:>10,.0f} records/s ({n} batches)')
  for workers in [int(w) for w in args.workers.split(',')]:
    batches = ours(str(bag), args.batch_size, shuffle=True, worker_count=workers)
    results[workers], n = rate(batches, args.batch_size, args.seconds, warmup=3 + 2 * workers)
    del batches  # Stops its worker processes before the next measurement.
    gc.collect()
    line = f'  ours,      worker_count={workers}: {results[workers]:>10,.0f} records/s ({n} batches)'
    if 'reference' in results:
      line += f'  = {results[workers] / results["reference"]:.1f}x the reference'
    print(line)


if __name__ == '__main__':
  main()
