"""Writing a file atomically: a reader, a crash or a power cut finds the old file or the new one, never a part.

The one way the project writes a file whole (manifests, ``downloads.json``, the resume pieces and their
settings, snapshots): `write_bytes` writes a temporary file beside the target, under a name of its own for
each process and thread (two writers never share one), syncs it, renames it over the target and syncs the
folder. On a store such as ``gs://`` (through Beam's ``FileSystems``, imported only then) the store's own
atomic create and rename are relied on.

>>> import pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp()) / 'done.json'
>>> write_text(path, '{"step": 3}\\n')
>>> path.read_text()
'{"step": 3}\\n'
"""

import os
import threading

SUFFIX = '.tmp'  # A temporary's name: .<name>.<pid>-<thread>.tmp beside its target (`is_temporary`).


def write_bytes(path: str | os.PathLike, data: bytes, *, durable: bool = True) -> None:
  """Writes `data` to a temporary file beside `path`, syncs it, renames it over `path` and syncs the folder.

  The file gets the mode a plain ``open`` would give it (0666 less the umask), not a
  temporary file's 0600. `durable=False` skips both syncs: still atomic for readers,
  for snapshots rewritten every fraction of a second that need not survive a power cut.
  An OSError (a full disk, a read-only folder) names `path`, not its temporary file.
  A remote `path` (``gs://...``) is written through Beam's ``FileSystems``.
  """
  path = os.fspath(path)
  if '://' in path:
    _write_remote(path, data)
    return
  try:
    _write_bytes(path, data, durable)
  except OSError as error:
    if error.errno is None or error.filename not in (None, temporary(os.path.abspath(path))):
      raise
    raise type(error)(error.errno, error.strerror, path) from None


def temporary(path: str) -> str:
  """The temporary file beside `path` that this process and thread write before the rename."""
  directory, name = os.path.split(path)
  return os.path.join(directory, f'.{name}.{os.getpid()}-{threading.get_ident()}{SUFFIX}')


def is_temporary(name: str) -> bool:
  """Whether the file name `name` is one of `write_bytes`' temporaries (what a killed writer leaves)."""
  return name.startswith('.') and name.endswith(SUFFIX)


def _write_remote(path: str, data: bytes) -> None:
  from apache_beam.io.filesystem import CompressionTypes
  from apache_beam.io.filesystems import FileSystems

  tmp = temporary(path)
  with FileSystems.create(tmp, compression_type=CompressionTypes.UNCOMPRESSED) as f:
    f.write(data)
  FileSystems.rename([tmp], [path])


def _write_bytes(path: str, data: bytes, durable: bool) -> None:
  tmp = temporary(os.path.abspath(path))
  fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
  try:
    with os.fdopen(fd, 'wb') as f:
      f.write(data)
      f.flush()
      if durable:
        os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise
  if durable:
    sync_folder(os.path.dirname(tmp))  # The rename itself survives a power cut.


def sync_folder(directory: str | os.PathLike) -> None:
  """Makes a rename or a new file in the local `directory` durable (fsync of the folder); a no-op on a store."""
  if '://' in os.fspath(directory):
    return
  fd = os.open(directory, os.O_RDONLY)
  try:
    os.fsync(fd)
  finally:
    os.close(fd)


def write_text(path: str | os.PathLike, text: str, *, durable: bool = True) -> None:
  """`write_bytes` of `text` in UTF-8."""
  write_bytes(path, text.encode('utf-8'), durable=durable)
