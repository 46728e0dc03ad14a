"""Bag files of ChessBench records, through the PyPI `bagz` package.

Names follow the published ChessBench layout:

* one file: ``<dir>/<kind>_data.bag`` (``.bagz`` when zstd-compressed);
* shards:   ``<dir>/<kind>-00000-of-00004_data.bag`` …, addressed together by
  the spec ``<dir>/<kind>@4_data.bag``.

`reader` accepts a file, an ``@N`` spec, a glob, or a comma-separated list.
"""

from collections.abc import Iterable
import os
import re

import bagz

from searchless.core import records
from searchless.plumbing import errors
from searchless.plumbing import files

_SHARD_RE = re.compile(r'^(?P<kind>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})(?P<suffix>_data\.bagz?)$')


def extension(compressed: bool) -> str:
  return '.bagz' if compressed else '.bag'


def sink_path(directory: str, kind: str, num_shards: int, compressed: bool) -> str:
  """Returns the `WriteToBagz` path for `kind` records under `directory`.

  `num_shards`: 1 writes a single ``<kind>_data.bag``; N > 1 writes N shards;
  0 lets the runner choose the number of shards.
  """
  ext = extension(compressed)
  if num_shards == 1:
    return files.join(directory, f'{kind}_data{ext}@0')
  count = '*' if num_shards == 0 else str(num_shards)
  return files.join(directory, f'{kind}@{count}_data{ext}')


def find(directory: str, kind: str) -> str:
  """Returns the reader spec of the `kind` records in `directory` (file or shards).

  Raises FileNotFoundError naming what was looked for when there are none.
  """
  candidates = []
  for ext in ('.bag', '.bagz'):
    single = files.join(directory, f'{kind}_data{ext}')
    if files.exists(single):
      candidates.append(single)
    pattern = files.join(directory, f'{kind}-*-of-*_data{ext}')
    shards = files.match(pattern)
    if shards:
      counts: set[str] = set()
      for shard in shards:
        if (match := _SHARD_RE.match(os.path.basename(shard))) is None:
          raise errors.BadInput(f'shard {shard!r} is not named KIND-NNNNN-of-NNNNN_data.bag[z]')
        counts.add(match['count'])
      if len(counts) != 1 or len(shards) != int(counts.pop()):
        raise errors.BadInput(f'incomplete or mixed shard set for {pattern}: {len(shards)} files')
      candidates.append(','.join(shards))
  if not candidates:
    raise errors.MissingInput(
      f'no {kind} records in {directory} (looked for {kind}_data.bag[z] and {kind}-*-of-*_data.bag[z])'
    )
  if len(candidates) > 1:
    raise errors.BadInput(f'several {kind} record sets in {directory}: {candidates}')
  return candidates[0]


def expand(spec: str) -> str:
  """Expands globs in a comma-separated spec into the file list bagz reads."""
  parts = []
  for part in spec.split(','):
    if '://' not in part and os.path.isdir(part):
      raise errors.NotAFile(
        f'bag spec {part!r} is a directory: pass its bags, e.g. {os.path.join(part, "action_value*")!r}'
      )
    if any(c in part for c in '*?['):
      matched = files.match(part)
      if not matched:
        raise errors.MissingInput(f'no bag files match {part!r}')
      parts += matched
    else:
      parts.append(part)
  return ','.join(parts)


def reader(spec: str) -> bagz.Reader:
  """Opens the records of `spec` (file, ``@N`` spec, glob or comma list)."""
  expanded = expand(spec)
  try:
    return bagz.Reader(expanded)
  except FileNotFoundError as e:
    raise errors.MissingInput(f'cannot open bag {spec!r}: {e}') from None
  except ValueError as e:
    raise errors.BadInput(f'cannot read bag {spec!r} (truncated or not a bag file?): {e}') from None


def read_records(spec: str, kind: str) -> list:
  """Returns all records of `kind` in `spec`, decoded (for small sets and tests)."""
  return [records.decode(kind, data) for data in reader(spec)]


def write_records(path: str, kind: str, items: Iterable[tuple]) -> int:
  """Writes records of `kind` to one local bag file; returns how many."""
  count = 0
  with bagz.Writer(path) as writer:
    for item in items:
      writer.write(records.encode(kind, item))
      count += 1
  return count
