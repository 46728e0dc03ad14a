"""The label import's transforms (`Read`, `Parse`, `MergePerBoard`, `ToRecords`), its `plan` and options; its
driver, `searchless.pipelines.import_labels`, shows the graph.

    game dumps --Read--> texts --Parse (SkipKept, Distribute, parse with evals)--> (split, Labelled) | Skip
    eval db    --Read--> lines --Parse (SkipKept, Distribute, parse the line)--> (split, Labelled) | Skip
      --MergePerBoard (per split and board)--> one Labelled per board
      --ToRecords--> state_value / behavioral_cloning / partial_board_value --WriteShards--> pieces

The parses are kept as they are made (`searchless.data.resume`): a rerun after an interrupt parses only the rest,
while the inputs are unchanged (`searchless.pipelines.import_labels` refuses a rerun on a changed input).
"""

from collections.abc import Callable, Iterator, Sequence
import dataclasses
import functools
import os
from typing import Any, ClassVar

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.pvalue import PBegin, PCollection

from searchless.core import bags
from searchless.core import records
from searchless.data import games
from searchless.data import import_merge
from searchless.data import job_options
from searchless.data import job_results
from searchless.data import lichess_evals
from searchless.data import pgn
from searchless.data import resume
from searchless.data import shards
from searchless.data import splits
from searchless.data import streams
from searchless.plumbing import errors

KINDS = tuple(lichess_evals.RECORDS_OF)  # state_value, behavioral_cloning, partial_board_value.
EVAL_DB_BYTES_PER_BOARD = 400  # About one line of lichess_db_eval.jsonl (uncompressed): shard estimates.


def is_eval_db(path: str) -> bool:
  """Whether `path` is an evaluation-database file (JSON lines, any compression) rather than a game dump."""
  return '.jsonl' in os.path.basename(path).lower()


@dataclasses.dataclass(frozen=True)
class ImportOptions(job_options.DatasetOptions):
  """What to import and how to write it (the flags of ``searchless-import``): the dataset jobs' options (whose
  inputs are game dumps, .pgn[.zst], and evaluation databases, .jsonl[.zst]) and these."""

  records: str = ','.join(KINDS)  # Comma-separated record kinds to write (a subset of KINDS).
  max_lines: int | None = None  # Lines read from each evaluation database at most (its first N).
  chunk_games: int = resume.DEFAULT_CHUNK_GAMES  # A worker commits its parsed games (or lines) every this many.

  POSITIVE: ClassVar[tuple[str, ...]] = (*job_options.DatasetOptions.POSITIVE, 'max_lines', 'chunk_games')

  def __post_init__(self):
    super().__post_init__()
    unknown = [k for k in self.kinds if k not in KINDS]
    if unknown or not self.kinds:
      raise errors.BadInput(f'--records {self.records!r}: expected a comma-separated subset of {", ".join(KINDS)}')

  @property
  def kinds(self) -> tuple[str, ...]:
    return tuple(k.strip() for k in self.records.split(',') if k.strip())


@dataclasses.dataclass(frozen=True)
class EvalLine:
  """One line of an evaluation database and where it was found."""

  location: str  # path:line
  text: str


class ReadEvalLines(beam.DoFn):
  """Streams an evaluation database and emits its non-empty lines (`EvalLine`), in file order."""

  def __init__(self, max_lines: int | None, skip_corrupt: bool):
    self._max_lines, self._skip_corrupt = max_lines, skip_corrupt

  def process(self, path: str) -> Iterator[EvalLine | games.CorruptInput]:
    read = 0
    try:
      for number, data in enumerate(streams.read_lines(path), start=1):
        if self._max_lines is not None and read >= self._max_lines:
          break
        if data.strip():
          read += 1
          yield EvalLine(f'{path}:{number}', data.decode('utf-8', errors='replace'))
    except streams.CorruptInputError:
      if not self._skip_corrupt:
        raise
      yield games.CorruptInput(path)


NO_EVALS = 'no_evals'  # The skip reason of a game without an [%eval] comment: nothing to import from it.
GAME_SKIP_REASONS = (*pgn.SKIP_REASONS, NO_EVALS)


def _parse_with_evals(raw: pgn.RawGame, game_filter: pgn.GameFilter) -> pgn.Game | pgn.Skip:
  """A game with its [%eval] comments, or why it was skipped (a game with none is skipped as NO_EVALS)."""
  game = pgn.parse_game(raw, game_filter, with_evals=True)
  if isinstance(game, pgn.Skip) or any(game.evals):
    return game
  return pgn.Skip(NO_EVALS, raw.location, 'no [%eval] comment')


def input_paths(options: ImportOptions) -> list[str]:
  """The files the inputs (files, globs, URLs; repeated or comma-separated) name; a pattern matching none is an
  error naming it."""
  return streams.match_files([part for value in options.input for part in value.split(',') if part], 'input')


def plan(o: ImportOptions, paths: Sequence[str]) -> job_results.JobPlan:
  """The plan of the import `o` asks for, of the input files `paths` (`input_paths`): its sources ('games': game
  dumps, 'eval_db': evaluation databases), splits, and each output set with the shards it gets when sharded by size."""
  inputs = {'games': [p for p in paths if not is_eval_db(p)], 'eval_db': [p for p in paths if is_eval_db(p)]}
  split_names = ['train'] + (['test'] if o.test_fraction > 0 else [])
  ext = bags.extension(o.compress)
  estimated = (
    shards.pgn_bytes(inputs['games'], o.max_games) / shards.PGN_BYTES_PER_BOARD
    + shards.pgn_bytes(inputs['eval_db']) / EVAL_DB_BYTES_PER_BOARD
  )  # Boards, about.
  outputs: list[job_results.OutputSet] = []
  record_sets: list[shards.RecordSet] = []
  for split in split_names:
    share = estimated * (o.test_fraction if split == 'test' else 1 - o.test_fraction)
    for kind in o.kinds:
      spec = shards.ShardSpec(FileSystems.join(o.output_dir, split), kind, ext, o.num_shards)
      buckets = shards.auto_buckets(share * shards.PGN_BYTES_PER_BOARD, 1, o.records_per_shard)
      outputs.append(job_results.OutputSet(spec, split, kind))
      record_sets.append(
        shards.RecordSet(spec, functools.partial(records.encode, kind), _board, buckets, o.records_per_shard)
      )
  skips = shards.ShardSpec(o.output_dir, 'skipped', '.jsonl')
  outputs.append(job_results.OutputSet(skips, None, 'skipped'))
  record_sets.append(shards.RecordSet(skips, games.skip_line, _location))
  results_path = job_results.results_path(o.output_dir)
  return job_results.JobPlan(o.output_dir, inputs, o.test_fraction, split_names, outputs, record_sets, results_path)


def _board(record: tuple) -> str:
  return record[0]


def _location(item: pgn.RawGame | EvalLine | pgn.Skip) -> str:
  return item.location


KIND = {'games': 'games', 'eval_db': 'lines'}  # What a source holds: how its parses are counted and kept.


class Read(beam.PTransform):
  """The files of a source ('games' or 'eval_db') -> its game texts (`pgn.RawGame`) or database lines (`EvalLine`),
  in file order. After `expand`, `counts` is the collection of its counts (read; corrupt files)."""

  def __init__(self, source: str, options: ImportOptions):
    super().__init__()
    self._source, self._options = source, options

  def expand(self, files: PCollection) -> PCollection:
    o, kind = self._options, KIND[self._source]
    if self._source == 'games':
      read = files | 'ReadGames' >> beam.ParDo(games.ReadGames(o.max_games, o.skip_corrupt_inputs))
    else:
      read = files | 'ReadEvalLines' >> beam.ParDo(ReadEvalLines(o.max_lines, o.skip_corrupt_inputs))
    self.counts = read | 'CountRead' >> beam.Map(
      lambda r, k: ('corrupt_input_files' if isinstance(r, games.CorruptInput) else f'{k}_read', 1), kind
    )
    return read | 'Texts' >> beam.Filter(lambda r: not isinstance(r, games.CorruptInput))


def _game_boards(item: pgn.Game | pgn.Skip, fraction: float) -> Iterator[Any]:  # (split, Labelled) | Skip
  """A parsed game's boards with their evaluations, each with the game's split; or its Skip."""
  if isinstance(item, pgn.Skip):
    yield item
    return
  split = splits.split_of(item.key, fraction)
  for board in lichess_evals.from_game(item):
    yield split, board


def _line_board(item: EvalLine, fraction: float, by: str) -> Any:  # (split, Labelled) | Skip
  """A database line's board with its evaluations and the split its board hashes to; or why it was skipped."""
  board = lichess_evals.from_eval_line(item.text, item.location)
  if isinstance(board, pgn.Skip):
    return board
  return splits.split_of(splits.dedup_key(board.fen, by), fraction), board


class Parse(beam.PTransform):
  """A source's texts (`Read`) -> (split, `lichess_evals.Labelled`): each parsed on a worker and committed as it goes
  (`resume.Recorded`), except those an interrupted run kept (`resume.SkipKept` on `kept`, read from `pbegin`).

  After `expand`: `counts` is the collection of its counts (parsed in this run, ``parsed/<kind>``; reused,
  ``kept/<kind>``; kept and skipped), `skipped` that of its `pgn.Skip`s, and `notes` that of the kept pieces
  dropped as unreadable, or None.
  """

  def __init__(self, source: str, options: ImportOptions, kept: Sequence[str], pbegin: PBegin):
    super().__init__()
    self._source, self._options, self._kept, self._pbegin = source, options, list(kept), pbegin
    self.notes: PCollection | None = None

  def expand(self, items: PCollection) -> PCollection:
    o, kind = self._options, KIND[self._source]
    if self._source == 'games':
      step: Callable = functools.partial(_parse_with_evals, game_filter=o.game_filter())
    else:
      step = functools.partial(_line_board, fraction=o.test_fraction, by=o.dedup_by)
    skip_kept = resume.SkipKept(resume.pieces_of_kind(self._kept, kind), _location, self._pbegin)
    resolved = items | 'SkipKept' >> skip_kept
    recorded = resume.Recorded(step, _location, resume.folder(o.output_dir), kind, o.chunk_games)
    parsed = (
      resolved
      | 'ToDo' >> beam.Filter(lambda t: t[0] == 'todo')
      | 'Items' >> beam.Map(lambda t: t[1])
      | 'Distribute' >> games.Distribute(_location, o.parallelism)
      | 'Parse' >> beam.ParDo(recorded).with_output_types(Any)
    )
    reused = resolved | 'Kept' >> beam.Filter(lambda t: t[0] == 'kept') | 'KeptResults' >> beam.Map(lambda t: t[2])
    results = (parsed, reused) | 'AllParsed' >> beam.Flatten()  # Games (or Skips); database boards (or Skips).
    every = results | 'GameBoards' >> beam.FlatMap(_game_boards, o.test_fraction) if kind == 'games' else results
    if skip_kept.dropped is not None:
      what = f'parsed {kind}'
      self.notes = skip_kept.dropped | 'Notes' >> beam.Map(lambda r: ('note', resume.dropped_note(r, what)))
    self.skipped = every | 'Skips' >> beam.Filter(lambda x: isinstance(x, pgn.Skip))
    self.counts = (
      parsed | 'CountParsed' >> beam.Map(lambda _, k: (f'parsed/{k}', 1), kind),
      reused | 'CountKept' >> beam.Map(lambda _, k: (f'kept/{k}', 1), kind),
      results
      | 'CountResults'
      >> beam.Map(lambda x, k: (f'{k}_skipped/{x.reason}', 1) if isinstance(x, pgn.Skip) else (f'{k}_kept', 1), kind),
    ) | 'Counts' >> beam.Flatten()
    return every | 'Labelled' >> beam.Filter(lambda x: not isinstance(x, pgn.Skip))


class MergePerBoard(beam.PTransform):
  """(split, Labelled) -> one (split, Labelled) per split and board (`import_merge.MergeBoards`: the deepest
  source's values). After `expand`, `counts` is the collection of its counts (boards seen; boards, move values and
  best moves per split)."""

  def __init__(self, dedup_by: str):
    super().__init__()
    self._by = dedup_by

  def expand(self, labelled: PCollection) -> PCollection:
    by = self._by
    merged = (
      labelled
      | 'KeyBoards' >> beam.Map(lambda sb: ((sb[0], splits.dedup_key(sb[1].fen, by)), sb[1]))
      | 'MergeBoards' >> beam.CombinePerKey(import_merge.MergeBoards())
      | 'SplitBoard' >> beam.Map(lambda kv: (kv[0][0], kv[1]))
    )
    self.counts = (
      labelled | 'CountSeen' >> beam.FlatMap(import_merge.labelled_counts),
      merged | 'CountBoards' >> beam.FlatMap(import_merge.board_counts),
    ) | 'Counts' >> beam.Flatten()
    return merged


class ToRecords(beam.PTransform):
  """(split, merged Labelled) -> (set key, record) for every record set of `plan` (`lichess_evals.RECORDS_OF`), as
  `shards.WriteShards` takes them."""

  def __init__(self, plan: job_results.JobPlan):
    super().__init__()
    self._plan = plan

  def expand(self, merged: PCollection) -> PCollection:
    return merged | 'Splits' >> job_results.SplitRecords(
      self._plan, lichess_evals.RECORDS_OF, lambda sb: sb[0], lambda sb: sb[1]
    )
