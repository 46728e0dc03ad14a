"""Jobs that keep their work: the results of a job's costly step committed in pieces as they are made, and a rerun
that computes only what no piece holds.

The costly step (the engine's annotation of a board, the parse of a game or of
an evaluation-database line) commits its results, keyed (a board's FEN, a game's
file:line), to ``OUTPUT_DIR/.searchless-resume/`` every `chunk` items and at
least every `COMMIT_SECONDS` (`PieceWriter`, `Recorded`): a piece is written
under a temporary name and renamed, so a piece there is whole. Ctrl-C, a kill,
a crash or a reboot loses at most each worker's uncommitted items. A rerun with
the same settings (`Keeper`) joins what it would compute with the kept pieces
(`SkipKept`) and computes only the rest. The step is deterministic (the engine
at a node or depth limit; parsing), so the dataset is byte for byte the one an
uninterrupted run writes. The folder goes once the dataset is committed; one of
other settings is removed, not reused.
"""

from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
import dataclasses
import json
import pickle
import re
import shlex
import time
from typing import Any
import uuid

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.pvalue import PBegin, PCollection
import zstandard


FOLDER = '.searchless-resume'  # Under the output folder while a job is unfinished.
SETTINGS = 'engine.json'  # The engine settings the pieces were made with.
DEFAULT_CHUNK_BOARDS = 100  # Boards per piece: a few minutes of one worker's engine at the default limit.
DEFAULT_CHUNK_GAMES = 20_000  # Games (or database lines) per piece: a few minutes of one worker's parsing.
COMMIT_SECONDS = 120.0  # A worker commits at least this often, whatever its chunk.
_PIECE = re.compile(r'^([a-z]+)-[0-9a-f]{32}-(\d+)\.pkl\.zst$')  # <kind>-<uuid>-<items>.pkl.zst


def folder(output_dir: str) -> str:
  return FileSystems.join(output_dir, FOLDER)


def pieces(output_dir: str, kind: str | None = None) -> list[str]:
  """The pieces kept in `output_dir` (of one `kind` of item, or all)."""
  return of_kind(_pieces(folder(output_dir)), kind) if kind else _pieces(folder(output_dir))


def of_kind(paths: Sequence[str], kind: str) -> list[str]:
  return [p for p in paths if (found := _PIECE.match(FileSystems.split(p)[1])) and found.group(1) == kind]


def _pieces(directory: str) -> list[str]:
  try:
    found = [m.path for m in FileSystems.match([FileSystems.join(directory, '*.pkl.zst')])[0].metadata_list]
  except (OSError, ValueError):  # No such folder.
    return []
  return sorted(p for p in found if _PIECE.match(FileSystems.split(p)[1]))


def items_in(pieces: Sequence[str]) -> int:
  """Items the pieces hold (by their names; one a retried bundle computed twice counts twice)."""
  return sum(int(found.group(2)) for p in pieces if (found := _PIECE.match(FileSystems.split(p)[1])))


def _same_settings(directory: str, settings: str) -> bool | None:
  """Whether the pieces in `directory` were made with `settings` (None: no settings file there)."""
  path = FileSystems.join(directory, SETTINGS)
  if not FileSystems.exists(path):
    return None
  with FileSystems.open(path) as f:
    return f.read().decode('utf-8') == settings


@dataclasses.dataclass(frozen=True)
class Keeper:
  """What one job keeps to resume: pieces in `output_dir` made with `settings` (JSON, `settings`), which hold
  `what` (said on an interrupt: 'annotated boards'), and the `command` that resumes it. `beam_job.run` prepares
  the folder, says what an interrupt kept and drops a folder with nothing in it; the job removes it once done."""

  output_dir: str
  settings: str
  what: str
  command: Sequence[str]

  def kept(self) -> list[str]:
    """The pieces an interrupted run of this job (of these settings) kept (reads only)."""
    return pieces(self.output_dir) if _same_settings(folder(self.output_dir), self.settings) else []

  def prepare(self) -> None:
    """Leaves the folder ready for this job's pieces: those of these settings kept, a folder of others removed."""
    directory = folder(self.output_dir)
    same = _same_settings(directory, self.settings)
    if same:
      return
    if same is not None:
      FileSystems.delete([directory])
    try:
      FileSystems.mkdirs(directory)
    except OSError:  # Exists (without its settings file), or the filesystem has no folders.
      pass
    for stale in _pieces(directory):
      FileSystems.delete([stale])
    with FileSystems.create(FileSystems.join(directory, SETTINGS)) as f:
      f.write(self.settings.encode('utf-8'))

  def interrupted(self) -> str:
    """What an interrupt says: what was kept, and the command that resumes it."""
    kept = pieces(self.output_dir)
    if not kept:
      return f'nothing written to {self.output_dir}'
    return (
      f'kept {items_in(kept)} {self.what} in {folder(self.output_dir)}; the same command resumes: '
      f'{shlex.join(self.command)}'
    )

  def remove_if_empty(self) -> None:
    """Deletes the folder of a job that failed before it kept anything (nothing to resume)."""
    if not pieces(self.output_dir):
      self.remove()

  def remove(self) -> None:
    """Deletes the kept pieces (the job's dataset is committed, or the job ran to its end)."""
    directory = folder(self.output_dir)
    if FileSystems.exists(directory):
      FileSystems.delete([directory])


class PieceWriter:
  """One worker's results of `kind`, committed as a piece every `chunk` items or `COMMIT_SECONDS` seconds."""

  def __init__(self, directory: str, kind: str, chunk: int):
    self._directory, self._kind, self._chunk = directory, kind, chunk
    self._pending: list[tuple[Hashable, object]] = []
    self._since = time.monotonic()
    self.engine: str | None = None  # The identity of the engine that made them (JSON), if any.

  def add(self, key: Hashable, value: object) -> None:
    if not self._pending:
      self._since = time.monotonic()
    self._pending.append((key, value))
    if len(self._pending) >= self._chunk or time.monotonic() - self._since >= COMMIT_SECONDS:
      self.commit()

  def commit(self) -> None:
    """Writes the pending results as one piece: a temporary file, renamed once whole."""
    if not self._pending:
      return
    name = f'{self._kind}-{uuid.uuid4().hex}-{len(self._pending)}.pkl.zst'
    data = zstandard.ZstdCompressor().compress(pickle.dumps((self.engine, self._pending)))
    tmp = FileSystems.join(self._directory, f'.{name}.tmp')
    with FileSystems.create(tmp, compression_type=CompressionTypes.UNCOMPRESSED) as f:
      f.write(data)
    FileSystems.rename([tmp], [FileSystems.join(self._directory, name)])
    self._pending = []


class Recorded(beam.DoFn):
  """`step(item)` for each item, its result committed to the resume folder under `key(item)` (`PieceWriter`)."""

  def __init__(self, step: Callable, key: Callable, directory: str, kind: str, chunk: int):
    self._step, self._key, self._directory, self._kind, self._chunk = step, key, directory, kind, chunk

  def setup(self) -> None:
    self._writer = PieceWriter(self._directory, self._kind, self._chunk)

  def process(self, item: Any) -> Iterator[Any]:
    result = self._step(item)
    self._writer.add(self._key(item), result)
    yield result

  def finish_bundle(self) -> None:
    self._writer.commit()


def read_piece(path: str) -> Iterator[tuple]:
  """('engine', identity) and ('kept', key, result) items of a piece."""
  with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:  # Not by its extension.
    engine, results = pickle.loads(zstandard.ZstdDecompressor().decompressobj().decompress(f.read()))
  if engine is not None:
    yield 'engine', engine
  for key, result in results:
    yield 'kept', key, result


def _resolve(key_groups: tuple[Hashable, dict[str, Iterable]]) -> Iterator[tuple]:
  """Each item of a key with its kept result, if any: ('kept', item, result) or ('todo', item)."""
  _, groups = key_groups
  kept = next(iter(groups['kept']), None)
  for item in groups['items']:
    yield ('kept', item, kept[0]) if kept is not None else ('todo', item)


class SkipKept(beam.PTransform):
  """items -> ('todo', item) to compute, ('kept', item, result) from `pieces` (joined on `key(item)`), and
  ('engine', identity) of the engines that made them. Without pieces, every item is to do (no join)."""

  def __init__(self, pieces: Sequence[str], key: Callable[[Any], Hashable], pbegin: PBegin):
    super().__init__()
    self._pieces, self._key, self._pbegin = list(pieces), key, pbegin

  def expand(self, items: PCollection) -> PCollection:
    if not self._pieces:
      return items | 'AllToDo' >> beam.Map(lambda item: ('todo', item))
    read = self._pbegin | 'KeptPieces' >> beam.Create(self._pieces) | 'ReadKept' >> beam.FlatMap(read_piece)
    engines = read | 'KeptEngines' >> beam.Filter(lambda r: r[0] == 'engine')
    kept = read | 'KeptResults' >> beam.Filter(lambda r: r[0] == 'kept') | 'ByKey' >> beam.Map(lambda r: (r[1], r[2:]))
    key = self._key
    joined = (
      {'items': items | 'ItemsByKey' >> beam.Map(lambda item: (key(item), item)), 'kept': kept}
      | 'JoinKept' >> beam.CoGroupByKey()
      | 'Resolve' >> beam.FlatMap(_resolve)
    )
    return (joined, engines) | 'WithEngines' >> beam.Flatten()


def settings(**what: object) -> str:
  """The settings kept pieces must share with a rerun (JSON): whatever the results depend on."""
  return json.dumps(what, sort_keys=True, default=str)
