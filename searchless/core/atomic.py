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
  """
  path = os.fspath(path)
  directory = os.path.dirname(os.path.abspath(path))
  tmp = os.path.join(directory, f'.{os.path.basename(path)}.{os.getpid()}.tmp')
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
