"""What the dataset jobs (``searchless-annotate``, ``searchless-import``) share: the options, checked once, the games
they keep, and the manifest's account of those games.

>>> options = DatasetOptions(input=('games.pgn',), output_dir='out', min_elo=2000, speeds='blitz,rapid')
>>> options.game_filter().speeds
('blitz', 'rapid')
>>> DatasetOptions(input=(), output_dir='out', test_fraction=1.5)
Traceback (most recent call last):
...
searchless.plumbing.errors.BadInput: --test_fraction must be in [0, 1), got 1.5
"""

import argparse
from collections.abc import Mapping, Sequence
import dataclasses
from typing import Any, ClassVar

from searchless.data import pgn
from searchless.data import shards
from searchless.data import splits
from searchless.plumbing import cli
from searchless.plumbing import errors


@dataclasses.dataclass(frozen=True)
class DatasetOptions:
  """The options of a job that reads games and writes record sets (each a flag of the same name; `output_dir` is
  ``--out``). A subclass adds its own, and names those to check in `POSITIVE` and `NON_NEGATIVE`."""

  input: tuple[str, ...]  # Input files or globs.
  output_dir: str  # Where the splits, manifest and logs go (local path, gs://, s3://).
  num_shards: int = shards.AUTO  # Shards per record set: 0 = by size (one <kind>_data.bag when small), N = exactly N.
  records_per_shard: int = shards.DEFAULT_RECORDS_PER_SHARD  # With num_shards 0: records per shard at most.
  compress: bool = False  # zstd-compressed .bagz instead of .bag.
  skip_corrupt_inputs: bool = False  # Keep a corrupt input's games read so far instead of failing.
  max_games: int | None = None  # Games read from each input file at most (its first N).
  min_elo: int | None = None  # Both players rated at least this.
  max_elo: int | None = None  # Both players rated at most this.
  speeds: str = ''  # Comma-separated Lichess speeds to keep; empty keeps all.
  exclude_bots: bool = False  # Drop games played by BOT accounts.
  test_fraction: float = splits.DEFAULT_TEST_FRACTION  # Fraction of games (by hash) in the test split.
  dedup_by: str = 'fen'  # One of splits.DEDUP_BY: what makes two boards one.
  parallelism: int = 0  # Lanes the work is spread over (`games.Distribute`); 0: the job picks.
  overwrite: bool = False  # Replace a dataset already in output_dir (else that is an error naming its files).
  restart: bool = False  # Drop the work an interrupted run kept (`searchless.data.resume`) instead of resuming it.

  POSITIVE: ClassVar[tuple[str, ...]] = ('max_games', 'records_per_shard')  # Options that must be >= 1 when set.
  NON_NEGATIVE: ClassVar[tuple[str, ...]] = ('min_elo', 'max_elo', 'num_shards', 'parallelism')  # ... >= 0.

  def __post_init__(self):
    """Raises ValueError naming the flag of the first bad option."""
    if not 0.0 <= self.test_fraction < 1.0:  # Also NaN.
      raise errors.BadInput(f'--test_fraction must be in [0, 1), got {self.test_fraction}')
    for name, low in [*((n, 1) for n in self.POSITIVE), *((n, 0) for n in self.NON_NEGATIVE)]:
      value = getattr(self, name)
      if value is not None and value < low:
        raise errors.BadInput(f'--{name} must be >= {low}, got {value}')
    if self.dedup_by not in splits.DEDUP_BY:
      raise errors.BadInput(f'--dedup_by must be one of {splits.DEDUP_BY}, got {self.dedup_by!r}')

  def game_filter(self) -> pgn.GameFilter:
    """The games kept: by rating, speed and bots."""
    return pgn.GameFilter(
      min_elo=self.min_elo,
      max_elo=self.max_elo,
      speeds=tuple(s for s in self.speeds.split(',') if s),
      exclude_bots=self.exclude_bots,
    )

  def games_manifest(self, counts: Mapping[str, int], skip_reasons: Sequence[str], **filters: Any) -> dict[str, Any]:
    """The manifest's ``games``: read, kept, skipped by reason, and the filters (`filters` adds the job's own)."""
    return {
      'read': counts.get('games_read', 0),
      'kept': counts.get('games_kept', 0),
      'skipped': {r: counts[f'games_skipped/{r}'] for r in skip_reasons if counts.get(f'games_skipped/{r}')},
      'filters': {
        'min_elo': self.min_elo,
        'max_elo': self.max_elo,
        'speeds': self.speeds,
        'exclude_bots': self.exclude_bots,
        'max_games_per_file': self.max_games,
        **filters,
      },
    }


def add_flags(parser: argparse.ArgumentParser, defaults: Mapping[str, Any]) -> tuple[Any, Any, Any]:
  """The flags of `DatasetOptions` (what the dataset jobs, annotate and import, share),
  with `defaults` (their one home: the job's options dataclass), in groups 'input and output', 'games' and 'boards',
  returned for the job's own flags. ``--output_dir`` is a deprecated spelling of ``--out``; the inputs are the job's
  to add."""
  io = parser.add_argument_group('input and output')
  io.add_argument(
    '--out',
    dest='output_dir',
    required=True,
    type=cli.output_dir,
    help='where the splits, the manifest and the logs go (local path, gs://, s3://)',
  )
  cli.add_deprecated_alias(parser, '--output_dir', '--out')
  io.add_argument(
    '--num_shards',
    type=int,
    default=defaults['num_shards'],
    help='shards per record set: 0 = by size (one <kind>_data.bag while the input is small, more as it grows, each '
    "at most --records_per_shard), N = exactly N shards, each record's shard fixed by a hash of its board",
  )
  io.add_argument(
    '--records_per_shard',
    type=int,
    default=defaults['records_per_shard'],
    help='with --num_shards 0: records per shard at most',
  )
  io.add_argument(
    '--overwrite',
    action='store_true',
    help='replace the dataset already in --out (its manifest, logs and record files); without it such a folder is '
    'an error',
  )
  io.add_argument(
    '--restart',
    action='store_true',
    help='drop the work an interrupted run kept in --out/.searchless-resume and start afresh; without it a rerun '
    'whose settings or inputs differ from that work is refused, naming what differs',
  )
  io.add_argument('--compress', action='store_true', help='write zstd-compressed .bagz instead of .bag')
  io.add_argument(
    '--skip_corrupt_inputs',
    action='store_true',
    help='count a truncated/corrupt compressed input and keep what was read from it, instead of failing',
  )
  games = parser.add_argument_group('games')
  games.add_argument(
    '--max_games',
    type=int,
    default=defaults['max_games'],
    help='read at most this many games from each input file (its first N)',
  )
  games.add_argument(
    '--min_elo', type=int, default=defaults['min_elo'], help='keep games where both players are rated at least this'
  )
  games.add_argument(
    '--max_elo', type=int, default=defaults['max_elo'], help='keep games where both players are rated at most this'
  )
  games.add_argument(
    '--speeds',
    default=defaults['speeds'],
    help='comma-separated Lichess speeds to keep (ultrabullet,bullet,blitz,rapid,classical,correspondence); '
    'empty keeps all',
  )
  games.add_argument('--exclude_bots', action='store_true', help='drop games played by BOT accounts')
  boards = parser.add_argument_group('boards')
  boards.add_argument(
    '--test_fraction',
    type=float,
    default=defaults['test_fraction'],
    help='fraction of games (and of database boards), by a hash, in the test split',
  )
  boards.add_argument(
    '--dedup_by',
    choices=splits.DEDUP_BY,
    default=defaults['dedup_by'],
    help='what makes two boards one: the whole FEN, or the position without move clocks',
  )
  boards.add_argument(
    '--parallelism',
    type=int,
    default=defaults['parallelism'],
    help="lanes the work is spread over; 0 = 4x the cluster's worker threads on Beam's Dask runner (which does not "
    'rebalance work by itself), 16 elsewhere',
  )
  return io, games, boards
