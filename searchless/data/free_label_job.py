"""The free-label import (``searchless-import``): Lichess's own evaluations as ChessBench records, on any Beam runner.

    game dumps --ReadGames--> texts --Distribute--> --ParseGames(with evals)--> (split, Labelled) | Skip
    eval db    --ReadEvalLines--> lines --Distribute--> --ParseEvalLines--> (split, Labelled) | Skip
      --MergeBoards (per split and board)--> one Labelled per board
      --ToRecords--> state_value / behavioral_cloning / partial_board_value --WriteShards--> pieces

Games are parsed, filtered and split (by a hash of the game) exactly as annotation does
(`searchless.data.games`); a database board goes to the split its FEN hashes to. A board
met more than once in a split (openings) becomes one record: its state value from the deepest
source (the database before games, then depth, then thousands of nodes), and every move any
source valued, each with its deepest value. What `searchless.data.free_labels` skips is counted
and written to ``skipped.jsonl`` with its file and line. Counts are data, summed by
`results.WriteResults`; `run` commits the files and writes ``manifest.json``
(`artefacts.ImportManifest`), with each source's depth and knodes distribution.
"""

from collections.abc import Iterator, Sequence
import dataclasses
import functools
import os
import time
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.pvalue import PBegin, PCollection, PDone

from searchless.core import artefacts
from searchless.core import bags
from searchless.core import records
from searchless.data import annotation_job
from searchless.data import beam_job
from searchless.data import free_label_merge
from searchless.data import free_labels
from searchless.data import games
from searchless.data import manifest as manifest_lib
from searchless.data import pgn
from searchless.data import results
from searchless.data import shards
from searchless.data import splits
from searchless.data import streams

KINDS = tuple(free_labels.RECORDS_OF)  # state_value, behavioral_cloning, partial_board_value.
EVAL_DB_BYTES_PER_BOARD = 400  # About one line of lichess_db_eval.jsonl (uncompressed): shard estimates.


def is_eval_db(path: str) -> bool:
  """Whether `path` is an evaluation-database file (JSON lines, any compression) rather than a game dump."""
  return '.jsonl' in os.path.basename(path).lower()


@dataclasses.dataclass(frozen=True)
class ImportOptions:
  """What to import and how to write it (the flags of ``searchless-import``)."""

  input: tuple[str, ...]  # Game dumps (.pgn, .pgn.zst, ...) and evaluation databases (.jsonl, .jsonl.zst), or globs.
  output_dir: str  # Where the splits, manifest and skips go (local path, gs://, s3://).
  records: str = ','.join(KINDS)  # Comma-separated record kinds to write (a subset of KINDS).
  num_shards: int = shards.AUTO  # Shards per record set: 0 = by size, N = exactly N.
  records_per_shard: int = shards.DEFAULT_RECORDS_PER_SHARD  # With num_shards 0: records per shard at most.
  compress: bool = False  # zstd-compressed .bagz instead of .bag.
  skip_corrupt_inputs: bool = False  # Keep a corrupt input's games or lines read so far instead of failing.
  max_games: int | None = None  # Games read from each game dump at most (its first N).
  max_lines: int | None = None  # Lines read from each evaluation database at most (its first N).
  min_elo: int | None = None  # Games: both players rated at least this.
  max_elo: int | None = None  # Games: both players rated at most this.
  speeds: str = ''  # Games: comma-separated Lichess speeds to keep; empty keeps all.
  exclude_bots: bool = False  # Games: drop games played by BOT accounts.
  test_fraction: float = splits.DEFAULT_TEST_FRACTION  # Fraction of games (and database boards), by hash, in test.
  dedup_by: str = 'fen'  # One of splits.DEDUP_BY: what makes two boards one record.
  parallelism: int = 0  # Lanes the work is spread over (`games.Distribute`); 0: as annotation picks.
  overwrite: bool = False  # Replace a dataset already in output_dir.

  def __post_init__(self):
    results.check_job_options(
      self, ('max_games', 'max_lines', 'records_per_shard'), ('min_elo', 'max_elo', 'num_shards', 'parallelism')
    )
    unknown = [k for k in self.kinds if k not in KINDS]
    if unknown or not self.kinds:
      raise ValueError(f'--records {self.records!r}: expected a comma-separated subset of {", ".join(KINDS)}')

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


class ImportLabels(beam.PTransform):
  """The whole import graph, from the input files to the pieces of every output set.

  Apply it to a pipeline's root; after `expand`, `inputs`, `split_names`, `outputs` and
  `results_path` say what it writes (`run` commits the pieces and writes the manifest).
  """

  def __init__(self, options: ImportOptions):
    super().__init__()
    self.options = options

  def expand(self, pbegin: PBegin) -> PDone:
    o = self.options
    paths = streams.match_files([part for value in o.input for part in value.split(',') if part], 'input')
    self.inputs = {'games': [p for p in paths if not is_eval_db(p)], 'eval_db': [p for p in paths if is_eval_db(p)]}
    self.split_names = ['train'] + (['test'] if o.test_fraction > 0 else [])
    self.results_path = FileSystems.join(o.output_dir, shards.TMP_DIR, results.RESULTS)
    game_filter = pgn.GameFilter(
      min_elo=o.min_elo,
      max_elo=o.max_elo,
      speeds=tuple(s for s in o.speeds.split(',') if s),
      exclude_bots=o.exclude_bots,
    )
    fraction, by = o.test_fraction, o.dedup_by
    counts: list[PCollection] = []
    labelled: list[PCollection] = []
    skipped: list[PCollection] = []

    def game_boards(item):
      if isinstance(item, pgn.Skip):
        yield item
        return
      split = splits.split_of(item.key, fraction)
      for board in free_labels.from_game(item):
        yield split, board

    def line_board(item: EvalLine):
      board = free_labels.from_eval_line(item.text, item.location)
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
      parsed = (
        read
        | 'GameTexts' >> beam.Filter(lambda r: isinstance(r, pgn.RawGame))
        | 'DistributeGames' >> games.Distribute(lambda raw: raw.location, o.parallelism)
        | 'ParseGames' >> beam.Map(_parse_with_evals, game_filter).with_output_types(Any)
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
      parsed_lines = (
        lines
        | 'LineTexts' >> beam.Filter(lambda r: isinstance(r, EvalLine))
        | 'DistributeLines' >> games.Distribute(lambda line: line.location, o.parallelism)
        | 'ParseLines' >> beam.Map(line_board)
      )
      counts.append(
        parsed_lines
        | 'CountLines'
        >> beam.Map(lambda x: (f'lines_skipped/{x.reason}', 1) if isinstance(x, pgn.Skip) else ('lines_kept', 1))
      )
      labelled.append(parsed_lines | 'LineLabels' >> beam.Filter(lambda x: not isinstance(x, pgn.Skip)))
      skipped.append(parsed_lines | 'LineSkips' >> beam.Filter(lambda x: isinstance(x, pgn.Skip)))

    every = labelled | 'AllLabelled' >> beam.Flatten()
    counts.append(every | 'CountSeen' >> beam.FlatMap(free_label_merge.labelled_counts))
    merged = (
      every
      | 'KeyBoards' >> beam.Map(lambda sb: ((sb[0], splits.dedup_key(sb[1].fen, by)), sb[1]))
      | 'MergeBoards' >> beam.CombinePerKey(free_label_merge.MergeBoards())
      | 'SplitBoard' >> beam.Map(lambda kv: (kv[0][0], kv[1]))
    )
    counts.append(merged | 'CountBoards' >> beam.FlatMap(free_label_merge.board_counts))

    ext = bags.extension(o.compress)
    estimated = (
      shards.pgn_bytes(self.inputs['games'], o.max_games) / shards.PGN_BYTES_PER_BOARD
      + shards.pgn_bytes(self.inputs['eval_db']) / EVAL_DB_BYTES_PER_BOARD
    )  # Boards, about.
    self.outputs: list[results.OutputSet] = []
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
        self.outputs.append(results.OutputSet(spec, split, kind))
        record_sets.append(
          shards.RecordSet(spec, functools.partial(records.encode, kind), lambda r: r[0], buckets, o.records_per_shard)
        )
        to_write.append(
          of_split
          | f'{kind}[{split}]' >> beam.FlatMap(free_labels.RECORDS_OF[kind])
          | f'Key[{split}/{kind}]' >> beam.Map(lambda r, key: (key, r), spec.key)
        )
    skips = shards.ShardSpec(o.output_dir, 'skipped', '.jsonl')
    self.outputs.append(results.OutputSet(skips, None, 'skipped'))
    record_sets.append(shards.RecordSet(skips, games.skip_line, lambda s: s.location))
    to_write.append(skipped | 'AllSkipped' >> beam.Flatten() | 'KeySkipped' >> beam.Map(lambda s, k: (k, s), skips.key))
    pieces = to_write | 'AllRecords' >> beam.Flatten() | 'Write' >> shards.WriteShards(record_sets)
    summed = counts | 'AllCounts' >> beam.Flatten() | 'SumCounts' >> beam.CombinePerKey(sum)
    _ = (
      (
        pbegin | 'Start' >> beam.Create([('start', None)]),
        summed | 'CountItems' >> beam.Map(lambda c: ('count', c)),
        pieces | 'PieceItems' >> beam.Map(lambda p: ('piece', p)),
      )
      | 'AllResults' >> beam.Flatten()
      | 'OneKey' >> beam.Map(lambda item: (None, item))
      | 'Gather' >> beam.GroupByKey()
      | 'WriteResults' >> beam.ParDo(results.WriteResults(self.results_path))
    )
    return PDone(pbegin.pipeline)


def _distribution(counts: dict[str, int], prefix: str) -> dict[str, int]:
  """{bucket: n} of the counts named prefix/bucket, buckets in numeric order ('unknown' last)."""
  found = {name[len(prefix) + 1 :]: n for name, n in counts.items() if name.startswith(prefix + '/')}
  key = lambda b: (b == 'unknown', int(b.split('-')[0]) if b != 'unknown' else 0)
  return {bucket: found[bucket] for bucket in sorted(found, key=key)}


def run(
  options: ImportOptions, *, beam_args: Sequence[str] = (), command: Sequence[str] | None = None
) -> artefacts.ImportManifest:
  """Runs the import; returns the manifest (also written to OUTPUT_DIR/manifest.json)."""
  pipeline_options, _ = beam_job.beam_options(beam_args)
  if not options.parallelism:
    options = dataclasses.replace(options, parallelism=beam_job.parallelism(pipeline_options))
  start = time.time()
  pipeline = beam.Pipeline(options=pipeline_options)
  graph = ImportLabels(options)  # Matches the inputs: a glob that matches nothing fails before the folder is made.
  _ = pipeline | 'Import' >> graph
  roots = sorted({options.output_dir, *(o.spec.directory for o in graph.outputs)})

  def finish(_) -> artefacts.ImportManifest:
    counts, _, pieces = results.read_results(graph.results_path)
    if not counts.get('lines_kept', 0) and not counts.get('games_kept', 0):
      files = ', '.join(p for paths in graph.inputs.values() for p in paths)
      skipped = ', '.join(f'{n} {k}' for k, n in sorted(counts.items()) if 'skipped' in k) or 'nothing skipped'
      raise ValueError(
        f'no evaluations in {files}: no game with [%eval] comments and no usable database line ({skipped})'
      )
    shards.commit([o.spec for o in graph.outputs], pieces, roots)
    return _write_manifest(counts, options, graph, time.time() - start, command)

  return beam_job.run(
    pipeline,
    finish,
    output_dir=options.output_dir,
    roots=roots,
    existing=annotation_job.existing_dataset(options.output_dir),
    overwrite=options.overwrite,
  )


def _write_manifest(
  counts: dict[str, int], options: ImportOptions, graph: ImportLabels, wall: float, command: Sequence[str] | None
) -> artefacts.ImportManifest:
  per_split = {
    split: {name: counts.get(f'{name}/{split}', 0) for name in ('boards_seen', 'boards', 'moves_valued', 'best_moves')}
    for split in graph.split_names
  }
  manifest = artefacts.ImportManifest(
    code=manifest_lib.code_version(),
    command=list(command) if command is not None else manifest_lib.command_line(),
    inputs=graph.inputs,
    output_dir=options.output_dir,
    games={
      'read': counts.get('games_read', 0),
      'kept': counts.get('games_kept', 0),
      'skipped': {r: counts[f'games_skipped/{r}'] for r in GAME_SKIP_REASONS if counts.get(f'games_skipped/{r}')},
      'filters': {
        'min_elo': options.min_elo,
        'max_elo': options.max_elo,
        'speeds': options.speeds,
        'exclude_bots': options.exclude_bots,
        'max_games_per_file': options.max_games,
      },
    },
    lines={
      'read': counts.get('lines_read', 0),
      'kept': counts.get('lines_kept', 0),
      'skipped': {
        r: counts[f'lines_skipped/{r}'] for r in free_labels.SKIP_REASONS if counts.get(f'lines_skipped/{r}')
      },
      'max_lines_per_file': options.max_lines,
    },
    corrupt_input_files=counts.get('corrupt_input_files', 0),
    sources={
      source: {'depth': _distribution(counts, f'depth/{source}'), 'knodes': _distribution(counts, f'knodes/{source}')}
      for source in free_labels.SOURCES
      if graph.inputs[source]
    },
    split={
      'test_fraction': options.test_fraction,
      'by': 'hash of game; database boards: hash of board',
      'dedup_by': options.dedup_by,
    },
    splits=per_split,
    outputs=beam_job.outputs(options.output_dir, graph.split_names, options.kinds),
    timings={'wall_seconds': round(wall, 3)},
  )
  manifest.write(FileSystems.join(options.output_dir, artefacts.ImportManifest.FILE))
  return manifest


def summary(manifest: artefacts.ImportManifest) -> str:
  """A few human lines about a finished import."""
  g, l = manifest.games, manifest.lines
  lines = []
  if manifest.inputs['games']:
    lines.append(
      f'games: {g["read"]} read, {g["kept"]} kept (with evals)' + (f', skipped {g["skipped"]}' if g['skipped'] else '')
    )
  if manifest.inputs['eval_db']:
    lines.append(
      f'database lines: {l["read"]} read, {l["kept"]} kept' + (f', skipped {l["skipped"]}' if l['skipped'] else '')
    )
  for split, c in manifest.splits.items():
    lines.append(
      f'{split}: {c["boards"]} boards ({c["boards_seen"]} before merging), {c["moves_valued"]} move values, '
      f'{c["best_moves"]} best moves'
    )
  lines.append(f'wall time: {manifest.timings["wall_seconds"]:.1f} s')
  return '\n'.join(lines)
