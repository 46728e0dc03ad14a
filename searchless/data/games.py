"""Beam transforms from PGN files to distinct boards: read, parse, spread, extract (annotation, the label import).

    input files --ReadGames--> game texts --Distribute--> --ParseGames--> games | skips
      (split, game) --ExtractBoards--> unique (split, fen), with its counts

Every step has one output (kinds of elements are told apart by type), so they
run on every Beam runner, Beam's Dask runner included (`Distribute` says why it
is not a plain Reshuffle there).
"""

from collections.abc import Callable, Iterator
import dataclasses
import hashlib
import json
from typing import Any

import apache_beam as beam
from apache_beam.pvalue import PCollection

from searchless.data import pgn
from searchless.plumbing import errors

from searchless.data import job_results
from searchless.data import shards
from searchless.data import splits
from searchless.data import streams


def sample_rank(game: Any) -> tuple[bytes, str]:
  """Where a game (a `pgn.Game`, or anything with its ``key`` and ``location``) stands in `--sample_games`' draw:
  a hash of its identity (its Lichess URL, else a hash of its text), then its file:line. The games of smallest rank
  are a uniform sample that every run draws alike. The hash is salted: the split (`splits.split_of`) hashes the
  same identity, and a sample of the smallest unsalted hashes would all be test games.

  >>> sample_rank(pgn.Game('https://lichess.org/abcdefgh', 'g.pgn:1', ()))[0].hex()[:8]
  '7f3b8936'
  """
  return hashlib.sha256(f'sample {game.key}'.encode('utf-8')).digest(), game.location


class SampleGames(beam.PTransform):
  """The `n` games of smallest `sample_rank` (``--sample_games``: annotate's, the review's)."""

  def __init__(self, n: int):
    super().__init__()
    self._n = n

  def expand(self, games: PCollection) -> PCollection:
    return (
      games
      | 'Top' >> beam.combiners.Top.Of(self._n, key=sample_rank, reverse=True)
      | 'Unpack' >> beam.FlatMap(lambda sample: sample)
    )


@dataclasses.dataclass(frozen=True)
class CorruptInput:
  """Emitted by `ReadGames` for an input that ended in a corrupt stream (with skip_corrupt)."""

  path: str


class ReadGames(beam.DoFn):
  """Streams each input file and emits the text of each game (`pgn.RawGame`), in file order.

  A corrupt input raises, or with `skip_corrupt` ends with a `CorruptInput`.
  """

  def __init__(self, max_games_per_file: int | None = None, skip_corrupt: bool = False):
    self._max_games = max_games_per_file
    self._skip_corrupt = skip_corrupt

  def process(self, path: str) -> Iterator[pgn.RawGame | CorruptInput]:
    try:
      for index, raw in enumerate(pgn.iter_raw_games(path)):
        if self._max_games is not None and index >= self._max_games:
          break
        yield raw
    except streams.CorruptInputError:
      if not self._skip_corrupt:
        raise
      yield CorruptInput(path)


class ParseGames(beam.DoFn):
  """Parses game texts: a `pgn.Game` for each kept game, a `pgn.Skip` for each other."""

  def __init__(self, game_filter: pgn.GameFilter):
    self._filter = game_filter

  def process(self, raw: pgn.RawGame) -> Iterator[pgn.Game | pgn.Skip]:
    yield pgn.parse_game(raw, self._filter)


class Distribute(beam.PTransform):
  """A reshuffle that spreads the work on every runner, Beam's Dask runner included.

  Elements are grouped by a stable hash of `key_of` (as `beam.Reshuffle`
  groups by random keys), together with `parallelism` empty lanes: Beam's Dask
  runner turns Reshuffle into a no-op and keeps a collection's partition count
  through GroupByKey, so without the lanes (each its own partition, see
  `searchless.pipelines.annotate`) one input file would stay one partition to the end.
  """

  def __init__(self, key_of: Callable[[Any], str], parallelism: int):
    super().__init__()
    self._key_of, self._parallelism = key_of, parallelism

  def expand(self, pcoll: PCollection) -> PCollection:
    key_of = self._key_of
    lanes = pcoll.pipeline | 'Lanes' >> beam.Create([(lane, None) for lane in range(self._parallelism)])
    keyed = pcoll | 'Key' >> beam.Map(lambda x: (shards.bucket_of(key_of(x), 1 << 62), x))
    return (
      (keyed, lanes)
      | 'WithLanes' >> beam.Flatten()
      | 'Group' >> beam.GroupByKey()
      | 'Ungroup' >> beam.FlatMap(lambda key_values: [v for v in key_values[1] if v is not None])
    )


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
  and kept, as in the paper, unless `drop_test_overlap`. After `expand`,
  `counts` is the collection of its counts (boards seen and kept per split,
  overlap).
  """

  def __init__(self, dedup_by: str = 'fen', drop_test_overlap: bool = False):
    super().__init__()
    if dedup_by not in ('fen', 'position'):
      raise errors.BadInput(f"dedup_by must be 'fen' or 'position', got {dedup_by!r}")
    self._by = dedup_by
    self._drop = drop_test_overlap

  def expand(self, games: PCollection[tuple[str, pgn.Game]]) -> PCollection[tuple[str, str]]:
    by, drop = self._by, self._drop

    def boards_of(split_game):
      split, game = split_game
      for fen in game.fens:
        yield splits.dedup_key(fen, by), (split, fen)

    def kept(key_splits):
      _, of_split = key_splits
      if drop and 'test' in of_split and 'train' in of_split:
        return {'train': of_split['train']}
      return of_split

    def overlap(key_splits) -> Iterator[job_results.Count]:
      _, of_split = key_splits
      if 'test' in of_split and 'train' in of_split:
        yield 'test_boards_in_train', 1
        if drop:
          yield 'test_boards_dropped', 1

    per_board = (
      games | 'BoardsOfGames' >> beam.FlatMap(boards_of) | 'SplitsPerBoard' >> beam.CombinePerKey(_SplitsOfBoard())
    )
    unique = per_board | 'UniqueBoards' >> beam.FlatMap(lambda ks: sorted(kept(ks).items()))
    self.counts = (
      games | 'CountSeen' >> beam.Map(lambda split_game: (f'boards_seen/{split_game[0]}', len(split_game[1].fens))),
      per_board | 'CountOverlap' >> beam.FlatMap(overlap),
      unique | 'CountBoards' >> beam.Map(lambda split_fen: (f'boards/{split_fen[0]}', 1)),
    ) | 'Counts' >> beam.Flatten()
    return unique


def skip_line(skip: pgn.Skip) -> bytes:
  """A skipped game as a line of skipped.jsonl."""
  return json.dumps({'reason': skip.reason, 'location': skip.location, 'detail': skip.detail}).encode('utf-8')
