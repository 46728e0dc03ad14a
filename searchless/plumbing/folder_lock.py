"""One writer per folder: an exclusive lock on FOLDER/.lock, naming its holder; the kernel drops it when the holder
dies, so a killed writer's lock is taken over by the next one. The lock file goes when its holder lets it go.

>>> import os, tempfile
>>> folder = tempfile.mkdtemp()
>>> with FolderLock(folder, 'searchless-download', '--out'):  # doctest: +ELLIPSIS
...   try:
...     FolderLock(folder, 'searchless-download', '--out').__enter__()
...   except FolderInUse as error:
...     print(str(error).split(' (pid')[0])
/... is in use by another searchless-download
>>> os.listdir(folder)
[]
"""

import contextlib
import fcntl
import os
import pathlib
import socket

from searchless.plumbing import errors


class FolderInUse(errors.UserError, OSError):
  """Another process holds the folder's lock."""


class FolderLock:
  """Holds FOLDER/.lock (made, with FOLDER, if missing) from `__enter__` to `__exit__`; a second holder is refused
  with a `FolderInUse` naming the first one's pid and host, the command (`what`) and the flag of the folder.

  `file`: one output file of the folder (a PGN, say) rather than the whole folder: the lock is FOLDER/.FILE.lock,
  so that writers of other files in the folder go on.
  """

  def __init__(self, folder: str | os.PathLike, what: str, flag: str, *, file: str | None = None):
    self.folder, self.what, self.flag = pathlib.Path(folder), what, flag
    self.path = self.folder / (f'.{file}.lock' if file else '.lock')
    self._held = self.folder / file if file else self.folder
    self._fd: int | None = None

  def __enter__(self) -> 'FolderLock':
    self.folder.mkdir(parents=True, exist_ok=True)
    while True:
      fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
      try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
      except BlockingIOError:
        holder = os.read(fd, 200).decode('utf-8', 'replace').strip() or 'a process'
        os.close(fd)
        raise FolderInUse(
          f'{self._held} is in use by another {self.what} ({holder}): wait for it to end, or use another {self.flag}'
        ) from None
      try:
        if os.stat(self.path).st_ino == os.fstat(fd).st_ino:
          break
      except FileNotFoundError:
        pass
      os.close(fd)  # Its last holder removed the file we opened: lock the one there now.
    with contextlib.suppress(OSError):  # Who holds it is for the message alone (a full disk cannot take it).
      os.ftruncate(fd, 0)
      os.write(fd, f'pid {os.getpid()} on {socket.gethostname()}'.encode())
    self._fd = fd
    return self

  def __exit__(self, *exc) -> None:
    if self._fd is not None:
      with contextlib.suppress(FileNotFoundError):
        os.remove(self.path)  # Still held: whoever opened it meanwhile sees it gone and locks a new one.
      os.close(self._fd)  # Closing releases the lock.
      self._fd = None
