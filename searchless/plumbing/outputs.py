"""Writing into an output folder: one writer at a time (`folder_lock`), and every filesystem error there (a full
disk, a read-only folder, a parent that cannot be made) one line naming the path and the flag, not a traceback
or an ``[Errno 28]`` with no file.

    with outputs.sole_writer(out, 'searchless-puzzles', '--out'):
      with outputs.open_output(os.path.join(out, 'journal.jsonl'), 'a') as f:
        f.write(line)

>>> import tempfile
>>> out = os.path.join(tempfile.mkdtemp(), 'x')
>>> with sole_writer(out, 'searchless-puzzles', '--out'):  # doctest: +ELLIPSIS
...   raise OSError(28, 'No space left on device', os.path.join(out, 'journal.jsonl'))
Traceback (most recent call last):
...
searchless.plumbing.outputs.OutputError: cannot write /.../x/journal.jsonl (--out): No space left on device
>>> os.path.exists(out)  # Made for the run that failed: removed.
False
"""

from collections.abc import Iterator
import contextlib
import io
import os
from typing import IO, Any

from searchless.plumbing import errors
from searchless.plumbing import folder_lock


class OutputError(errors.UserError, OSError):
  """A filesystem error in an output folder, in one line: ``cannot write PATH (FLAG): REASON``; `errno` is the
  error's."""

  def __init__(self, message: str, errno: int | None = None):
    super().__init__(message)
    self.errno = errno


def _named(error: OSError, path: str | os.PathLike) -> OSError:
  """`error` naming `path` where it names no file (a write's or a flush's error names none)."""
  if error.filename is not None or error.errno is None:
    return error
  return type(error)(error.errno, error.strerror, os.fspath(path))


@contextlib.contextmanager
def errors_naming(path: str | os.PathLike) -> Iterator[None]:
  """Inside the block, an OSError of the system that names no file names `path` (``os.fsync(f.fileno())``)."""
  try:
    yield
  except OSError as error:
    named = _named(error, path)
    if named is error:
      raise
    raise named from None


class _File(io.FileIO):
  """A file whose write and close errors name it."""

  def write(self, data: Any) -> int | None:  # type: ignore[override]  # FileIO's takes a buffer.
    with errors_naming(self.name):
      return super().write(data)

  def close(self) -> None:
    with errors_naming(self.name):
      super().close()


def open_output(path: str | os.PathLike, mode: str = 'w', *, newline: str | None = None) -> IO[Any]:
  """`open(path, mode)` for writing (``w``, ``a``, ``x``, with ``b`` for bytes; text is UTF-8), except that its
  errors name `path`: a full disk shows at a write or a flush, where Python's own file names no file."""
  buffered = io.BufferedWriter(_File(os.fspath(path), mode.replace('b', '').replace('t', '')))
  if 'b' in mode:
    return buffered
  return io.TextIOWrapper(buffered, encoding='utf-8', newline=newline)


def _inside(path: str, folder: str) -> bool:
  return os.path.commonpath([os.path.abspath(path), folder]) == folder


def output_error(error: OSError, folder: str | os.PathLike, flag: str) -> OSError:
  """`error` as an `OutputError` naming its file and `flag` when it is about `folder`, a file in it, or a folder
  above it (that could not be made); else `error` itself."""
  if isinstance(error, (OutputError, folder_lock.FolderInUse)) or not isinstance(error.filename, (str, bytes)):
    return error
  path, where = os.fsdecode(error.filename), os.path.abspath(folder)
  reason = error.strerror or str(error)
  if _inside(where, os.path.abspath(path)):  # The folder, or one above it: not made.
    return OutputError(f'cannot create {os.fspath(folder)} ({flag}): {reason}', error.errno)
  if not _inside(path, where):
    return error
  name = os.path.basename(path)
  if name.startswith('.') and name.endswith('.lock'):  # A lock (`FolderLock`): what it locks is not writable.
    path = os.path.join(os.fspath(folder), name[1:-5]) if name != '.lock' else os.fspath(folder)
  return OutputError(f'cannot write {path} ({flag}): {reason}', error.errno)


@contextlib.contextmanager
def sole_writer(folder: str | os.PathLike, what: str, flag: str, *, file: str | None = None) -> Iterator[None]:
  """The block writes into `folder` (the value of `flag`), made if missing: it is the folder's one writer
  (`folder_lock.FolderLock`, for `what`; `file`: one file of the folder only), an OSError about a path there
  becomes an `OutputError` (`output_error`), and a folder the block made is removed when it fails and leaves it empty.
  A remote folder (``gs://...``) is neither locked nor made here."""
  if '://' in os.fspath(folder):
    yield
    return
  made = not os.path.lexists(folder)
  try:
    with folder_lock.FolderLock(folder, what, flag, file=file):
      yield
  except BaseException as error:
    if made:
      with contextlib.suppress(OSError):
        os.rmdir(folder)  # Only when empty.
    if isinstance(error, OSError) and (one_line := output_error(error, folder, flag)) is not error:
      raise one_line from None
    raise
