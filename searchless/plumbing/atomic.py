"""Replacing a local file atomically: a crash leaves the old file or the new one, never a part.

>>> import pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp()) / 'done.json'
>>> write_text(path, '{"step": 3}\\n')
>>> path.read_text()
'{"step": 3}\\n'
"""

import os


def write_bytes(path: str | os.PathLike, data: bytes, *, durable: bool = True) -> None:
  """Writes `data` to a temporary file beside `path`, syncs it, renames it over `path` and syncs the folder.

  The file gets the mode a plain ``open`` would give it (0666 less the umask), not a
  temporary file's 0600. `durable=False` skips both syncs: still atomic for readers,
  for snapshots rewritten every fraction of a second that need not survive a power cut.
  An OSError (a full disk, a read-only folder) names `path`, not its temporary file.
  """
  path = os.fspath(path)
  try:
    _write_bytes(path, data, durable)
  except OSError as error:
    if error.errno is None or error.filename not in (None, _temporary(path)):
      raise
    raise type(error)(error.errno, error.strerror, path) from None


def _temporary(path: str) -> str:
  return os.path.join(os.path.dirname(os.path.abspath(path)), f'.{os.path.basename(path)}.{os.getpid()}.tmp')


def _write_bytes(path: str, data: bytes, durable: bool) -> None:
  directory, tmp = os.path.dirname(os.path.abspath(path)), _temporary(path)
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
  if not durable:
    return
  folder = os.open(directory, os.O_RDONLY)
  try:
    os.fsync(folder)  # The rename itself survives a power cut.
  finally:
    os.close(folder)


def write_text(path: str | os.PathLike, text: str, *, durable: bool = True) -> None:
  """`write_bytes` of `text` in UTF-8."""
  write_bytes(path, text.encode('utf-8'), durable=durable)
