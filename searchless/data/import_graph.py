"""The label import's graph (`ImportLabels`) and options; its driver is `searchless.pipelines.import_labels`.

    game dumps --ReadGames--> texts --Distribute--> --ParseGames(with evals)--> (split, Labelled) | Skip
    eval db    --ReadEvalLines--> lines --Distribute--> --ParseEvalLines--> (split, Labelled) | Skip
      --MergeBoards (per split and board)--> one Labelled per board
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
from apache_beam.pvalue import PBegin, PCollection, PDone

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


class ImportLabels(beam.PTransform):
  """The whole import graph, from the input files to the pieces of every output set.

  Apply it to a pipeline's root; after `expand`, `inputs`, `split_names`, `outputs` and
  `results_path` say what it writes (`run` commits the pieces and writes the manifest).
  `paths`: the input files, where the caller matched them already (`input_paths`).
  """

  def __init__(self, options: ImportOptions, kept: Sequence[str] = (), paths: Sequence[str] | None = None):
    super().__init__()
    self.options = options
    self.kept = list(kept)  # Pieces of parsed games and lines an interrupted run kept (`resume.Keeper.kept_pieces`).
    self._paths = list(paths) if paths is not None else None

  def expand(self, pbegin: PBegin) -> PDone:
    o = self.options
    paths = self._paths if self._paths is not None else input_paths(o)
    self.inputs = {'games': [p for p in paths if not is_eval_db(p)], 'eval_db': [p for p in paths if is_eval_db(p)]}
    self.split_names = ['train'] + (['test'] if o.test_fraction > 0 else [])
    self.results_path = FileSystems.join(o.output_dir, shards.TMP_DIR, job_results.RESULTS)
    game_filter = o.game_filter()
    fraction, by = o.test_fraction, o.dedup_by
    counts: list[PCollection] = []
    labelled: list[PCollection] = []
    skipped: list[PCollection] = []
    notes: list[PCollection] = []

    def game_boards(item):
      if isinstance(item, pgn.Skip):
        yield item
        return
      split = splits.split_of(item.key, fraction)
      for board in lichess_evals.from_game(item):
        yield split, board

    def line_board(item: EvalLine):
      board = lichess_evals.from_eval_line(item.text, item.location)
      if isinstance(board, pgn.Skip):
        return board
      return splits.split_of(splits.dedup_key(board.fen, by), fraction), board

    if self.inputs['games']:
      read = (
        pbegin
        | 'GameFiles' >> beam.Create(self.inputs['games'])
        | 'ReadGames' >> beam.ParDo(games.ReadGames(o.max_games, o.skip_corrupt_inputs))
      )
      counts.append(
        read
        | 'CountGamesRead'
        >> beam.Map(lambda r: ('corrupt_input_files' if isinstance(r, games.CorruptInput) else 'games_read', 1))
      )
      parsed = _kept_or_done(
        read | 'GameTexts' >> beam.Filter(lambda r: isinstance(r, pgn.RawGame)),
        functools.partial(_parse_with_evals, game_filter=game_filter),
        'games',
        self.kept,
        o,
        pbegin,
        counts,
        notes,
      )
      counts.append(
        parsed
        | 'CountGames'
        >> beam.Map(lambda g: (f'games_skipped/{g.reason}', 1) if isinstance(g, pgn.Skip) else ('games_kept', 1))
      )
      from_games = parsed | 'GameBoards' >> beam.FlatMap(game_boards)
      labelled.append(from_games | 'GameLabels' >> beam.Filter(lambda x: not isinstance(x, pgn.Skip)))
      skipped.append(from_games | 'GameSkips' >> beam.Filter(lambda x: isinstance(x, pgn.Skip)))
    if self.inputs['eval_db']:
      lines = (
        pbegin
        | 'EvalFiles' >> beam.Create(self.inputs['eval_db'])
        | 'ReadEvalLines' >> beam.ParDo(ReadEvalLines(o.max_lines, o.skip_corrupt_inputs))
      )
      counts.append(
        lines
        | 'CountLinesRead'
        >> beam.Map(lambda r: ('corrupt_input_files' if isinstance(r, games.CorruptInput) else 'lines_read', 1))
      )
      parsed_lines = _kept_or_done(
        lines | 'LineTexts' >> beam.Filter(lambda r: isinstance(r, EvalLine)),
        line_board,
        'lines',
        self.kept,
        o,
        pbegin,
        counts,
        notes,
      )
      counts.append(
        parsed_lines
        | 'CountLines'
        >> beam.Map(lambda x: (f'lines_skipped/{x.reason}', 1) if isinstance(x, pgn.Skip) else ('lines_kept', 1))
      )
      labelled.append(parsed_lines | 'LineLabels' >> beam.Filter(lambda x: not isinstance(x, pgn.Skip)))
      skipped.append(parsed_lines | 'LineSkips' >> beam.Filter(lambda x: isinstance(x, pgn.Skip)))

    every = labelled | 'AllLabelled' >> beam.Flatten()
    counts.append(every | 'CountSeen' >> beam.FlatMap(import_merge.labelled_counts))
    merged = (
      every
      | 'KeyBoards' >> beam.Map(lambda sb: ((sb[0], splits.dedup_key(sb[1].fen, by)), sb[1]))
      | 'MergeBoards' >> beam.CombinePerKey(import_merge.MergeBoards())
      | 'SplitBoard' >> beam.Map(lambda kv: (kv[0][0], kv[1]))
    )
    counts.append(merged | 'CountBoards' >> beam.FlatMap(import_merge.board_counts))

    ext = bags.extension(o.compress)
    estimated = (
      shards.pgn_bytes(self.inputs['games'], o.max_games) / shards.PGN_BYTES_PER_BOARD
      + shards.pgn_bytes(self.inputs['eval_db']) / EVAL_DB_BYTES_PER_BOARD
    )  # Boards, about.
    self.outputs: list[job_results.OutputSet] = []
    record_sets: list[shards.RecordSet] = []
    to_write: list[PCollection] = []
    for split in self.split_names:
      share = estimated * (fraction if split == 'test' else 1 - fraction)
      of_split = (
        merged
        | f'Select[{split}]' >> beam.Filter(lambda sb, s: sb[0] == s, split)
        | f'Boards[{split}]' >> beam.Map(lambda sb: sb[1])
      )
      for kind in o.kinds:
        spec = shards.ShardSpec(FileSystems.join(o.output_dir, split), kind, ext, o.num_shards)
        buckets = shards.auto_buckets(share * shards.PGN_BYTES_PER_BOARD, 1, o.records_per_shard)
        self.outputs.append(job_results.OutputSet(spec, split, kind))
        record_sets.append(
          shards.RecordSet(spec, functools.partial(records.encode, kind), lambda r: r[0], buckets, o.records_per_shard)
        )
        to_write.append(
          of_split
          | f'{kind}[{split}]' >> beam.FlatMap(lichess_evals.RECORDS_OF[kind])
          | f'Key[{split}/{kind}]' >> beam.Map(lambda r, key: (key, r), spec.key)
        )
    skips = shards.ShardSpec(o.output_dir, 'skipped', '.jsonl')
    self.outputs.append(job_results.OutputSet(skips, None, 'skipped'))
    record_sets.append(shards.RecordSet(skips, games.skip_line, lambda s: s.location))
    to_write.append(skipped | 'AllSkipped' >> beam.Flatten() | 'KeySkipped' >> beam.Map(lambda s, k: (k, s), skips.key))
    pieces = to_write | 'AllRecords' >> beam.Flatten() | 'Write' >> shards.WriteShards(record_sets)
    summed = counts | 'AllCounts' >> beam.Flatten() | 'SumCounts' >> beam.CombinePerKey(sum)
    _ = (
      (
        pbegin | 'Start' >> beam.Create([('start', None)]),
        summed | 'CountItems' >> beam.Map(lambda c: ('count', c)),
        pieces | 'PieceItems' >> beam.Map(lambda p: ('piece', p)),
        *notes,
      )
      | 'AllResults' >> beam.Flatten()
      | 'OneKey' >> beam.Map(lambda item: (None, item))
      | 'Gather' >> beam.GroupByKey()
      | 'WriteResults' >> beam.ParDo(job_results.WriteResults(self.results_path))
    )
    return PDone(pbegin.pipeline)


def _location(item: pgn.RawGame | EvalLine) -> str:
  return item.location


def _kept_or_done(
  items: PCollection,
  step: Callable,
  kind: str,
  kept: Sequence[str],
  o: ImportOptions,
  pbegin: PBegin,
  counts: list[PCollection],
  notes: list[PCollection],
) -> PCollection:
  """`step` (the parse) of each game text or database line, spread over the workers and committed as it goes
  (`resume.Recorded`), except for those an interrupted run kept (`resume.SkipKept`). Adds to `counts` how many
  were parsed in this run (``parsed/<kind>``) and kept (``kept/<kind>``), and to `notes` the kept pieces dropped as
  unreadable."""
  name = kind.title()
  skip_kept = resume.SkipKept(resume.pieces_of_kind(kept, kind), _location, pbegin)
  resolved = items | f'SkipKept{name}' >> skip_kept
  recorded = resume.Recorded(step, _location, resume.folder(o.output_dir), kind, o.chunk_games)
  parsed = (
    resolved
    | f'{name}ToDo' >> beam.Filter(lambda t: t[0] == 'todo')
    | f'{name}Items' >> beam.Map(lambda t: t[1])
    | f'Distribute{name}' >> games.Distribute(_location, o.parallelism)
    | f'Parse{name}' >> beam.ParDo(recorded).with_output_types(Any)
  )
  reused = (
    resolved | f'{name}Kept' >> beam.Filter(lambda t: t[0] == 'kept') | f'{name}KeptResults' >> beam.Map(lambda t: t[2])
  )
  counts.append(parsed | f'Count{name}Parsed' >> beam.Map(lambda _, k: (f'parsed/{k}', 1), kind))
  counts.append(reused | f'Count{name}Kept' >> beam.Map(lambda _, k: (f'kept/{k}', 1), kind))
  if skip_kept.dropped is not None:
    what = f'parsed {kind}'
    notes.append(skip_kept.dropped | f'Dropped{name}' >> beam.Map(lambda r: ('note', resume.dropped_note(r, what))))
  return (parsed, reused) | f'All{name}Parsed' >> beam.Flatten()
