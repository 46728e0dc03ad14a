"""The review of many games as a Beam graph (``searchless-review``): every runner, the model through RunInference.

    input files --ReadGames--> texts --Distribute--> --ParseForReview--> games | skips
      games --SkipKept--> kept records | to do --Positions--> (game, ply) --RunInference--> PositionView
      --ByGame--> `review.review` --> one record per game (kept as it is done) --WriteShards--> games.jsonl

The model runs in Beam's RunInference (`apache_beam.ml.inference.base.RunInference`) with `PolicyHandler`, a
`ModelHandler` that loads the policy once per worker (RunInference shares it between the worker's threads) and
gets positions in batches that fill the predictor's compiled batch shapes (`batch_boards`). Each reviewed game is
kept in the output folder's resume pieces (`searchless.data.resume`), so an interrupted job resumes; the counts,
the players' accuracies by rating band among them, are data (`job_results.WriteResults`), the same on every runner.
"""

from collections.abc import Iterator, Sequence
import dataclasses
import hashlib
import io
import json
from typing import Any

import apache_beam as beam
from apache_beam.ml.inference.base import KeyedModelHandler, ModelHandler, RunInference
import chess
import chess.pgn

from searchless.data import games as games_lib
from searchless.data import job_results
from searchless.data import pgn
from searchless.data import progress
from searchless.data import resume
from searchless.data import shards
from searchless.play import review
from searchless.play import policy as policy_lib
from searchless.play import predictor as predictor_lib
from searchless.plumbing import cores

NAMESPACE = 'searchless-review'
PIECE_KIND = 'chunks'  # The resume pieces' kind: ((game, first ply), its positions' views) each.
BAND = 100  # Rating points per band of the summary.
MOVES_PER_BOARD = 32  # About the legal moves of a position: the per-move model's rows per board.


@dataclasses.dataclass(frozen=True)
class ReviewOptions:
  """What the job reviews and how (each a flag of ``searchless-review``)."""

  input: tuple[str, ...]
  output_dir: str
  checkpoint: str
  policy: str | None = None
  dtype: str = 'auto'
  limit: int | None = None  # The first N games of the input (file by file, in order; skipped ones count).
  sample_games: int | None = None  # A uniform sample of N games, by a hash of their identity (as annotate's).
  min_rating: int | None = None  # Both players rated at least this.
  batch_boards: int = 0  # Positions per model call (RunInference's batches); 0: by the model's compiled shapes.
  chunk_games: int = 64  # Chunks of positions (about a game each) a worker keeps per resume piece.
  parallelism: int = 16  # Lanes the games are spread over.
  skip_corrupt_inputs: bool = False
  overwrite: bool = False
  restart: bool = False


@dataclasses.dataclass(frozen=True)
class ReviewGame:
  """A kept game: its identity, where it is, its tags, its start and its moves (UCI)."""

  key: str
  location: str
  headers: dict[str, str]
  start_fen: str
  moves: tuple[str, ...]


class ParseForReview(beam.DoFn):
  """Game texts -> a `ReviewGame` for each kept game, a `pgn.Skip` for each other (`pgn.parse_game`'s reasons)."""

  def __init__(self, game_filter: pgn.GameFilter):
    self._filter = game_filter

  def process(self, raw: pgn.RawGame) -> Iterator[ReviewGame | pgn.Skip]:
    parsed = pgn.parse_game(raw, self._filter, moves_only=True)
    if isinstance(parsed, pgn.Skip):
      yield parsed
      return
    headers = chess.pgn.read_headers(io.StringIO(raw.text))
    tags = dict(headers) if headers is not None else {}
    yield ReviewGame(parsed.key, parsed.location, tags, parsed.fens[0], parsed.moves)


# Consecutive positions of a game: the first one's FEN, and the move played in each (UCI; None: the game's end).
Chunk = tuple[str, tuple[str | None, ...]]


def positions(game: ReviewGame, size: int) -> Iterator[tuple[tuple[str, int], Chunk]]:
  """((game, first ply), chunk) for the positions of `game` (the last included), `size` consecutive ones a chunk.

  >>> game = ReviewGame('g', 'g.pgn:1', {}, chess.STARTING_FEN, ('e2e4', 'e7e5', 'g1f3'))
  >>> for key, (fen, moves) in positions(game, 3):
  ...   print(key, fen, moves)
  ('g', 0) rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1 ('e2e4', 'e7e5', 'g1f3')
  ('g', 3) rnbqkbnr/pppp1ppp/8/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R b KQkq - 1 2 (None,)
  """
  board = chess.Board(game.start_fen)
  moves = [*game.moves, None]
  for first in range(0, len(moves), size):
    yield (game.key, first), (board.fen(), tuple(moves[first : first + size]))
    for move in moves[first : first + size]:
      if move is not None:
        board.push_uci(move)


def boards(chunk: Chunk) -> tuple[list[chess.Board], list[chess.Move | None]]:
  """A chunk's boards (each replayed from the one before: no FEN but the first one's) and the moves played."""
  fen, moves = chunk
  board = chess.Board(fen)
  played = [None if move is None else chess.Move.from_uci(move) for move in moves]
  out = []
  for move in played:
    out.append(board.copy(stack=False))
    if move is not None:
      board.push(move)
  return out, played


def boards_per_call(kind: str, packed: bool) -> int:
  """Positions per model call that fill the predictor's largest compiled batch: a board-packed model's largest
  board bucket, a behavioral-cloning model's rows, else its rows over the moves of a board (`MOVES_PER_BOARD`).

  >>> boards_per_call('action_value', False), boards_per_call('action_value', True)
  (8, 64)
  """
  if packed:
    return max(predictor_lib.BOARD_BUCKETS)
  rows = max(predictor_lib.BATCH_BUCKETS)
  return rows if kind == policy_lib.BEHAVIORAL_CLONING else max(1, rows // MOVES_PER_BOARD)


def default_batch(checkpoint: str, policy: str | None) -> int:
  """`boards_per_call` of a checkpoint, from its saved config (no parameters read)."""
  from searchless.model import loading  # Loads JAX's checkpointing.
  from searchless.model.config import ModelConfig

  experiment = loading.experiment_config(loading.resolve(checkpoint))
  packed = experiment is not None and ModelConfig.from_config(experiment).packed
  kind = policy or loading.trained_policy(checkpoint, experiment) or policy_lib.ACTION_VALUE
  return boards_per_call(kind, packed)


class PolicyHandler(ModelHandler[Chunk, list[review.PositionView], policy_lib.Policy]):
  """RunInference's handler of the policy: loaded once per worker (`load_model`, shared by the worker's threads),
  each chunk of a game's positions to their `review.PositionView`s in one `Policy.analyse_many` call.

  The examples are chunks of `batch` consecutive positions of one game (`positions`), `batch` being what fills the
  predictor's largest compiled shape (`boards_per_call`), and RunInference's batches are one chunk each: a
  position's numbers depend, in their last float bits, on the batch shape of the call it is in (XLA compiles each
  shape apart), so a batch of positions from whichever games came together would give other bytes on every run and
  every runner (7 of 731 moves differed in the 6th decimal between two runs of 12 games).
  """

  def __init__(self, checkpoint: str, policy: str | None, dtype: str, slots: tuple[str, int] | None = None):
    super().__init__()
    self._checkpoint, self._policy, self._dtype, self._slots = checkpoint, policy, dtype, slots

  def load_model(self) -> policy_lib.Policy:
    if self._slots is not None:  # Local workers, one a core: each on its own (`cores.claim`), before JAX starts.
      cores.claim(*self._slots)
    from searchless.play import player  # Loads JAX: on the workers only.

    loaded = player.load_policy(self._checkpoint, policy=self._policy, compute_dtype=self._dtype)
    if loaded.kind == policy_lib.BEHAVIORAL_CLONING:
      raise ValueError('a review needs win probabilities: a behavioral-cloning policy predicts moves, not values')
    # No `warm_up`: it times calls to plan how rows are cut into batch shapes, and a plan that differs between
    # workers gives other bytes. The shapes compile at their first call (JAX's persistent cache keeps them).
    return loaded

  def batch_elements_kwargs(self) -> dict[str, Any]:
    return {'min_batch_size': 1, 'max_batch_size': 1}  # A chunk fills the compiled shapes by itself.

  def run_inference(
    self, batch: Sequence[Chunk], model: policy_lib.Policy, inference_args: dict[str, Any] | None = None
  ) -> list[list[review.PositionView]]:
    results = []
    for chunk in batch:
      results.append(review.views(model, *boards(chunk)))
    return results

  def get_num_bytes(self, batch: Sequence[Chunk]) -> int:
    return sum(len(fen) + 5 * len(moves) for fen, moves in batch)


def record(game: ReviewGame, views: Sequence[review.PositionView]) -> dict[str, Any]:
  """A game's line of games.jsonl: its identity, place and tags, the players' accuracies and every move's review."""
  reviewed = review.review(game.start_fen, game.moves, views)
  return {
    'key': game.key,
    'location': game.location,
    'headers': game.headers,
    'start_fen': game.start_fen,
    'players': reviewed['players'],
    'moves': reviewed['moves'],
  }


def encode(line: dict[str, Any]) -> bytes:
  return json.dumps(line, ensure_ascii=False).encode('utf-8')


def rating(headers: dict[str, str], color: str) -> int | None:
  """A player's rating from its ``WhiteElo``/``BlackElo`` tag (None: missing or ``?``)."""
  text = headers.get(f'{color.capitalize()}Elo', '').strip()
  return int(text) if text.isdigit() else None


def record_counts(line: dict[str, Any]) -> Iterator[job_results.Count]:
  """The counts of a reviewed game: positions, marks, and each rated player's accuracy in its band (hundredths of
  a point, summed and squared, so that any runner sums them exactly)."""
  yield 'games_reviewed', 1
  yield 'positions', len(line['moves']) + 1
  for color, player in line['players'].items():
    for name in review.MARK_NAMES:
      yield f'marks/{name}', player[name]
    elo = rating(line['headers'], color)
    if elo is None or player['accuracy'] is None:
      continue
    band = elo // BAND * BAND
    hundredths = round(100 * player['accuracy'])
    yield f'band/{band}/n', 1
    yield f'band/{band}/sum', hundredths
    yield f'band/{band}/squares', hundredths * hundredths


class KeepViews(beam.DoFn):
  """Keeps each chunk's views in the resume folder as the model gives them (`resume.PieceWriter`, `chunk` chunks a
  piece or every two minutes), passing them on: an interrupted job keeps what the model did."""

  def __init__(self, directory: str, chunk: int, progress_dir: str | None):
    self._directory, self._chunk, self._progress_dir = directory, chunk, progress_dir

  def setup(self) -> None:
    self._writer = resume.PieceWriter(self._directory, PIECE_KIND, self._chunk)
    self._progress = progress.WorkerProgress(self._progress_dir) if self._progress_dir else None

  def process(self, keyed: tuple[tuple[str, int], list[review.PositionView]]) -> Iterator[Any]:
    self._writer.add(keyed[0], keyed[1])
    if self._progress is not None:
      self._progress.update(boards=len(keyed[1]))
    yield keyed

  def finish_bundle(self) -> None:
    self._writer.commit()
    if self._progress is not None:
      self._progress.update(force=True)


def is_text(item: Any) -> bool:
  return isinstance(item, pgn.RawGame)


def is_game(item: Any) -> bool:
  return isinstance(item, ReviewGame)


def is_skip(item: Any) -> bool:
  return isinstance(item, pgn.Skip)


def location(raw: pgn.RawGame) -> str:
  return raw.location


def chunk_key(item: tuple[tuple[str, int], Any]) -> tuple[str, int]:
  """A chunk's key, (game, first ply): what its resume piece holds it by."""
  return item[0]


def by_game(game: ReviewGame) -> tuple[str, ReviewGame]:
  return game.key, game


def views_by_game(keyed: tuple[tuple[str, int], list[review.PositionView]]) -> tuple[str, tuple[int, Any]]:
  (game, first), views = keyed
  return game, (first, views)


def joined(key_groups: tuple[str, dict[str, Any]]) -> Iterator[dict[str, Any]]:
  """A game and its chunks' views (by first ply) as its record."""
  _, groups = key_groups
  game = next(iter(groups['game']))
  views = [view for _, chunk in sorted(groups['views'], key=lambda item: item[0]) for view in chunk]
  yield record(game, views)


def read_count(item: Any) -> job_results.Count:
  return ('corrupt_input_files' if isinstance(item, games_lib.CorruptInput) else 'games_read', 1)


def parse_count(item: ReviewGame | pgn.Skip) -> job_results.Count:
  return ('games_kept', 1) if isinstance(item, ReviewGame) else (f'games_skipped/{item.reason}', 1)


def kept_count(resolved: tuple[Any, ...]) -> Iterator[job_results.Count]:
  if resolved[0] == 'kept':  # ('kept', (key, chunk), views): a chunk an interrupted run reviewed.
    yield 'positions_from_an_interrupted_run', len(resolved[2])


class FirstGames(beam.PTransform):
  """``--limit``: the first `limit` game texts of `paths` (file by file in the order given, then by line)."""

  def __init__(self, limit: int, paths: Sequence[str]):
    super().__init__()
    self._limit, self._index = limit, {path: i for i, path in enumerate(paths)}

  def expand(self, texts: beam.PCollection) -> beam.PCollection:
    index = self._index
    return (
      texts
      | 'Top' >> beam.combiners.Top.Of(self._limit, key=lambda raw: (-index[raw.path], -raw.line))  # The largest.
      | 'Unpack' >> beam.FlatMap(lambda first: first)
    )


class ReviewChunks(beam.PTransform):
  """`resume.SkipKept`'s chunks -> ((game, first ply), views) for each: those to do through the model (RunInference,
  `PolicyHandler`, each kept as it comes: `KeepViews`), and those an interrupted run kept, from its pieces.
  `slots`: (a folder, the local workers) for `cores.claim`; None elsewhere."""

  def __init__(self, options: ReviewOptions, progress_dir: str | None, slots: tuple[str, int] | None = None):
    super().__init__()
    self._options, self._progress_dir, self._slots = options, progress_dir, slots

  def expand(self, resolved: beam.PCollection) -> beam.PCollection:
    o = self._options
    todo = resolved | 'ToDo' >> beam.Filter(lambda r: r[0] == 'todo') | 'Chunks' >> beam.Map(lambda r: r[1])
    kept = (
      resolved
      | 'FromPieces' >> beam.Filter(lambda r: r[0] == 'kept')
      | 'KeptViews' >> beam.Map(lambda r: (r[1][0], r[2]))
    )
    if self._progress_dir:
      _ = (
        todo
        | 'Sizes' >> beam.Map(lambda item: len(item[1][1]))  # (key, (first FEN, moves))
        | 'Total' >> beam.CombineGlobally(sum).without_defaults()
        | 'TellProgress' >> beam.Map(progress.write_total, self._progress_dir)
      )
    computed = (
      todo
      | 'SpreadChunks' >> games_lib.Distribute(lambda item: f'{item[0][0]} {item[0][1]}', o.parallelism)
      | 'Model' >> RunInference(KeyedModelHandler(PolicyHandler(o.checkpoint, o.policy, o.dtype, self._slots)))
      | 'Keep' >> beam.ParDo(KeepViews(resume.folder(o.output_dir), o.chunk_games, self._progress_dir))
    )
    return (computed, kept) | 'AllViews' >> beam.Flatten()


def outputs(out: str) -> list[shards.ShardSpec]:
  """The job's file sets: games.jsonl and skipped.jsonl."""
  return [shards.ShardSpec(out, 'games', '.jsonl'), shards.ShardSpec(out, 'skipped', '.jsonl')]


def record_sets(specs: Sequence[shards.ShardSpec]) -> list[shards.RecordSet]:
  games_spec, skips_spec = specs
  return [
    shards.RecordSet(games_spec, encode, lambda line: line['key']),
    shards.RecordSet(skips_spec, games_lib.skip_line, lambda skip: skip.location),
  ]


def model_identity(checkpoint: str) -> str:
  """What says the model changed: a sha256 of every file of its parameters (their names and bytes)."""
  from searchless.model import loading  # Loads JAX's checkpointing.

  root = loading.resolve(checkpoint)
  digest = hashlib.sha256()

  def walk(folder: Any, prefix: str) -> None:
    for path in sorted(folder.iterdir(), key=lambda p: p.name):
      if path.is_dir():
        walk(path, f'{prefix}{path.name}/')
      else:
        digest.update(f'{prefix}{path.name}'.encode('utf-8') + b'\0')
        digest.update(path.read_bytes())

  walk(root, '')
  return f'sha256 {digest.hexdigest()[:16]}'
