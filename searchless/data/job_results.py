"""What a Beam labelling job reports: its counts, the pieces it wrote and the engines it ran, in one file.

Counts are data (``(name, n)`` pairs summed per name), so any runner can carry
them; the job's last step, `WriteResults`, writes them with the written pieces,
the engines' identities and the notes for the user (one line each: a kept piece
dropped as unreadable, say) to ``OUTPUT_DIR/.searchless-tmp/results.json``, and
the driver reads that back (`read_results`) to write the manifest. `OutputSet`
names a file set a job writes;
"""

from collections.abc import Iterable, Iterator
import dataclasses
import json
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from searchless.data import shards

RESULTS = 'results.json'  # Written by `WriteResults` under shards.TMP_DIR of the output folder.

Count = tuple[str, int]  # A count of the manifest: (name, amount), summed per name.


class WriteResults(beam.DoFn):
  """The last step: one JSON file with the summed counts, the written pieces, the engines seen and the notes."""

  def __init__(self, path: str):
    self._path = path

  def process(self, key_items: tuple[None, Iterable[tuple[str, Any]]]) -> Iterator[str]:
    counts: dict[str, int] = {}
    pieces: list[dict[str, Any]] = []
    engines: set[str] = set()
    notes: set[str] = set()
    for kind, item in key_items[1]:
      if kind == 'count':
        name, amount = item
        counts[name] = counts.get(name, 0) + amount
      elif kind == 'piece':
        pieces.append(dataclasses.asdict(item))
      elif kind == 'engine':
        engines.add(item)
      elif kind == 'note':
        notes.add(item)
    results = {
      'counts': dict(sorted(counts.items())),
      'engines': sorted(engines),
      'notes': sorted(notes),
      'pieces': sorted(pieces, key=lambda p: (p['spec_key'], p['bucket'], p['part'])),
    }
    with FileSystems.create(self._path) as f:
      f.write(json.dumps(results, indent=1).encode('utf-8'))
    yield self._path


@dataclasses.dataclass(frozen=True)
class Results:
  """What a job's `WriteResults` wrote."""

  counts: dict[str, int]
  engines: list[str]  # The identities (JSON) of the engines that made the labels.
  pieces: list[shards.Piece]  # The files written, to commit.
  notes: list[str]  # Lines for the user (warnings).


def read_results(path: str) -> Results:
  """What `WriteResults` wrote to `path`."""
  with FileSystems.open(path) as f:
    results = json.loads(f.read().decode('utf-8'))
  return Results(
    results['counts'], results['engines'], [shards.Piece(**p) for p in results['pieces']], results['notes']
  )


@dataclasses.dataclass(frozen=True)
class OutputSet:
  """A file set the job writes: its `shards.ShardSpec`, and what it holds."""

  spec: shards.ShardSpec
  split: str | None  # None for the job-wide sets (failures, skipped).
  kind: str  # A record kind, 'failures' or 'skipped'.
