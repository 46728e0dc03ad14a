r"""Build the puzzle evaluation set and measure its overlap with a training set.

    python -m pipelines.puzzles --puzzles lichess_db_puzzle.csv.zst \
        --output eval/puzzles.csv --train_dir data/train --remove_train_overlap

reads the puzzles (Lichess or ChessBench CSV layout, see `searchless.puzzles`),
writes the kept ones to ``--output`` in the Lichess columns, counts the puzzles
whose start board (the board the solver faces first: the puzzle FEN after the
opponent's move ``Moves[0]``) occurs in the ChessBench training records, and
with ``--remove_train_overlap`` leaves those out. Boards are compared by FEN
without the move clocks (piece placement, side to move, castling rights, en
passant square as python-chess writes it: only when a capture is legal, as the
ChessBench FENs). The paper reports 1.33% of its puzzle start boards in train.
A summary goes to stdout and to ``<output>.json``.

``--train_dir`` takes a directory holding ``state_value_data.bag`` (or the
``behavioral_cloning`` / ``action_value`` records, files or shards; the first
found in that order is used), or a bag spec: a file, an ``@N`` spec, a glob or
a comma list; the record kind is then read from the file name (or
``--train_kind``).

A plain streaming script, not a Beam job: a puzzle file has at most a few
million rows, so only the puzzles' start-board keys are held in memory and the
training records are streamed once past them (an action_value set repeats a
board once per legal move; each distinct board is looked up once, so nothing
is counted twice). Paths go through Beam's `FileSystems`, so ``gs://`` works.
"""

import argparse
import collections
import csv
import io
import json
import sys
import time

from apache_beam.io.filesystems import FileSystems
import tqdm

from searchless import bags
from searchless import puzzles as puzzles_lib
from searchless import records

# The order a --train_dir is searched in: fewest records per board first.
TRAIN_KINDS = ('state_value', 'behavioral_cloning', 'action_value')
COMPARED_BY = 'FEN without the move clocks (placement, side to move, castling, en passant)'


def board_key(fen: str) -> str:
  """The FEN without its halfmove clock and fullmove number.

  >>> board_key('8/8/8/8/8/8/8/K1k5 w - - 12 40')
  '8/8/8/8/8/8/8/K1k5 w - -'
  """
  return ' '.join(fen.split(' ', 4)[:4])


def _parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[1].strip(), formatter_class=argparse.ArgumentDefaultsHelpFormatter)
  p.add_argument('--puzzles', required=True, help='puzzle CSV (Lichess lichess_db_puzzle.csv[.zst] or ChessBench puzzles.csv)')
  p.add_argument('--output', required=True, help='the evaluation set to write (CSV in the Lichess columns); the summary goes to OUTPUT.json')
  p.add_argument('--train_dir', default=None, help='ChessBench training records: a directory, a bag file, an @N spec, a glob or a comma list')
  p.add_argument('--train_kind', choices=records.KINDS, default=None, help='record kind of a --train_dir bag spec (default: from its file name)')
  p.add_argument('--remove_train_overlap', action='store_true', help='leave out the puzzles whose start board is in the training set')
  p.add_argument('--limit', type=int, default=None, help='read only the first N puzzles')
  p.add_argument('--no_progress', action='store_true', help='no progress bars')
  return p


def _is_spec(path: str) -> bool:
  name = path.rstrip('/').rsplit('/', 1)[-1]
  return any(c in path for c in '*?[,@') or name.endswith(('.bag', '.bagz'))


def train_spec(path: str, kind: str | None = None) -> tuple[str, str]:
  """Returns (bag spec, record kind) of the training records at `path`."""
  if not _is_spec(path):
    for candidate in ((kind,) if kind else TRAIN_KINDS):
      try:
        return bags.find(path, candidate), candidate
      except FileNotFoundError:
        continue
    raise FileNotFoundError(f'no {kind or "/".join(TRAIN_KINDS)} records in {path}')
  if kind is None:
    first = bags.expand(path).split(',')[0].rsplit('/', 1)[-1]
    kinds = [k for k in records.KINDS if first.startswith(k)]
    if not kinds:
      raise ValueError(f'cannot tell the record kind of {path!r} from its name: pass --train_kind')
    kind = kinds[0]
  return path, kind


def overlapping_keys(spec: str, kind: str, keys, progress: bool = False) -> tuple[set[str], int, int]:
  """Returns (the `keys` that occur in the records, records read, distinct boards looked up).

  Consecutive records with the same FEN (an action_value board's moves) are
  looked up once.
  """
  reader = bags.reader(spec)
  found, read, boards, previous = set(), 0, 0, None
  for data in tqdm.tqdm(reader, total=len(reader), desc='train records', unit='rec', disable=not progress, mininterval=1.0):
    read += 1
    fen = records.decode(kind, data).fen
    if fen == previous:
      continue
    previous = fen
    boards += 1
    key = board_key(fen)
    if key in keys:
      found.add(key)
  return found, read, boards


def _puzzles(args, desc: str):
  return tqdm.tqdm(puzzles_lib.read_puzzles(args.puzzles, args.limit), desc=desc, unit='puzzle',
                   total=args.limit, disable=args.no_progress, mininterval=1.0)


def _write(path: str, rows) -> int:
  """Writes `rows` (dicts) as a CSV in the Lichess columns; returns how many."""
  count = 0
  with FileSystems.create(path) as out:  # Compressed by extension (.gz, .zst, ...).
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=puzzles_lib.LICHESS_COLUMNS, lineterminator='\n')
    writer.writeheader()
    for row in rows:
      writer.writerow(row)
      count += 1
      if buffer.tell() > 1 << 20:
        out.write(buffer.getvalue().encode('utf-8'))
        buffer.seek(0)
        buffer.truncate()
    out.write(buffer.getvalue().encode('utf-8'))
  return count


def run(argv=None) -> dict:
  """Runs the job; returns the summary (also written to OUTPUT.json)."""
  args = _parser().parse_args(argv)
  if args.remove_train_overlap and not args.train_dir:
    raise SystemExit('--remove_train_overlap needs --train_dir')
  start = time.time()
  spec, kind = train_spec(args.train_dir, args.train_kind) if args.train_dir else (None, None)

  # Pass 1: the start-board keys (and, unless some are removed, the output).
  keys = collections.Counter()

  def rows_counting_keys():
    for puzzle in _puzzles(args, 'puzzles'):
      keys[board_key(puzzle.start_fen)] += 1
      yield puzzle.lichess_row()

  if args.remove_train_overlap:
    collections.deque(rows_counting_keys(), maxlen=0)
  else:
    _write(args.output, rows_counting_keys())
  read = sum(keys.values())

  found, train_read, train_boards = set(), 0, 0
  if spec:
    found, train_read, train_boards = overlapping_keys(spec, kind, keys, progress=not args.no_progress)
  overlap = sum(keys[k] for k in found)

  kept = read
  if args.remove_train_overlap:  # Pass 2: write the puzzles whose start board is not in train.
    kept = _write(args.output, (p.lichess_row() for p in _puzzles(args, 'writing')
                                if board_key(p.start_fen) not in found))
  summary = {
      'puzzles': args.puzzles,
      'output': args.output,
      'limit': args.limit,
      'puzzles_read': read,
      'puzzles_kept': kept,
      'train': {'spec': spec, 'kind': kind, 'records': train_read, 'boards': train_boards} if spec else None,
      'compared_by': COMPARED_BY,
      'start_boards_in_train': overlap if spec else None,
      'start_boards_in_train_percent': (100 * overlap / read if read else 0.0) if spec else None,
      'removed': read - kept,
      'wall_seconds': round(time.time() - start, 3),
  }
  with FileSystems.create(args.output + '.json') as f:
    f.write((json.dumps(summary, indent=2) + '\n').encode('utf-8'))
  return summary


def summary_lines(summary: dict) -> str:
  """A few human lines about a finished run."""
  lines = [f"puzzles: {summary['puzzles_read']} read, {summary['puzzles_kept']} kept -> {summary['output']}"]
  if summary['train']:
    t = summary['train']
    lines.append(f"start boards in train ({t['kind']}, {t['records']} records): "
                 f"{summary['start_boards_in_train']} ({summary['start_boards_in_train_percent']:.2f}%), "
                 f"removed {summary['removed']}")
  lines.append(f"summary: {summary['output']}.json")
  return '\n'.join(lines)


def main(argv=None) -> None:
  try:
    summary = run(sys.argv[1:] if argv is None else argv)
  except (puzzles_lib.PuzzleFormatError, FileNotFoundError, ValueError) as e:
    raise SystemExit(f'error: {e}') from None
  print(summary_lines(summary))


if __name__ == '__main__':
  main()
