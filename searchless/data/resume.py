"""Jobs that keep their work: the results of a job's costly step committed in pieces as they are made, and a rerun
that computes only what no piece holds, and only while the pieces are still true.

The costly step (the engine's annotation of a board, the parse of a game or of
an evaluation-database line) commits its results, keyed (a board's FEN, a game's
file:line), to ``OUTPUT_DIR/.searchless-resume/`` every `chunk` items and at
least every `COMMIT_SECONDS` (`PieceWriter`, `Recorded`): a piece is written
whole or not at all (`searchless.plumbing.atomic`: a temporary file, synced, renamed
and its folder synced; on ``gs://`` the store's own atomic writes), so a piece
there is whole even after a power cut. Ctrl-C, a kill, a crash or a reboot loses
at most each worker's uncommitted items.

What the results depend on is kept beside them (`Keeper`, ``settings.json``):
the settings that change them, the package version and the identity of each
input whose content they hold (size and modification time; an http(s) URL's
ETag or Last-Modified and size). A piece made by an engine also carries that
engine's identity as its worker measured it (`PieceWriter`'s `engine`: its
``id name`` and its binary's sha256), in its name (`engine_tag`) and in an
``engine-<tag>.json`` beside it. A rerun with other settings, a changed input
or another package version is refused (`KeptWorkDiffers`), naming what differs
and how much kept work it would drop; ``--restart`` drops the pieces and starts
afresh. Pieces of another engine are refused by the job where its driver sees
the workers' engine, else passed over by each worker (`annotate.AnnotateBoards`
compares). A rerun
with the same settings (`Keeper.kept_pieces`) joins what it would compute with
the kept pieces (`SkipKept`) and computes only the rest. The step is
deterministic (the engine at a node or depth limit; parsing), so the dataset is
byte for byte the one an uninterrupted run writes. A piece that cannot be read
(zero-length, garbled) is dropped and its items computed again
(`SkipKept.dropped` says which). The folder goes once the dataset is committed.
"""

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
import dataclasses
import datetime
import hashlib
import json
import os
import pickle
import re
import shlex
import sys
import time
from typing import Any
import uuid

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.pvalue import PBegin, PCollection
import zstandard

import searchless
from searchless.plumbing import atomic
from searchless.plumbing import errors
from searchless.plumbing import fetch
from searchless.plumbing import files

FOLDER = '.searchless-resume'  # Under the output folder while a job is unfinished.
SETTINGS = 'settings.json'  # What the pieces were made with: `Keeper.settings` and `Keeper.inputs`.
DEFAULT_CHUNK_BOARDS = 100  # Boards per piece: a few minutes of one worker's engine at the default limit.
DEFAULT_CHUNK_GAMES = 20_000  # Games (or database lines) per piece: a few minutes of one worker's parsing.
COMMIT_SECONDS = 120.0  # A worker commits at least this often, whatever its chunk.
# <kind>-<uuid>-<items>[-<engine>].pkl.zst; <engine>: `engine_tag` of the engine that made it, if any.
_PIECE = re.compile(r'^([a-z]+)-[0-9a-f]{32}-(\d+)(?:-([0-9a-f]{16}))?\.pkl\.zst$')
_ENGINE = 'engine-{}.json'  # Beside the pieces: the identity (JSON) of the engine whose tag is {}.
_RESTART = 'rerun with --restart to start afresh, or with the old settings to resume'


class KeptWorkDiffers(errors.BadInput):
  """A rerun whose settings, inputs or engine differ from those of the pieces an interrupted run kept."""


def folder(output_dir: str) -> str:
  return FileSystems.join(output_dir, FOLDER)


def pieces(output_dir: str, kind: str | None = None) -> list[str]:
  """The pieces kept in `output_dir` (of one `kind` of item, or all)."""
  return pieces_of_kind(_pieces(folder(output_dir)), kind) if kind else _pieces(folder(output_dir))


def pieces_of_kind(paths: Sequence[str], kind: str) -> list[str]:
  """The pieces among `paths` that hold items of `kind` ('boards', 'games', 'lines')."""
  return [p for p in paths if (found := _PIECE.match(FileSystems.split(p)[1])) and found.group(1) == kind]


def _pieces(directory: str) -> list[str]:
  try:
    found = [m.path for m in FileSystems.match([FileSystems.join(directory, '*.pkl.zst')])[0].metadata_list]
  except (OSError, ValueError):  # No such folder.
    return []
  return sorted(p for p in found if _PIECE.match(FileSystems.split(p)[1]))


def items_held(pieces: Sequence[str]) -> int:
  """Items the pieces hold (by their names; one a retried bundle computed twice counts twice).

  >>> items_held(['out/.searchless-resume/boards-' + 32 * 'a' + '-100.pkl.zst', 'x/games-' + 32 * 'b' + '-7.pkl.zst'])
  107
  """
  return sum(int(found.group(2)) for p in pieces if (found := _PIECE.match(FileSystems.split(p)[1])))


def engine_tag(identity: str) -> str:
  """The short name (16 hex digits) of an engine identity (JSON) in its pieces' names."""
  return hashlib.sha256(identity.encode('utf-8')).hexdigest()[:16]


def engines_of(paths: Sequence[str]) -> dict[str | None, list[str]]:
  """The pieces among `paths` by the tag of the engine that made them (None: made by none, or by an older version)."""
  by: dict[str | None, list[str]] = {}
  for path in paths:
    if found := _PIECE.match(FileSystems.split(path)[1]):
      by.setdefault(found.group(3), []).append(path)
  return by


def engine_identity(output_dir: str, tag: str) -> dict | None:
  """The identity of the engine tagged `tag` that made pieces in `output_dir`, as its worker measured it (None
  where its file is missing or unreadable)."""
  try:
    with FileSystems.open(FileSystems.join(folder(output_dir), _ENGINE.format(tag))) as f:
      return json.loads(f.read().decode('utf-8'))
  except (OSError, ValueError):
    return None


def input_identity(path: str) -> str:
  """What says an input changed, in words: its size and modification time, or for an http(s) URL its size and
  validator (ETag, else Last-Modified) as `fetch.look_up` reads them ('' where the server sends neither)."""
  if files.is_http(path):
    head = fetch.look_up(fetch.session(retries=2), path)  # A HEAD, or a GET where the server takes no HEAD.
    shown = [f'of {head.size:,} bytes'] if head.size is not None else []
    if head.validator:
      shown.append(
        f'with ETag {head.validator}' if head.validator.startswith(('"', 'W/"')) else f'last modified {head.validator}'
      )
    return ', '.join(shown)
  if files.is_remote(path):
    found = FileSystems.match([path])[0].metadata_list
    if not found:
      return 'missing'
    size, modified = found[0].size_in_bytes, found[0].last_updated_in_seconds
  else:
    stat = os.stat(path)  # Not a glob: a name may hold '[' or '*'.
    size, modified = stat.st_size, stat.st_mtime_ns / 1e9
  stamp = datetime.datetime.fromtimestamp(modified, datetime.timezone.utc)
  return f'of {size:,} bytes modified {stamp:%Y-%m-%d %H:%M:%S.%f} UTC'


def _read_settings(directory: str) -> dict | None:
  """What the pieces in `directory` were made with (None: no record, or an unreadable one)."""
  path = FileSystems.join(directory, SETTINGS)
  try:
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
      kept = json.loads(f.read().decode('utf-8'))
  except (OSError, ValueError):
    return None
  if (
    not isinstance(kept, dict) or not isinstance(kept.get('settings'), dict) or not isinstance(kept.get('inputs'), dict)
  ):
    return None
  return kept


@dataclasses.dataclass(frozen=True)
class Keeper:
  """What one job keeps to resume: pieces in `output_dir` that hold `what` ('annotated boards'), made with
  `settings` ({a flag, or 'searchless' for the version: its value, as shown}) from `inputs` ({path:
  `input_identity`}, only the inputs whose content the pieces hold), and the `command` that resumes it. With
  `restart`, kept pieces are dropped, not refused. `beam_job.dataset_job` prepares the folder, says what an
  interrupt kept and drops a folder with nothing in it; the job removes it once done."""

  output_dir: str
  settings: Mapping[str, str]
  what: str
  command: Sequence[str]
  inputs: Mapping[str, str] = dataclasses.field(default_factory=dict)
  restart: bool = False

  def differences(self) -> list[str]:
    """How the kept pieces' settings and inputs differ from this job's, in words ([] when they agree or there is
    no record). An input in one job only differs in nothing: its pieces are not joined, or there are none."""
    kept = _read_settings(folder(self.output_dir))
    if kept is None:
      return ['by an older searchless (no record of their settings)'] if pieces(self.output_dir) else []
    said = []
    old, new = kept['settings'], dict(self.settings)
    for name in sorted({*old, *new}):
      if old.get(name) != new.get(name):
        said.append(f'with {name} {old.get(name, "unset")}, not {new.get(name, "unset")}')
    for path in sorted(set(kept['inputs']) & set(self.inputs)):
      if kept['inputs'][path] != self.inputs[path]:
        said.append(f'from {path} {kept["inputs"][path] or "unknown"}, not {self.inputs[path] or "unknown"}')
    return said

  def refusal(self, differences: Sequence[str], dropped: Sequence[str]) -> KeptWorkDiffers:
    """The error of a rerun whose `differences` would drop the pieces `dropped`."""
    return KeptWorkDiffers(
      f'the kept pieces in {folder(self.output_dir)} were made {" and ".join(differences)}: '
      f'{items_held(dropped):,} {self.what} would be dropped; {_RESTART}'
    )

  def kept_pieces(self) -> list[str]:
    """The pieces an interrupted run of this job kept (reads only): [] with `restart`; a `KeptWorkDiffers` where
    they were made with other settings, another version or from a changed input."""
    kept = pieces(self.output_dir)
    if not kept or self.restart:
      return []
    if said := self.differences():
      raise self.refusal(said, kept)
    return kept

  def prepare(self) -> None:
    """Leaves the folder ready for this job's pieces: those kept (`kept_pieces` checked them), or none with
    `restart` (which says on stderr what it drops); what the pieces are made with recorded, durably."""
    directory = folder(self.output_dir)
    if self.restart and FileSystems.exists(directory):
      if dropped := pieces(self.output_dir):
        print(f'restarting: {items_held(dropped)} {self.what} kept in {directory} are dropped', file=sys.stderr)
      FileSystems.delete([directory])
    try:
      FileSystems.mkdirs(directory)
    except OSError:  # Exists, or the filesystem has no folders.
      pass
    atomic.sync_folder(self.output_dir)
    kept = _read_settings(directory) if pieces(self.output_dir) else None
    inputs = {**(kept['inputs'] if kept else {}), **self.inputs}  # A removed input's pieces stay checked.
    try:
      stale = [m.path for m in FileSystems.match([FileSystems.join(directory, '.*.tmp')])[0].metadata_list]
    except (OSError, ValueError):
      stale = []
    if stale:  # What a killed writer left; no writer runs now (one job a folder).
      FileSystems.delete(stale)
    settings = {'settings': dict(self.settings), 'inputs': inputs}
    atomic.write_text(FileSystems.join(directory, SETTINGS), json.dumps(settings, indent=1, sort_keys=True))

  def interrupted(self) -> str:
    """What an interrupt says: what was kept, and the command that resumes it."""
    kept = pieces(self.output_dir)
    if not kept:
      return f'nothing written to {self.output_dir}'
    return (
      f'kept {items_held(kept)} {self.what} in {folder(self.output_dir)}; the same command resumes: '
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

  def __init__(self, directory: str, kind: str, chunk: int, engine: str | None = None):
    self._directory, self._kind, self._chunk = directory, kind, chunk
    self._pending: list[tuple[Hashable, object]] = []
    self._since = time.monotonic()
    self._engine = engine  # The identity (JSON) of the engine that made them, as this worker measured it; or None.
    self._tag = engine_tag(engine) if engine is not None else None
    self._engine_written = engine is None

  def add(self, key: Hashable, value: object) -> None:
    if not self._pending:
      self._since = time.monotonic()
    self._pending.append((key, value))
    if len(self._pending) >= self._chunk or time.monotonic() - self._since >= COMMIT_SECONDS:
      self.commit()

  def commit(self) -> None:
    """Writes the pending results as one piece (`atomic`), after the identity of the engine that made them."""
    if not self._pending:
      return
    if not self._engine_written:
      assert self._engine is not None and self._tag is not None
      atomic.write_text(FileSystems.join(self._directory, _ENGINE.format(self._tag)), self._engine)
      self._engine_written = True
    tag = f'-{self._tag}' if self._tag else ''
    name = f'{self._kind}-{uuid.uuid4().hex}-{len(self._pending)}{tag}.pkl.zst'
    data = zstandard.ZstdCompressor(write_checksum=True).compress(pickle.dumps((self._engine, self._pending)))
    atomic.write_bytes(FileSystems.join(self._directory, name), data)
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


# What a piece that cannot be read raises: an empty or cut file, bytes that are no zstd frame or fail its checksum,
# a pickle that is cut or garbled, or of classes this version no longer has.
_UNREADABLE = (
  zstandard.ZstdError,
  pickle.UnpicklingError,
  EOFError,
  ValueError,
  TypeError,
  AttributeError,
  ImportError,
  IndexError,
)


def read_piece(path: str) -> Iterator[tuple]:
  """('kept', key, result, engine identity or None) for each item of a piece; for a piece that cannot be read
  (zero-length, garbled), which is then deleted (its items are computed again), one ('unreadable', its path, why).
  An error reading the store (a network fault, say) is raised, for the runner to retry: a good piece stays."""
  try:
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:  # Not by its extension.
      data = f.read()
  except FileNotFoundError:  # Deleted as unreadable by an earlier try of this step.
    return
  try:
    if not data:
      raise EOFError('zero-length')
    engine, results = pickle.loads(zstandard.ZstdDecompressor().decompress(data))
    kept = [('kept', key, result, engine) for key, result in results]
  except _UNREADABLE as error:
    try:
      FileSystems.delete([path])
    except OSError:
      pass
    yield 'unreadable', path, str(error) or type(error).__name__
    return
  yield from kept


def _resolve(key_groups: tuple[Hashable, dict[str, Iterable]]) -> Iterator[tuple]:
  """Each item of a key with its kept result, if any: ('kept', item, result, engine) or ('todo', item)."""
  _, groups = key_groups
  kept = next(iter(groups['kept']), None)
  for item in groups['items']:
    yield ('kept', item, *kept) if kept is not None else ('todo', item)


def dropped_note(unreadable: tuple[str, str, str], what: str) -> str:
  """The warning of a piece dropped as unreadable: its path, why, and what is computed again."""
  _, path, why = unreadable
  return f'dropped the unreadable piece {path} ({why}): its {items_held([path])} {what} were computed again'


class SkipKept(beam.PTransform):
  """items -> ('todo', item) to compute, and ('kept', item, result, engine) from `pieces` (joined on `key(item)`;
  engine: the identity, JSON, of the engine that made the result, or None). After `expand`, `dropped` is the
  collection of the pieces that could not be read, ('unreadable', path, why) each: their items are to do.
  Without pieces, every item is to do (no join) and `dropped` is None."""

  def __init__(self, pieces: Sequence[str], key: Callable[[Any], Hashable], pbegin: PBegin):
    super().__init__()
    self._pieces, self._key, self._pbegin = list(pieces), key, pbegin
    self.dropped: PCollection | None = None

  def expand(self, items: PCollection) -> PCollection:
    if not self._pieces:
      return items | 'AllToDo' >> beam.Map(lambda item: ('todo', item))
    read = self._pbegin | 'KeptPieces' >> beam.Create(self._pieces) | 'ReadKept' >> beam.FlatMap(read_piece)
    self.dropped = read | 'Unreadable' >> beam.Filter(lambda r: r[0] == 'unreadable')
    kept = read | 'KeptResults' >> beam.Filter(lambda r: r[0] == 'kept') | 'ByKey' >> beam.Map(lambda r: (r[1], r[2:]))
    key = self._key
    return (
      {'items': items | 'ItemsByKey' >> beam.Map(lambda item: (key(item), item)), 'kept': kept}
      | 'JoinKept' >> beam.CoGroupByKey()
      | 'Resolve' >> beam.FlatMap(_resolve)
    )


def settings(**flags: object) -> dict[str, str]:
  """What a job's kept pieces must share with its rerun, in words: the package version and each flag the results
  depend on (`flags`: {name without its dashes: value}).

  >>> settings(limit='nodes=300', min_elo=None, exclude_bots=False)['--limit']
  'nodes=300'
  """
  shown = lambda v: 'unset' if v is None else ('on' if v else 'off') if isinstance(v, bool) else str(v)
  return {'searchless': searchless.__version__, **{f'--{name}': shown(value) for name, value in flags.items()}}
