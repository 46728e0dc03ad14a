"""Apache Beam transforms of the annotation pipeline (driver: pipelines/annotate.py).

    input files --ReadGames--> game texts --ParseGames--> games (+ skips by reason)
      --SplitGames--> (split, game) --ExtractBoards--> unique (split, fen)
      --AnnotateBoards--> (split, BoardAnnotation) (+ failures, engine ids)
      --ToRecords--> action_value / state_value / behavioral_cloning records
                     and/or board_value records (one per board, `searchless.boards`)

Counters (namespace ``searchless``) carry every count the manifest reports.
"""

import hashlib
import json
import os
import tempfile
import time

import apache_beam as beam
from apache_beam.metrics import Metrics

from searchless import boards
from searchless import engine as engine_lib
from searchless import pgn
from searchless import records

NAMESPACE = 'searchless'
SPLITS = ('train', 'test')


def counter(name: str):
  return Metrics.counter(NAMESPACE, name)


class ReadGames(beam.DoFn):
  """Streams each input file and emits the text of each game (`pgn.RawGame`)."""

  def __init__(self, max_games_per_file: int | None = None, skip_corrupt: bool = False):
    self._max_games = max_games_per_file
    self._skip_corrupt = skip_corrupt

  def process(self, path: str):
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

  SKIPPED = 'skipped'

  def __init__(self, game_filter: pgn.GameFilter):
    self._filter = game_filter

  def process(self, raw: pgn.RawGame):
    result = pgn.parse_game(raw, self._filter)
    if isinstance(result, pgn.Skip):
      counter(f'games_skipped/{result.reason}').inc()
      yield beam.pvalue.TaggedOutput(self.SKIPPED, result)
    else:
      counter('games_kept').inc()
      yield result


def split_of(game_key: str, test_fraction: float) -> str:
  """Deterministic game-level split: a hash of the game's key against the fraction.

  >>> split_of('https://lichess.org/abcdefgh', 0.0), split_of('https://lichess.org/abcdefgh', 1.0)
  ('train', 'test')
  """
  digest = hashlib.sha256(game_key.encode('utf-8')).digest()
  return 'test' if int.from_bytes(digest[:8], 'big') / 2**64 < test_fraction else 'train'


def dedup_key(fen: str, by: str) -> str:
  """The de-duplication key of a board: the whole FEN, or without the move clocks."""
  return fen if by == 'fen' else ' '.join(fen.split(' ')[:4])


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

  def expand(self, games):
    by, drop = self._by, self._drop

    def boards_of(split_game):
      split, game = split_game
      counter(f'boards_seen/{split}').inc(len(game.fens))
      for fen in game.fens:
        yield dedup_key(fen, by), (split, fen)

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
    self.total = None  # Boards in the whole job, where known.
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


class AnnotateBoards(beam.DoFn):
  """(split, fen) -> (split, BoardAnnotation) with one engine process per DoFn instance.

  Boards that still fail after the engine's retries go to the 'failures'
  output as dicts; each engine's identity goes once to the 'engines' output.
  """

  FAILURES = 'failures'
  ENGINES = 'engines'

  def __init__(self, config: engine_lib.EngineConfig, progress_dir: str | None = None):
    self._config = config
    self._progress_dir = progress_dir

  def setup(self):
    self._annotator = engine_lib.BoardAnnotator(self._config)
    self._annotator.start()
    self._announced = False
    self._progress = _Progress(self._progress_dir)
    self._progress.update(force=True)  # Marks the start of annotation.
    self._restarts = counter('engine_restarts')
    self._seconds = Metrics.distribution(NAMESPACE, 'ms_per_board')

  def process(self, split_fen, total_boards=None):
    split, fen = split_fen
    self._progress.total = total_boards
    if not self._announced:
      self._announced = True
      yield beam.pvalue.TaggedOutput(self.ENGINES, json.dumps(self._annotator.engine_id, sort_keys=True))
    restarts = self._annotator.restarts
    start = time.perf_counter()
    try:
      annotation = self._annotator.annotate(fen)
    except engine_lib.BoardFailed as e:
      counter(f'boards_failed/{split}').inc()
      self._progress.update(failures=1)
      yield beam.pvalue.TaggedOutput(self.FAILURES, {'split': split, 'fen': fen, 'reason': e.reason, 'attempts': e.attempts})
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

  def finish_bundle(self):
    self._progress.update(force=True)

  def teardown(self):
    annotator = getattr(self, '_annotator', None)
    if annotator is not None:
      annotator.close()


def action_value_records(annotation: engine_lib.BoardAnnotation):
  return [(annotation.fen, move, win_prob) for move, win_prob in annotation.action_values]


def state_value_records(annotation: engine_lib.BoardAnnotation):
  return [(annotation.fen, annotation.state_value)]


def behavioral_cloning_records(annotation: engine_lib.BoardAnnotation):
  return [] if annotation.best_move is None else [(annotation.fen, annotation.best_move)]


def board_value_records(annotation: engine_lib.BoardAnnotation):
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
