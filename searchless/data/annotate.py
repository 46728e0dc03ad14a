"""Apache Beam transforms of the annotation pipeline; its driver, `searchless.pipelines.annotate`, shows the graph.

    input files --ReadGames (per source: read, Distribute, parse, [sample,] split)--> (split, game) | skips
      --ExtractBoards--> unique (split, fen) --SkipKept (`searchless.data.resume`)--> to do | kept
      --Distribute--> --AnnotateBoards--> Annotated | Failed | EngineSeen
      --ToRecords--> action_value / state_value / behavioral_cloning records
                     and/or board_value records (one per board, `searchless.data.boards`), failures
      --WriteShards--> pieces, committed after the job (`searchless.data.shards`)

`plan` says before the graph is built what the job reads and writes. ExtractBoards and Distribute are
`searchless.data.games`'; the counts and the last step, `WriteResults`, are `searchless.data.job_results`'. Runs on
any Beam runner, Beam's Dask runner included: every step has one output (kinds of elements are told apart by type,
not by tagged outputs), nothing reads a side input, and files are written by `shards.WriteShards`. Runner metrics
are a bonus (the time per board, where the runner has them).
"""

from collections.abc import Iterator
import dataclasses
import functools
import json
import tempfile
import time
from typing import ClassVar

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.pvalue import PCollection

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
  sample_games: int | None = None  # This many games: those of smallest `games.sample_rank` (same every run).
  drop_test_overlap: bool = False  # Drop test boards that also occur in train (the paper kept them).
  mode: str = 'per_move'  # The engine mode (annotation_records.record_kinds depends on it).
  chunk_boards: int = resume.DEFAULT_CHUNK_BOARDS  # A worker commits its annotations every this many boards.

  POSITIVE: ClassVar[tuple[str, ...]] = (*job_options.DatasetOptions.POSITIVE, 'sample_games', 'chunk_boards')


def _first(record: tuple) -> str:
  return record[0]  # A record's board.


def _failure_line(failure: Failed) -> bytes:
  return json.dumps(
    {'split': failure.split, 'fen': failure.fen, 'reason': failure.reason, 'attempts': failure.attempts}, sort_keys=True
  ).encode('utf-8')


def plan(o: AnnotateOptions) -> job_results.JobPlan:
  """The plan of the job `o` asks for: its inputs matched (a pattern that matches nothing is an error naming it), its
  splits, and each output set with the shards it gets when sharded by size."""
  inputs = {'train': streams.match_files(_split_list(o.input))}
  if o.test_input:
    inputs['test'] = streams.match_files(_split_list(o.test_input), '--test_input')
  test_fraction = 0.0 if o.test_input else o.test_fraction
  split_names = ['train'] + (['test'] if o.test_input or test_fraction > 0 else [])
  ext, out = bags.extension(o.compress), o.output_dir
  pgn_bytes = {source: shards.pgn_bytes(paths, o.max_games, o.sample_games) for source, paths in inputs.items()}
  share = {
    'train': pgn_bytes['train'] * (1 - test_fraction),
    'test': pgn_bytes.get('test', pgn_bytes['train'] * test_fraction),
  }
  outputs: list[job_results.OutputSet] = []
  record_sets: list[shards.RecordSet] = []
  for split in split_names:
    for kind in annotation_records.record_kinds(o.records, o.mode):
      spec = shards.ShardSpec(FileSystems.join(out, split), kind, ext, o.num_shards)
      per_board = shards.MOVES_PER_BOARD if kind == 'action_value' else 1
      buckets = shards.auto_buckets(share[split], per_board, o.records_per_shard)
      outputs.append(job_results.OutputSet(spec, split, kind))
      record_sets.append(
        shards.RecordSet(spec, functools.partial(records.encode, kind), _first, buckets, o.records_per_shard)
      )
  failures = shards.ShardSpec(out, 'failures', '.jsonl')
  skips = shards.ShardSpec(out, 'skipped', '.jsonl')
  outputs += [job_results.OutputSet(failures, None, 'failures'), job_results.OutputSet(skips, None, 'skipped')]
  record_sets += [
    shards.RecordSet(failures, _failure_line, lambda f: f.fen),
    shards.RecordSet(skips, games.skip_line, lambda s: s.location),
  ]
  results_path = job_results.results_path(out)
  return job_results.JobPlan(out, inputs, test_fraction, split_names, outputs, record_sets, results_path)


class ReadGames(beam.PTransform):
  """The input files of one source -> (split, `pgn.Game`): read, spread over the workers, parsed and filtered
  (`searchless.data.games`), sampled (--sample_games) and split (a 'test' source's games all go to test, others by a
  hash of the game). After `expand`, `counts` is the collection of its counts (games read, kept, skipped; corrupt
  files) and `skipped` that of the games it left out (`pgn.Skip`)."""

  def __init__(self, source: str, options: AnnotateOptions, test_fraction: float):
    super().__init__()
    self._source, self._options, self._test_fraction = source, options, test_fraction

  def expand(self, files: PCollection) -> PCollection:  # -> (split, pgn.Game)
    o = self._options
    read = files | 'ReadGames' >> beam.ParDo(games.ReadGames(o.max_games, o.skip_corrupt_inputs))
    parsed = (
      read
      | 'Texts' >> beam.Filter(lambda r: isinstance(r, pgn.RawGame))
      | 'Distribute' >> games.Distribute(lambda raw: raw.location, o.parallelism)
      | 'ParseGames' >> beam.ParDo(games.ParseGames(o.game_filter()))
    )
    self.counts = (
      read
      | 'CountRead'
      >> beam.Map(lambda r: ('corrupt_input_files' if isinstance(r, games.CorruptInput) else 'games_read', 1)),
      parsed
      | 'CountParsed'
      >> beam.Map(lambda g: ('games_kept', 1) if isinstance(g, pgn.Game) else (f'games_skipped/{g.reason}', 1)),
    ) | 'Counts' >> beam.Flatten()
    self.skipped = parsed | 'Skipped' >> beam.Filter(lambda g: isinstance(g, pgn.Skip))
    kept = parsed | 'Kept' >> beam.Filter(lambda g: isinstance(g, pgn.Game))
    if o.sample_games is not None:
      kept = kept | 'Sample' >> games.SampleGames(o.sample_games)
    if self._source == 'test':
      return kept | 'AllTest' >> beam.Map(lambda game: ('test', game))
    return kept | 'SplitGames' >> beam.Map(lambda game, f: (splits.split_of(game.key, f), game), self._test_fraction)


def board_fen(split_fen: tuple[str, str]) -> str:
  return split_fen[1]  # What `resume.SkipKept` joins kept annotations on.


def resolved_fen(resolved: tuple) -> str:
  return resolved[1][1]  # The board of a ('todo' | 'kept', (split, fen), ...) from `resume.SkipKept`.


class TellTotal(beam.PTransform):
  """`resume.SkipKept`'s output -> the number of boards to annotate, told to the local progress line."""

  def __init__(self, progress_dir: str):
    super().__init__()
    self._progress_dir = progress_dir

  def expand(self, resolved: PCollection) -> PCollection:
    return (
      resolved
      | 'ToDo' >> beam.Filter(lambda t: t[0] == 'todo')
      | 'Ones' >> beam.Map(lambda _: 1)
      | 'Total' >> beam.CombineGlobally(sum).without_defaults()
      | 'TellProgress' >> beam.Map(progress.write_total, self._progress_dir)
    )


class ToRecords(beam.PTransform):
  """`AnnotateBoards`' outputs -> (set key, record) for every record set of `plan` (`annotation_records`) and
  failures.jsonl, as `shards.WriteShards` takes them."""

  def __init__(self, plan: job_results.JobPlan):
    super().__init__()
    self._plan = plan

  def expand(self, annotated: PCollection) -> PCollection:
    records = annotated | 'Splits' >> job_results.SplitRecords(
      self._plan, annotation_records.RECORDS_OF, _split_of, lambda a: a.annotation
    )
    failures = annotated | 'Failures' >> beam.Filter(lambda a: isinstance(a, Failed))
    keyed_failures = failures | 'KeyFailures' >> beam.WithKeys(self._plan.spec('failures').key)
    return (records, keyed_failures) | 'Records' >> beam.Flatten()


def _split_of(output: Annotated | Failed | EngineSeen) -> str | None:
  return output.split if isinstance(output, Annotated) else None


def engine_ids(output: Annotated | Failed | EngineSeen) -> Iterator[tuple[str, str]]:
  """The ('engine', identity) note of an `EngineSeen` (`job_results.WriteResults`)."""
  if isinstance(output, EngineSeen):
    yield 'engine', output.identity


def _split_list(values: tuple[str, ...]) -> list[str]:
  """Repeated and comma-separated file arguments as one list."""
  return [part for value in values for part in value.split(',') if part]
