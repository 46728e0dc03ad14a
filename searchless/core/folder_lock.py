"""One writer per folder: an exclusive lock on FOLDER/.lock, naming its holder; the kernel drops it when the holder
dies, so a killed writer's lock is taken over by the next one.

>>> import tempfile
>>> folder = tempfile.mkdtemp()
>>> with FolderLock(folder, 'searchless-download', '--out'):  # doctest: +ELLIPSIS
...   try:
...     FolderLock(folder, 'searchless-download', '--out').__enter__()
...   except FolderInUse as error:
...     print(str(error).split(' (pid')[0])
/... is in use by another searchless-download
"""

import fcntl
import os
import pathlib
import socket


class FolderInUse(OSError):
  """Another process holds the folder's lock."""


class FolderLock:
  """Holds FOLDER/.lock (made, with FOLDER, if missing) from `__enter__` to `__exit__`; a second holder is refused
  with a `FolderInUse` naming the first one's pid and host, the command (`what`) and the flag of the folder."""

  def __init__(self, folder: str | os.PathLike, what: str, flag: str):
    self.folder, self.what, self.flag = pathlib.Path(folder), what, flag
    self._fd: int | None = None

  def __enter__(self) -> 'FolderLock':
    self.folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(self.folder / '.lock', os.O_RDWR | os.O_CREAT, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      holder = os.read(fd, 200).decode('utf-8', 'replace').strip() or 'a process'
      os.close(fd)
      raise FolderInUse(
        f'{self.folder} is in use by another {self.what} ({holder}): wait for it to end, or use another {self.flag}'
      ) from None
    os.ftruncate(fd, 0)
    os.write(fd, f'pid {os.getpid()} on {socket.gethostname()}'.encode())
    self._fd = fd
    return self

  def __exit__(self, *exc) -> None:
    if self._fd is not None:
      os.close(self._fd)  # Closing releases the lock.
      self._fd = None
