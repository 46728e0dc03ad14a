"""Apache Beam transforms of the annotation pipeline (driver: searchless/commands/annotate.py).

    input files --ReadGames--> game texts --ParseGames--> games (+ skips by reason)
      --SplitGames--> (split, game) --ExtractBoards--> unique (split, fen)
      --AnnotateBoards--> (split, BoardAnnotation) (+ failures, engine ids)
      --ToRecords--> action_value / state_value / behavioral_cloning records
                     and/or board_value records (one per board, `searchless.data.boards`)

Counters (namespace ``searchless``) carry every count the manifest reports.
"""

from collections.abc import Iterator
import dataclasses
import json
import os
import tempfile
import time
from typing import Final, Literal, TypeAlias

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.metrics.metricbase import Counter
from apache_beam.pvalue import PBegin, PCollection, PDone, TaggedOutput
from bagz.beam import bagzio

from searchless.data import boards
from searchless.engines import annotator as engine_lib
from searchless.data import pgn
from searchless.data import splits
from searchless.core import bags
from searchless.core import records

NAMESPACE = 'searchless'


def counter(name: str) -> Counter:
  return Metrics.counter(NAMESPACE, name)


class ReadGames(beam.DoFn):
  """Streams each input file and emits the text of each game (`pgn.RawGame`)."""

  def __init__(self, max_games_per_file: int | None = None, skip_corrupt: bool = False):
    self._max_games = max_games_per_file
    self._skip_corrupt = skip_corrupt

  def process(self, path: str) -> Iterator[pgn.RawGame]:
    games = counter('games_read')
    try:
      for index, raw in enumerate(pgn.iter_raw_games(path)):
        if self._max_games is not None and index >= self._max_games:
          break
        games.inc()
        yield raw
    except pgn.CorruptInputError:
      if not self._skip_corrupt:
        raise
      counter('corrupt_input_files').inc()


class ParseGames(beam.DoFn):
  """Parses game texts; kept games go to the main output, skips to 'skipped'."""

  SKIPPED: Final[Literal['skipped']] = 'skipped'

  def __init__(self, game_filter: pgn.GameFilter):
    self._filter = game_filter

  def process(self, raw: pgn.RawGame) -> Iterator[pgn.Game | TaggedOutput[Literal['skipped'], pgn.Skip]]:
    result = pgn.parse_game(raw, self._filter)
    if isinstance(result, pgn.Skip):
      counter(f'games_skipped/{result.reason}').inc()
      yield TaggedOutput(self.SKIPPED, result)
    else:
      counter('games_kept').inc()
      yield result


class _SplitsOfBoard(beam.CombineFn):
  """Per board key: {split: smallest FEN seen} (the FEN kept for that split)."""

  def create_accumulator(self):
    return {}

  def add_input(self, acc, split_fen):
    split, fen = split_fen
    if split not in acc or fen < acc[split]:
      acc[split] = fen
    return acc

  def merge_accumulators(self, accs):
    merged = {}
    for acc in accs:
      for split_fen in acc.items():
        self.add_input(merged, split_fen)
    return merged

  def extract_output(self, acc):
    return acc


class ExtractBoards(beam.PTransform):
  """(split, Game) -> unique (split, fen), de-duplicated within each split.

  A test board that also occurs in train is counted (``test_boards_in_train``)
  and kept, as in the paper, unless `drop_test_overlap`.
  """

  def __init__(self, dedup_by: str = 'fen', drop_test_overlap: bool = False):
    super().__init__()
    if dedup_by not in ('fen', 'position'):
      raise ValueError(f"dedup_by must be 'fen' or 'position', got {dedup_by!r}")
    self._by = dedup_by
    self._drop = drop_test_overlap

  def expand(self, games: PCollection[tuple[str, pgn.Game]]) -> PCollection[tuple[str, str]]:
    by, drop = self._by, self._drop

    def boards_of(split_game):
      split, game = split_game
      counter(f'boards_seen/{split}').inc(len(game.fens))
      for fen in game.fens:
        yield splits.dedup_key(fen, by), (split, fen)

    def unique(key_splits):
      _, splits = key_splits
      if 'test' in splits and 'train' in splits:
        counter('test_boards_in_train').inc()
        if drop:
          counter('test_boards_dropped').inc()
          splits = {'train': splits['train']}
      for split, fen in sorted(splits.items()):
        counter(f'boards/{split}').inc()
        yield split, fen

    return (
        games
        | 'BoardsOfGames' >> beam.FlatMap(boards_of)
        | 'SplitsPerBoard' >> beam.CombinePerKey(_SplitsOfBoard())
        | 'UniqueBoards' >> beam.FlatMap(unique)
    )


class _Progress:
  """Writes this worker's running totals to a file the local driver polls."""

  def __init__(self, directory: str | None):
    self._path = os.path.join(directory, f'{os.getpid()}-{id(self)}.json') if directory else None
    self.boards = self.action_values = self.failures = 0
    self.total: int | None = None  # Boards in the whole job, where known.
    self._last = 0.0

  def update(self, boards=0, action_values=0, failures=0, force=False):
    self.boards += boards
    self.action_values += action_values
    self.failures += failures
    now = time.monotonic()
    if self._path and (force or now - self._last > 0.5):
      self._last = now
      tmp = self._path + '.tmp'
      with open(tmp, 'w') as f:
        json.dump({'boards': self.boards, 'action_values': self.action_values,
                   'failures': self.failures, 'total': self.total}, f)
      os.replace(tmp, self._path)


# What `AnnotateBoards` emits: (split, annotation), and tagged failures and engine identities.
AnnotateBoardsOutput: TypeAlias = (tuple[str, engine_lib.BoardAnnotation]
                                   | TaggedOutput[Literal['failures'], dict[str, str | int]]
                                   | TaggedOutput[Literal['engines'], str])


class AnnotateBoards(beam.DoFn):
  """(split, fen) -> (split, BoardAnnotation) with one engine process per DoFn instance.

  Boards that still fail after the engine's retries go to the 'failures'
  output as dicts; each engine's identity goes once to the 'engines' output.
  """

  FAILURES: Final[Literal['failures']] = 'failures'
  ENGINES: Final[Literal['engines']] = 'engines'

  def __init__(self, config: engine_lib.EngineConfig, progress_dir: str | None = None):
    self._config = config
    self._progress_dir = progress_dir

  def setup(self) -> None:
    self._annotator = engine_lib.BoardAnnotator(self._config)
    self._annotator.start()
    self._announced = False
    self._progress = _Progress(self._progress_dir)
    self._progress.update(force=True)  # Marks the start of annotation.
    self._restarts = counter('engine_restarts')
    self._seconds = Metrics.distribution(NAMESPACE, 'ms_per_board')

  def process(self, split_fen: tuple[str, str], total_boards: int | None = None) -> Iterator[AnnotateBoardsOutput]:
    split, fen = split_fen
    self._progress.total = total_boards
    if not self._announced:
      self._announced = True
      yield TaggedOutput(self.ENGINES, json.dumps(self._annotator.engine_id, sort_keys=True))
    restarts = self._annotator.restarts
    start = time.perf_counter()
    try:
      annotation = self._annotator.annotate(fen)
    except engine_lib.BoardFailed as e:
      counter(f'boards_failed/{split}').inc()
      self._progress.update(failures=1)
      failure: dict[str, str | int] = {'split': split, 'fen': fen, 'reason': e.reason, 'attempts': e.attempts}
      yield TaggedOutput(self.FAILURES, failure)
    else:
      self._seconds.update(int(1000 * (time.perf_counter() - start)))
      counter(f'boards_annotated/{split}').inc()
      counter(f'action_values/{split}').inc(len(annotation.action_values))
      if annotation.best_move is None:  # Checkmate or stalemate.
        counter(f'terminal_boards/{split}').inc()
      self._progress.update(boards=1, action_values=len(annotation.action_values))
      yield split, annotation
    finally:
      self._restarts.inc(self._annotator.restarts - restarts)

  def finish_bundle(self) -> None:
    self._progress.update(force=True)

  def teardown(self) -> None:
    annotator = getattr(self, '_annotator', None)
    if annotator is not None:
      annotator.close()


def action_value_records(annotation: engine_lib.BoardAnnotation) -> list[tuple[str, str, float]]:
  return [(annotation.fen, move, win_prob) for move, win_prob in annotation.action_values]


def state_value_records(annotation: engine_lib.BoardAnnotation) -> list[tuple[str, float]]:
  return [(annotation.fen, annotation.state_value)]


def behavioral_cloning_records(annotation: engine_lib.BoardAnnotation) -> list[tuple[str, str]]:
  return [] if annotation.best_move is None else [(annotation.fen, annotation.best_move)]


def board_value_records(annotation: engine_lib.BoardAnnotation) -> list[records.BoardValue]:
  return [boards.from_action_values(annotation.fen, annotation.action_values, annotation.state_value)]


RECORDS_OF = {
    'action_value': action_value_records,
    'state_value': state_value_records,
    'behavioral_cloning': behavioral_cloning_records,
    records.BOARD_VALUE: board_value_records,
}
# --records choices: the record kinds each writes.
RECORD_SETS = {'chessbench': records.KINDS, 'board': (records.BOARD_VALUE,)}


def record_kinds(spec: str, mode: str = 'per_move') -> tuple[str, ...]:
  """The record kinds a ``--records`` value names (comma-separated RECORD_SETS keys) in engine `mode`.

  In ``board`` mode (one search per board, no move values) the ChessBench set
  is its state_value and behavioral_cloning datasets.

  >>> record_kinds('chessbench,board')
  ('action_value', 'state_value', 'behavioral_cloning', 'board_value')
  >>> record_kinds('chessbench', 'board')
  ('state_value', 'behavioral_cloning')
  """
  names = [n.strip() for n in spec.split(',') if n.strip()]
  unknown = [n for n in names if n not in RECORD_SETS]
  if unknown or not names:
    raise ValueError(f'--records {spec!r}: expected a comma-separated subset of {sorted(RECORD_SETS)}')
  kinds = tuple(kind for name in names for kind in RECORD_SETS[name])
  if mode == 'board':
    if 'board' in names:
      raise ValueError(f'--records {spec!r}: --mode board values no moves, so it has no board_value records; '
                       'use --records chessbench (state_value and behavioral_cloning)')
    kinds = tuple(k for k in kinds if k != 'action_value')
  return kinds


def new_progress_dir() -> str:
  return tempfile.mkdtemp(prefix='searchless-progress-')


@dataclasses.dataclass(frozen=True)
class AnnotateOptions:
  """What to annotate and how to write it (the flags of ``searchless-annotate``)."""

  input: tuple[str, ...]  # PGN files or globs whose games are split by hash.
  output_dir: str  # Where the splits, manifest and failures go (local path, gs://, s3://).
  test_input: tuple[str, ...] = ()  # PGN files whose games all go to the test split (disables test_fraction).
  num_shards: int = 1  # Shards per record set: 1 = one <kind>_data.bag, 0 = runner decides.
  records: str = 'chessbench,board'  # Record sets (see `record_kinds`).
  compress: bool = False  # zstd-compressed .bagz instead of .bag.
  skip_corrupt_inputs: bool = False  # Keep a corrupt input's games read so far instead of failing.
  max_games: int | None = None  # Games read from each input file at most (its first N).
  sample_games: int | None = None  # A uniform random sample of this many games.
  min_elo: int | None = None  # Both players rated at least this.
  max_elo: int | None = None  # Both players rated at most this.
  speeds: str = ''  # Comma-separated Lichess speeds to keep; empty keeps all.
  exclude_bots: bool = False  # Drop games played by BOT accounts.
  test_fraction: float = splits.DEFAULT_TEST_FRACTION  # Fraction of games (by hash) in the test split.
  dedup_by: str = 'fen'  # One of splits.DEDUP_BY.
  drop_test_overlap: bool = False  # Drop test boards that also occur in train (the paper kept them).
  mode: str = 'per_move'  # The engine mode (record_kinds depends on it).


class AnnotateGames(beam.PTransform):
  """The whole annotation graph, from the input files to the bags, failures and skips under output_dir.

  Apply it to a pipeline's root: ``pipeline | AnnotateGames(options, engine_config, progress_dir)``.
  After `expand`, `split_names`, `inputs` and `test_fraction` say what it writes.
  """

  def __init__(self, options: AnnotateOptions, engine_config: engine_lib.EngineConfig, progress_dir: str | None):
    super().__init__()
    self.options, self.engine_config, self.progress_dir = options, engine_config, progress_dir

  def expand(self, pbegin: PBegin) -> PDone:
    self.split_names, self.inputs, self.test_fraction = self._build(pbegin)
    return PDone(pbegin.pipeline)

  def _build(self, pbegin):
    o, engine_config, progress_dir = self.options, self.engine_config, self.progress_dir
    game_filter = pgn.GameFilter(
        min_elo=o.min_elo, max_elo=o.max_elo,
        speeds=tuple(s for s in o.speeds.split(',') if s), exclude_bots=o.exclude_bots)
    inputs = {'train': pgn.match_files(_split_list(o.input))}
    if o.test_input:
      inputs['test'] = pgn.match_files(_split_list(o.test_input), '--test_input')
    test_fraction = 0.0 if o.test_input else o.test_fraction
    split_names = ['train'] + (['test'] if o.test_input or test_fraction > 0 else [])

    games, skipped = [], []
    for source, paths in inputs.items():
      parsed = (
          pbegin
          | f'Files[{source}]' >> beam.Create(paths)
          | f'ReadGames[{source}]' >> beam.ParDo(ReadGames(o.max_games, o.skip_corrupt_inputs))
          | f'Distribute[{source}]' >> beam.Reshuffle()
          | f'ParseGames[{source}]' >> beam.ParDo(ParseGames(game_filter)).with_outputs(ParseGames.SKIPPED, main='games'))
      kept = parsed.games
      if o.sample_games:
        kept = (kept | f'Sample[{source}]' >> beam.combiners.Sample.FixedSizeGlobally(o.sample_games)
                | f'Unpack[{source}]' >> beam.FlatMap(lambda sample: sample))
      if source == 'test':
        kept = kept | 'AllTest' >> beam.Map(lambda game: ('test', game))
      else:
        kept = kept | 'SplitGames' >> beam.Map(lambda game, f: (splits.split_of(game.key, f), game), test_fraction)
      games.append(kept)
      skipped.append(parsed[ParseGames.SKIPPED])

    boards = (
        games | 'AllGames' >> beam.Flatten()
        | 'ExtractBoards' >> ExtractBoards(o.dedup_by, o.drop_test_overlap)
        | 'Distribute[boards]' >> beam.Reshuffle())
    total = boards | 'CountBoards' >> beam.combiners.Count.Globally()
    annotated = boards | 'AnnotateBoards' >> beam.ParDo(
        AnnotateBoards(engine_config, progress_dir),
        total_boards=beam.pvalue.AsSingleton(total),
    ).with_outputs(AnnotateBoards.FAILURES, AnnotateBoards.ENGINES, main='annotations')

    out = o.output_dir
    for split in split_names:
      of_split = annotated.annotations | f'Select[{split}]' >> beam.Filter(lambda a, s: a[0] == s, split) | f'Values[{split}]' >> beam.Values()
      for kind in record_kinds(o.records, o.mode):
        (of_split
         | f'{kind}[{split}]' >> beam.FlatMap(RECORDS_OF[kind])
         | f'Write[{split}/{kind}]' >> bagzio.WriteToBagz(
             bags.sink_path(FileSystems.join(out, split), kind, o.num_shards, o.compress),
             coder=records.CODERS[kind]))
    (annotated[AnnotateBoards.FAILURES]
     | 'FailuresToJson' >> beam.Map(lambda f: json.dumps(f, sort_keys=True))
     | 'WriteFailures' >> beam.io.WriteToText(FileSystems.join(out, 'failures'), file_name_suffix='.jsonl', shard_name_template=''))
    (skipped | 'AllSkipped' >> beam.Flatten()
     | 'SkippedToJson' >> beam.Map(lambda s: json.dumps({'reason': s.reason, 'location': s.location, 'detail': s.detail}))
     | 'WriteSkipped' >> beam.io.WriteToText(FileSystems.join(out, 'skipped'), file_name_suffix='.jsonl', shard_name_template=''))
    (annotated[AnnotateBoards.ENGINES]
     | 'DistinctEngines' >> beam.Distinct()
     | 'WriteEngines' >> beam.io.WriteToText(FileSystems.join(out, '_engines'), file_name_suffix='.jsonl', shard_name_template=''))
    return split_names, inputs, test_fraction


def _split_list(values: tuple[str, ...]) -> list[str]:
  """Repeated and comma-separated file arguments as one list."""
  return [part for value in values for part in value.split(',') if part]
