"""The command line's one look: every console command's parser shows each default once, where it says something,
and an output path of the wrong kind (a file where a folder goes, or the reverse) is refused naming its flag.

>>> p = ArgumentParser(prog='x')
>>> _ = p.add_argument('--n', type=int, default=3, help='how many')
>>> _ = p.add_argument('--out', help='where to write')
>>> _ = p.add_argument('--quiet', action='store_true', help='no progress')
>>> _ = p.add_argument('--draw', type=int, default=None, help='adjudicate draws (default: off)')
>>> print('\\n'.join(line.strip() for line in p.format_help().splitlines()[-4:]))
--n N        how many (default: 3)
--out OUT    where to write
--quiet      no progress
--draw DRAW  adjudicate draws (default: off)
"""

import argparse
from collections.abc import Mapping, Sequence
import os
import re
from typing import Any, NoReturn

from searchless.data import splits


def input_file(value: str) -> str:
  """An argparse type: a file to read; a missing one, or a folder, is refused (gs://... is left to the reader)."""
  if '://' not in value:
    if os.path.isdir(value):
      raise argparse.ArgumentTypeError(f'{value!r} is a folder, not a file')
    if not os.path.exists(value):
      raise argparse.ArgumentTypeError(f'{value!r}: no such file')
  return value


def output_dir(value: str) -> str:
  """An argparse type: a folder to write into (made if missing); an existing file there is refused."""
  if '://' not in value and os.path.exists(value) and not os.path.isdir(value):
    raise argparse.ArgumentTypeError(f'{value!r} is a file, not a folder')
  return value


def output_file(value: str) -> str:
  """An argparse type: a file to write; an existing folder there is refused."""
  if '://' not in value and os.path.isdir(value):
    raise argparse.ArgumentTypeError(f'{value!r} is a folder, not a file')
  return value


# argparse's error about one argument's value, and those about the flag's use (which show the usage).
_BAD_VALUE = re.compile(r'^argument [^:]+: ')
_WRONG_FLAG = re.compile(r'^argument [^:]+: (expected .* argument|not allowed with|ignored explicit argument)')


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
  """Appends ``(default: X)`` unless X is None, False or empty (nothing to say) or the help names its default."""

  def _get_help_string(self, action: argparse.Action) -> str | None:
    text = action.help or ''
    if action.default in (None, False, argparse.SUPPRESS, []) or 'default' in text.lower():
      return text
    return super()._get_help_string(action)


class ArgumentParser(argparse.ArgumentParser):
  """`argparse.ArgumentParser` with `DefaultsHelpFormatter` unless another formatter is given, and no abbreviated
  flags: ``--num`` is not taken for ``--num_shards`` (a typo must not start a long job)."""

  def __init__(self, *args, **kwargs):
    kwargs.setdefault('formatter_class', DefaultsHelpFormatter)
    kwargs['allow_abbrev'] = False
    super().__init__(*args, **kwargs)

  def error(self, message: str) -> NoReturn:  # type: ignore[override]
    """A bad value for a flag is one line naming the flag; the usage is printed only for a wrong flag (unknown,
    missing, or without its value)."""
    if _BAD_VALUE.match(message) and not _WRONG_FLAG.search(message):
      self.exit(2, f'error: {message}\n')
    super().error(message)

  def parse_known_args(  # type: ignore[override]  # parse_args calls it.
    self,
    args: Sequence[str] | None = None,
    namespace: argparse.Namespace | None = None,
  ) -> tuple[argparse.Namespace, list[str]]:
    parsed = super().parse_known_args(args, namespace)
    # This program's flags are these; absl's (grain reads them in its worker processes) take their defaults.
    from absl import flags

    if not flags.FLAGS.is_parsed():
      flags.FLAGS.mark_as_parsed()
    return parsed


def add_dataset_flags(parser: argparse.ArgumentParser, defaults: Mapping[str, Any]) -> tuple[Any, Any, Any]:
  """The flags of `searchless.data.job_options.DatasetOptions` (what the dataset jobs, annotate and import, share),
  with `defaults` (their one home: the job's options dataclass), in groups 'input and output', 'games' and 'boards',
  returned for the job's own flags. ``--out`` is also ``--output_dir``; the inputs are the job's to add."""
  io = parser.add_argument_group('input and output')
  io.add_argument(
    '--out',
    '--output_dir',
    dest='output_dir',
    required=True,
    type=output_dir,
    help='where the splits, the manifest and the logs go (local path, gs://, s3://)',
  )
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
