"""Apache Beam transforms of the annotation pipeline (driver: `searchless.pipelines.annotate`).

    input files --ReadGames--> game texts --Distribute--> --ParseGames--> games | skips
      [--Sample: the games of smallest hash-->] --SplitGames--> (split, game)
      --ExtractBoards--> unique (split, fen) --SkipKept (`searchless.data.resume`)--> to do | kept
      --Distribute--> --AnnotateBoards--> Annotated | Failed | EngineSeen
      --ToRecords--> action_value / state_value / behavioral_cloning records
                     and/or board_value records (one per board, `searchless.data.boards`)
      --WriteShards--> pieces, committed after the job (`searchless.data.shards`)

The steps up to ExtractBoards are `searchless.data.games`'; the counts and the
last step, `WriteResults`, are `searchless.data.job_results`'. Runs on any Beam
runner, Beam's Dask runner included: every step has one output (kinds of
elements are told apart by type, not by tagged outputs), nothing reads a side
input, and files are written by `shards.WriteShards`. Runner metrics are a
bonus (the time per board, where the runner has them).
"""

from collections.abc import Iterator, Sequence
import dataclasses
import functools
import hashlib
import json
import tempfile
import time
from typing import ClassVar

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.pvalue import PBegin, PCollection, PDone

from searchless.core import bags
from searchless.core import records
from searchless.data import annotation_records
from searchless.data import games
from searchless.data import job_options
from searchless.data import pgn
from searchless.data import progress
from searchless.data import job_results
from searchless.data import resume
from searchless.data import shards
from searchless.data import splits
from searchless.data import streams
from searchless.engines import annotator as engine_lib
from searchless.engines import launch

NAMESPACE = 'searchless'  # Of the runner metrics (a bonus: ms_per_board).


@dataclasses.dataclass(frozen=True)
class Annotated:
  split: str
  annotation: engine_lib.BoardAnnotation
  restarts: int  # Engine restarts while annotating this board.
  # 'searched' by the engine in this run; 'kept' from a piece an interrupted run's engine (this one) made;
  # 'searched_again': kept from a piece another engine made, so searched in this run.
  origin: str = 'searched'


@dataclasses.dataclass(frozen=True)
class Failed:
  """A board the engine could not annotate after its retries (a line of failures.jsonl)."""

  split: str
  fen: str
  reason: str
  attempts: int
  restarts: int


@dataclasses.dataclass(frozen=True)
class EngineSeen:
  identity: str  # JSON of the engine's `id` lines and its binary's sha256, once per engine process.


@functools.lru_cache(maxsize=None)
def _binary_sha256(path: str) -> str | None:
  return launch.binary_sha256(path)  # Of the binary on this worker, once per process.


def engine_identity(engine_id: dict[str, str], path: str) -> str:
  """An engine's identity as a worker measures it (JSON): its UCI ``id`` lines and its binary's sha256 there."""
  return json.dumps({**engine_id, 'binary_sha256': _binary_sha256(path)}, sort_keys=True)


class AnnotateBoards(beam.DoFn):
  """('todo', (split, fen)) -> `Annotated`, or `Failed` after the engine's retries; one engine process per DoFn
  setup. ('kept', (split, fen), annotation, engine identity) from `resume.SkipKept` -> that annotation, where this
  worker's own engine made it, else the board searched again (an engine upgraded on the workers never passes its
  labels off as this one's; counted as 'searched_again').

  The identity of each worker's engine (`engine_identity`, measured in its setup on every runner) goes into the
  pieces it commits and is emitted once as an `EngineSeen`.
  """

  def __init__(
    self,
    config: engine_lib.EngineConfig,
    progress_dir: str | None = None,
    resume_dir: str | None = None,
    chunk_boards: int = resume.DEFAULT_CHUNK_BOARDS,
  ):
    self._config = config
    self._progress_dir = progress_dir
    self._resume_dir, self._chunk_boards = resume_dir, chunk_boards

  def setup(self) -> None:
    self._annotator = engine_lib.BoardAnnotator(self._config)
    self._annotator.start()
    self._identity = engine_identity(self._annotator.engine_id, self._config.path)
    self._announced = False
    self._kept = (
      resume.PieceWriter(self._resume_dir, 'boards', self._chunk_boards, self._identity) if self._resume_dir else None
    )
    self._progress = progress.WorkerProgress(self._progress_dir)
    self._progress.update(force=True)  # Marks the start of annotation.
    self._seconds = Metrics.distribution(NAMESPACE, 'ms_per_board')

  def process(self, resolved: tuple) -> Iterator[Annotated | Failed | EngineSeen]:
    if not self._announced:
      self._announced = True
      yield EngineSeen(self._identity)
    split, fen = resolved[1]
    origin = 'searched'
    if resolved[0] == 'kept':
      if resolved[3] == self._identity:
        yield Annotated(split, resolved[2], 0, 'kept')
        return
      origin = 'searched_again'
    restarts = self._annotator.restarts
    start = time.perf_counter()
    try:
      annotation = self._annotator.annotate(fen)
    except engine_lib.BoardFailed as e:
      self._progress.update(failures=1)
      yield Failed(split, fen, e.reason, e.attempts, self._annotator.restarts - restarts)
    else:
      self._seconds.update(int(1000 * (time.perf_counter() - start)))
      self._progress.update(boards=1, action_values=len(annotation.action_values))
      if self._kept is not None:
        self._kept.add(fen, annotation)
      yield Annotated(split, annotation, self._annotator.restarts - restarts, origin)

  def finish_bundle(self) -> None:
    if self._kept is not None:
      self._kept.commit()
    self._progress.update(force=True)

  def teardown(self) -> None:
    annotator = getattr(self, '_annotator', None)
    if annotator is not None:
      annotator.close()


def annotation_counts(output: Annotated | Failed | EngineSeen) -> Iterator[job_results.Count]:
  """The manifest's counts of one `AnnotateBoards` output."""
  if isinstance(output, Annotated):
    split, annotation = output.split, output.annotation
    yield f'boards_annotated/{split}', 1
    yield f'boards_{output.origin}', 1
    yield f'action_values/{split}', len(annotation.action_values)
    if annotation.best_move is None:  # Checkmate or stalemate.
      yield f'terminal_boards/{split}', 1
  elif isinstance(output, Failed):
    yield f'boards_failed/{output.split}', 1
  if isinstance(output, (Annotated, Failed)) and output.restarts:
    yield 'engine_restarts', output.restarts


def new_progress_dir() -> str:
  return tempfile.mkdtemp(prefix='searchless-progress-')


@dataclasses.dataclass(frozen=True)
class AnnotateOptions(job_options.DatasetOptions):
  """What to annotate and how to write it (the flags of ``searchless-annotate``): the dataset jobs' options and
  these."""

  test_input: tuple[str, ...] = ()  # PGN files whose games all go to the test split (disables test_fraction).
  records: str = 'chessbench,board'  # Record sets (see `annotation_records.record_kinds`).
  sample_games: int | None = None  # A sample of this many games: those of smallest `sample_rank` (same every run).
  drop_test_overlap: bool = False  # Drop test boards that also occur in train (the paper kept them).
  mode: str = 'per_move'  # The engine mode (annotation_records.record_kinds depends on it).
  chunk_boards: int = resume.DEFAULT_CHUNK_BOARDS  # A worker commits its annotations every this many boards.

  POSITIVE: ClassVar[tuple[str, ...]] = (*job_options.DatasetOptions.POSITIVE, 'sample_games', 'chunk_boards')


def _first(record: tuple) -> str:
  return record[0]  # A record's board.


def sample_rank(game: pgn.Game) -> tuple[bytes, str]:
  """Where a game stands in `--sample_games`' draw: a hash of its identity (its Lichess URL, else a hash of its
  text), then its file:line. The games of smallest rank are a uniform sample that every run draws alike. The hash
  is salted: the split (`splits.split_of`) hashes the same identity, and a sample of the smallest unsalted hashes
  would all be test games.

  >>> sample_rank(pgn.Game('https://lichess.org/abcdefgh', 'g.pgn:1', ()))[0].hex()[:8]
  '7f3b8936'
  """
  return hashlib.sha256(f'sample {game.key}'.encode('utf-8')).digest(), game.location


def _failure_line(failure: Failed) -> bytes:
  return json.dumps(
    {'split': failure.split, 'fen': failure.fen, 'reason': failure.reason, 'attempts': failure.attempts}, sort_keys=True
  ).encode('utf-8')


class AnnotateGames(beam.PTransform):
  """The whole annotation graph, from the input files to the pieces of every output set.

  Apply it to a pipeline's root: ``pipeline | AnnotateGames(options, engine_config, progress_dir)``.
  After `expand`, `split_names`, `inputs`, `test_fraction`, `outputs` (the
  `OutputSet`s) and `results_path` say what it writes; `shards.commit` then
  gives the pieces their final names (`searchless.pipelines.annotate.run` does all this).
  """

  def __init__(
    self,
    options: AnnotateOptions,
    engine_config: engine_lib.EngineConfig,
    progress_dir: str | None,
    kept: Sequence[str] = (),
  ):
    super().__init__()
    self.options, self.engine_config, self.progress_dir = options, engine_config, progress_dir
    self.kept = list(kept)  # Pieces of annotations an interrupted run kept (`resume.Keeper.kept_pieces`).

  def expand(self, pbegin: PBegin) -> PDone:
    self._build(pbegin)
    return PDone(pbegin.pipeline)

  def _build(self, pbegin: PBegin) -> None:
    o, engine_config, progress_dir = self.options, self.engine_config, self.progress_dir
    game_filter = o.game_filter()
    inputs = {'train': streams.match_files(_split_list(o.input))}
    if o.test_input:
      inputs['test'] = streams.match_files(_split_list(o.test_input), '--test_input')
    test_fraction = 0.0 if o.test_input else o.test_fraction
    split_names = ['train'] + (['test'] if o.test_input or test_fraction > 0 else [])
    self.split_names, self.inputs, self.test_fraction = split_names, inputs, test_fraction
    out = o.output_dir
    self.results_path = FileSystems.join(out, shards.TMP_DIR, job_results.RESULTS)

    counts: list[PCollection] = []
    kept_games, skipped = [], []
    for source, paths in inputs.items():
      read = (
        pbegin
        | f'Files[{source}]' >> beam.Create(paths)
        | f'ReadGames[{source}]' >> beam.ParDo(games.ReadGames(o.max_games, o.skip_corrupt_inputs))
      )
      counts.append(
        read
        | f'CountRead[{source}]'
        >> beam.Map(lambda r: ('corrupt_input_files' if isinstance(r, games.CorruptInput) else 'games_read', 1))
      )
      parsed = (
        read
        | f'Texts[{source}]' >> beam.Filter(lambda r: isinstance(r, pgn.RawGame))
        | f'Distribute[{source}]' >> games.Distribute(lambda raw: raw.location, o.parallelism)
        | f'ParseGames[{source}]' >> beam.ParDo(games.ParseGames(game_filter))
      )
      counts.append(
        parsed
        | f'CountParsed[{source}]'
        >> beam.Map(lambda g: ('games_kept', 1) if isinstance(g, pgn.Game) else (f'games_skipped/{g.reason}', 1))
      )
      kept = parsed | f'Kept[{source}]' >> beam.Filter(lambda g: isinstance(g, pgn.Game))
      skipped.append(parsed | f'Skipped[{source}]' >> beam.Filter(lambda g: isinstance(g, pgn.Skip)))
      if o.sample_games is not None:
        kept = (
          kept
          | f'Sample[{source}]' >> beam.combiners.Top.Of(o.sample_games, key=sample_rank, reverse=True)
          | f'Unpack[{source}]' >> beam.FlatMap(lambda sample: sample)
        )
      if source == 'test':
        kept = kept | 'AllTest' >> beam.Map(lambda game: ('test', game))
      else:
        kept = kept | 'SplitGames' >> beam.Map(lambda game, f: (splits.split_of(game.key, f), game), test_fraction)
      kept_games.append(kept)

    extract = games.ExtractBoards(o.dedup_by, o.drop_test_overlap)
    unique = kept_games | 'AllGames' >> beam.Flatten() | 'ExtractBoards' >> extract
    counts.append(extract.counts)
    skip_kept = resume.SkipKept(self.kept, lambda split_fen: split_fen[1], pbegin)
    resolved = unique | 'SkipKept' >> skip_kept
    if progress_dir:
      _ = (
        resolved
        | 'ToDo' >> beam.Filter(lambda t: t[0] == 'todo')
        | 'Ones' >> beam.Map(lambda _: 1)
        | 'Total' >> beam.CombineGlobally(sum).without_defaults()
        | 'TellProgress' >> beam.Map(progress.write_total, progress_dir)
      )
    annotate_boards = AnnotateBoards(engine_config, progress_dir, resume.folder(out), o.chunk_boards)
    annotated = (  # Kept boards too: their worker checks that its own engine made them.
      resolved
      | 'Distribute[boards]' >> games.Distribute(lambda resolved: resolved[1][1], o.parallelism)
      | 'AnnotateBoards' >> beam.ParDo(annotate_boards)
    )
    counts.append(annotated | 'CountAnnotated' >> beam.FlatMap(annotation_counts))

    # What each output set holds, and how many writers it gets when sharded by size.
    ext = bags.extension(o.compress)
    pgn_bytes = {source: shards.pgn_bytes(paths, o.max_games, o.sample_games) for source, paths in inputs.items()}
    share = {
      'train': pgn_bytes['train'] * (1 - test_fraction),
      'test': pgn_bytes.get('test', pgn_bytes['train'] * test_fraction),
    }
    self.outputs: list[job_results.OutputSet] = []
    record_sets: list[shards.RecordSet] = []
    to_write: list[PCollection] = []
    for split in split_names:
      of_split = (
        annotated
        | f'Select[{split}]' >> beam.Filter(lambda a, s: isinstance(a, Annotated) and a.split == s, split)
        | f'Annotations[{split}]' >> beam.Map(lambda a: a.annotation)
      )
      for kind in annotation_records.record_kinds(o.records, o.mode):
        spec = shards.ShardSpec(FileSystems.join(out, split), kind, ext, o.num_shards)
        per_board = shards.MOVES_PER_BOARD if kind == 'action_value' else 1
        buckets = shards.auto_buckets(share[split], per_board, o.records_per_shard)
        self.outputs.append(job_results.OutputSet(spec, split, kind))
        record_sets.append(
          shards.RecordSet(spec, functools.partial(records.encode, kind), _first, buckets, o.records_per_shard)
        )
        to_write.append(
          of_split
          | f'{kind}[{split}]' >> beam.FlatMap(annotation_records.RECORDS_OF[kind])
          | f'Key[{split}/{kind}]' >> beam.Map(lambda r, key: (key, r), spec.key)
        )
    failures = shards.ShardSpec(out, 'failures', '.jsonl')
    skips = shards.ShardSpec(out, 'skipped', '.jsonl')
    self.outputs += [job_results.OutputSet(failures, None, 'failures'), job_results.OutputSet(skips, None, 'skipped')]
    record_sets += [
      shards.RecordSet(failures, _failure_line, lambda f: f.fen),
      shards.RecordSet(skips, games.skip_line, lambda s: s.location),
    ]
    to_write.append(
      annotated
      | 'Failures' >> beam.Filter(lambda a: isinstance(a, Failed))
      | 'KeyFailures' >> beam.Map(lambda f, key: (key, f), failures.key)
    )
    to_write.append(
      skipped | 'AllSkipped' >> beam.Flatten() | 'KeySkipped' >> beam.Map(lambda s, key: (key, s), skips.key)
    )
    pieces = to_write | 'AllRecords' >> beam.Flatten() | 'Write' >> shards.WriteShards(record_sets)
    engines = (
      annotated
      | 'Engines' >> beam.Filter(lambda a: isinstance(a, EngineSeen))
      | 'EngineIds' >> beam.Map(lambda e: ('engine', e.identity))
    )
    notes = [engines]
    if skip_kept.dropped is not None:
      notes.append(
        skip_kept.dropped | 'Dropped' >> beam.Map(lambda r: ('note', resume.dropped_note(r, 'annotated boards')))
      )

    # The last step depends on every other (Beam's Dask runner computes only the last one's inputs).
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


def _split_list(values: tuple[str, ...]) -> list[str]:
  """Repeated and comma-separated file arguments as one list."""
  return [part for value in values for part in value.split(',') if part]
