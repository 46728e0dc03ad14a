r"""The puzzle evaluation set: puzzles kept from a CSV, and their overlap with a training set.

`run` reads the puzzles (Lichess or ChessBench CSV layout, see
`searchless.data.puzzles`), writes the kept ones to `output` in the Lichess
columns, counts the puzzles whose start board (the board the solver faces
first: the puzzle FEN after the opponent's move ``Moves[0]``) occurs in the
ChessBench training records, and with `remove_train_overlap` leaves those out.
Boards are compared by FEN without the move clocks (piece placement, side to
move, castling rights, en passant square as python-chess writes it: only when a
capture is legal, as the ChessBench FENs). The paper reports 1.33% of its
puzzle start boards in train. The summary (`PuzzleSetSummary`) also goes to
``<output>.json``.

The training records (`train_spec`) are a directory holding
``state_value_data.bag`` (or the ``behavioral_cloning`` / ``action_value``
records, files or shards; the first found in that order is used), or a bag
spec: a file, an ``@N`` spec, a glob or a comma list; the record kind is then
read from the file name (or given).

A plain streaming job, not a Beam one: a puzzle file has at most a few million
rows, so only the puzzles' start-board keys are held in memory and the training
records are streamed once past them (an action_value set repeats a board once
per legal move; each distinct board is looked up once, so nothing is counted
twice). Paths go through Beam's `FileSystems`, so ``gs://`` works. A board's key is its position
(`splits.dedup_key`: the FEN without the move clocks).
"""

import collections
from collections.abc import Collection, Iterable, Iterator
import csv
import dataclasses
import io
import json
import time
from typing import Any, cast

from apache_beam.io.filesystems import FileSystems

from searchless.core import bags
from searchless.core import records
from searchless.data import puzzles as puzzles_lib
from searchless.data import splits
from searchless.plumbing import errors
from searchless.plumbing import progress_bars

# The order a training directory is searched in: fewest records per board first.
TRAIN_KINDS = ('state_value', 'behavioral_cloning', 'action_value')
COMPARED_BY = 'FEN without the move clocks (placement, side to move, castling, en passant)'
_Record = records.ActionValue | records.StateValue | records.BehavioralCloning | records.BoardValue


@dataclasses.dataclass(frozen=True)
class PuzzleSetSummary:
  """What `run` read, kept and found in train (``<output>.json``, in this field order)."""

  puzzles: str  # The puzzle CSV read.
  output: str  # The evaluation set written.
  limit: int | None  # Only the first N puzzles were read.
  puzzles_read: int
  puzzles_kept: int
  train: dict[str, Any] | None  # spec, kind, records, boards of the training set (None without one).
  compared_by: str  # How boards are compared (COMPARED_BY).
  start_boards_in_train: int | None  # Puzzles whose start board is in train (None without a training set).
  start_boards_in_train_percent: float | None
  removed: int  # Puzzles left out (remove_train_overlap).
  wall_seconds: float

  def to_dict(self) -> dict[str, Any]:
    return dataclasses.asdict(self)

  def lines(self) -> str:
    """A few human lines about the run."""
    lines = [f'puzzles: {self.puzzles_read} read, {self.puzzles_kept} kept -> {self.output}']
    if self.train:
      t = self.train
      lines.append(
        f'start boards in train ({t["kind"]}, {t["records"]} records): '
        f'{self.start_boards_in_train} ({self.start_boards_in_train_percent:.2f}%), '
        f'removed {self.removed}'
      )
    lines.append(f'summary: {self.output}.json')
    return '\n'.join(lines)


def _is_spec(path: str) -> bool:
  name = path.rstrip('/').rsplit('/', 1)[-1]
  return any(c in path for c in '*?[,@') or name.endswith(('.bag', '.bagz'))


def train_spec(path: str, kind: str | None = None) -> tuple[str, str]:
  """Returns (bag spec, record kind) of the training records at `path` (a directory or a bag spec)."""
  if not _is_spec(path):
    for candidate in (kind,) if kind else TRAIN_KINDS:
      try:
        return bags.find(path, candidate), candidate
      except FileNotFoundError:
        continue
    raise errors.MissingInput(f'no {kind or "/".join(TRAIN_KINDS)} records in {path}')
  if kind is None:
    first = bags.expand(path).split(',')[0].rsplit('/', 1)[-1]
    kinds = [k for k in records.KINDS if first.startswith(k)]
    if not kinds:
      raise errors.BadInput(f'cannot tell the record kind of {path!r} from its name: pass --train_kind')
    kind = kinds[0]
  return path, kind


def overlapping_keys(spec: str, kind: str, keys: Collection[str], progress: bool = False) -> tuple[set[str], int, int]:
  """Returns (the `keys` that occur in the records, records read, distinct boards looked up).

  Consecutive records with the same FEN (an action_value board's moves) are
  looked up once.
  """
  reader = bags.reader(spec)
  found, read, boards, previous = set(), 0, 0, None
  for data in progress_bars.bar(
    reader, total=len(reader), desc='train records', unit='rec', disable=not progress, mininterval=1.0
  ):
    read += 1
    # records.decode is annotated as returning a NamedTuple; every record type has `fen`.
    record = cast(_Record, records.decode(kind, data))
    fen = record.fen
    if fen == previous:
      continue
    previous = fen
    boards += 1
    key = splits.dedup_key(fen, 'position')
    if key in keys:
      found.add(key)
  return found, read, boards


def write_lichess_csv(path: str, rows: Iterable[dict[str, str]]) -> int:
  """Writes `rows` (dicts) as a CSV in the Lichess columns, compressed by extension; returns how many."""
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


def run(
  puzzles: str,
  output: str,
  *,
  train_dir: str | None = None,
  train_kind: str | None = None,
  remove_train_overlap: bool = False,
  limit: int | None = None,
  progress: bool = True,
) -> PuzzleSetSummary:
  """Writes the evaluation set `output` from the puzzle CSV `puzzles` (see the module docstring).

  Args:
    puzzles: puzzle CSV (Lichess ``lichess_db_puzzle.csv[.zst]`` or ChessBench ``puzzles.csv``).
    output: the evaluation set to write (CSV in the Lichess columns); the summary goes to OUTPUT.json.
    train_dir: ChessBench training records (`train_spec`); None skips the overlap count.
    train_kind: record kind of a `train_dir` bag spec (default: from its file name).
    remove_train_overlap: leave out the puzzles whose start board is in the training set.
    limit: read only the first N puzzles.
    progress: show progress bars.
  """
  if remove_train_overlap and not train_dir:
    raise errors.BadInput('--remove_train_overlap needs --train_dir')
  start = time.time()
  spec, kind = train_spec(train_dir, train_kind) if train_dir else (None, None)

  def read(desc: str) -> Iterator[puzzles_lib.Puzzle]:
    return progress_bars.bar(
      puzzles_lib.read_puzzles(puzzles, limit),
      desc=desc,
      unit='puzzle',
      total=limit,
      disable=not progress,
      mininterval=1.0,
    )

  # Pass 1: the start-board keys (and, unless some are removed, the output).
  keys: collections.Counter[str] = collections.Counter()

  def rows_counting_keys() -> Iterator[dict[str, str]]:
    for puzzle in read('puzzles'):
      keys[splits.dedup_key(puzzle.start_fen, 'position')] += 1
      yield puzzle.lichess_row()

  if remove_train_overlap:
    collections.deque(rows_counting_keys(), maxlen=0)
  else:
    write_lichess_csv(output, rows_counting_keys())
  read_count = sum(keys.values())

  found: set[str] = set()
  train_read = train_boards = 0
  if spec and kind is not None:  # kind is set whenever spec is.
    found, train_read, train_boards = overlapping_keys(spec, kind, keys, progress=progress)
  overlap = sum(keys[k] for k in found)

  kept = read_count
  if remove_train_overlap:  # Pass 2: write the puzzles whose start board is not in train.
    kept = write_lichess_csv(
      output, (p.lichess_row() for p in read('writing') if splits.dedup_key(p.start_fen, 'position') not in found)
    )
  summary = PuzzleSetSummary(
    puzzles=puzzles,
    output=output,
    limit=limit,
    puzzles_read=read_count,
    puzzles_kept=kept,
    train={'spec': spec, 'kind': kind, 'records': train_read, 'boards': train_boards} if spec else None,
    compared_by=COMPARED_BY,
    start_boards_in_train=overlap if spec else None,
    start_boards_in_train_percent=(100 * overlap / read_count if read_count else 0.0) if spec else None,
    removed=read_count - kept,
    wall_seconds=round(time.time() - start, 3),
  )
  with FileSystems.create(output + '.json') as f:
    f.write((json.dumps(summary.to_dict(), indent=2) + '\n').encode('utf-8'))
  return summary
