"""The training workdir's lock: one trainer at a time in a workdir, even across machines sharing it."""

import fcntl
import os
import pathlib
import socket

import jax


class WorkdirInUse(OSError):
  """Another trainer holds the workdir's lock."""


class WorkdirLock:
  """An exclusive lock on WORKDIR/.lock (process 0 of a run only); the kernel drops it if the process dies."""

  def __init__(self, work: pathlib.Path):
    self._path, self._fd = work / '.lock', None

  def __enter__(self):
    if jax.process_index() != 0:
      return self
    fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      holder = os.read(fd, 200).decode('utf-8', 'replace').strip() or 'a process'
      os.close(fd)
      raise WorkdirInUse(
        f'{self._path.parent} is in use by another trainer ({holder}): wait for it to end, or use another --workdir'
      ) from None
    try:
      os.ftruncate(fd, 0)
      os.write(fd, f'pid {os.getpid()} on {socket.gethostname()}'.encode())
    except OSError as error:  # A full disk: the error names the lock, as opening it would.
      os.close(fd)
      raise OSError(error.errno, error.strerror, str(self._path)) from None
    self._fd = fd
    return self

  def __exit__(self, *exc):
    if self._fd is not None:
      os.close(self._fd)  # Closing releases the lock.
      self._fd = None
