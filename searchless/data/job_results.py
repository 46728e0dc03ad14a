"""What a Beam labelling job reports: its counts, the pieces it wrote and the engines it ran, in one file.

Counts are data (``(name, n)`` pairs summed per name), so any runner can carry
them; the job's last step, `WriteResults`, writes them with the written pieces,
the engines' identities and the notes for the user (one line each: a kept piece
dropped as unreadable, say) to ``OUTPUT_DIR/.searchless-tmp/results.json``, and
the driver reads that back (`read_results`) to write the manifest. `OutputSet`
names a file set a job writes, `JobPlan` all that a job reads and writes.
"""

from collections.abc import Callable, Iterable, Iterator, Mapping
import dataclasses
import json
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.pvalue import PCollection

from searchless.data import shards

RESULTS = 'results.json'  # Written by `WriteResults` under shards.TMP_DIR of the output folder.

Count = tuple[str, int]  # A count of the manifest: (name, amount), summed per name.


def results_path(output_dir: str) -> str:
  """Where a job writing to `output_dir` leaves its counts, pieces and notes (`WriteResults`)."""
  return FileSystems.join(output_dir, shards.TMP_DIR, RESULTS)


class _WriteFile(beam.DoFn):
  """All of a job's results, gathered under one key -> one JSON file (`read_results`)."""

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


class WriteResults(beam.PTransform):
  """The last step of a job: {'counts': (name, n) pairs, 'pieces': the `shards.Piece`s written, 'notes': ('engine',
  identity) and ('note', line) pairs} -> one JSON file at `path`, read back by `read_results`.

  It depends on every other step that matters (Beam's Dask runner computes only the last step's inputs), and it
  writes its file even when every input is empty.
  """

  def __init__(self, path: str):
    super().__init__()
    self._path = path

  def expand(self, parts: Any) -> PCollection[str]:  # {name: PCollection}; Beam reads hints of PCollections only.
    summed = parts['counts'] | 'SumCounts' >> beam.CombinePerKey(sum)
    return (
      (
        parts['counts'].pipeline | 'Start' >> beam.Create([('start', None)]),
        summed | 'CountItems' >> beam.Map(lambda c: ('count', c)),
        parts['pieces'] | 'PieceItems' >> beam.Map(lambda p: ('piece', p)),
        parts['notes'],
      )
      | 'AllResults' >> beam.Flatten()
      | 'OneKey' >> beam.Map(lambda item: (None, item))
      | 'Gather' >> beam.GroupByKey()
      | 'Write' >> beam.ParDo(_WriteFile(self._path))
    )


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


@dataclasses.dataclass(frozen=True)
class JobPlan:
  """What a job reads and writes, known before its graph is built (`annotate.plan`, `import_graph.plan`)."""

  output_dir: str
  inputs: dict[str, list[str]]  # The input files per source (annotation: 'train', and 'test' with --test_input).
  test_fraction: float  # Of the games (annotation: of 'train'; 0 with --test_input) that go to the test split.
  split_names: list[str]
  outputs: list[OutputSet]  # Every set written: the record sets of each split, failures, skipped.
  record_sets: list[shards.RecordSet]  # How each is written (`shards.WriteShards`).
  results_path: str  # Where the job's last step writes its counts and pieces (`WriteResults`).

  def spec(self, kind: str) -> shards.ShardSpec:
    """The set of a job-wide `kind` ('failures', 'skipped')."""
    return next(o.spec for o in self.outputs if o.split is None and o.kind == kind)

  @property
  def roots(self) -> list[str]:
    """The folders the job writes its pieces in: OUT and its record sets' folders."""
    return sorted({self.output_dir, *(o.spec.directory for o in self.outputs)})


class SplitRecords(beam.PTransform):
  """A job's items -> (set key, record) for every record set of `plan`, as `shards.WriteShards` takes them: the
  items of each split (`split_of`: an item's split, None for none), their `payload`, made records by the function
  of the set's kind in `records_of` and keyed by the set."""

  def __init__(
    self,
    plan: JobPlan,
    records_of: Mapping[str, Callable[..., Any]],
    split_of: Callable[[Any], str | None],
    payload: Callable[[Any], Any],
  ):
    super().__init__()
    self._plan, self._records_of, self._split_of, self._payload = plan, records_of, split_of, payload

  def expand(self, items: PCollection) -> PCollection:
    keyed = []
    for split in self._plan.split_names:
      of_split = (
        items
        | f'Select[{split}]' >> beam.Filter(lambda item, s, split_of: split_of(item) == s, split, self._split_of)
        | f'Payload[{split}]' >> beam.Map(self._payload)
      )
      for output in self._plan.outputs:
        if output.split == split:
          keyed.append(
            of_split
            | f'{output.kind}[{split}]' >> beam.FlatMap(self._records_of[output.kind])
            | f'Key[{split}/{output.kind}]' >> beam.WithKeys(output.spec.key)
          )
    return keyed | 'Records' >> beam.Flatten()
