"""A failed write in a training workdir (a full disk, a read-only folder, a parent that cannot be made), said once.

The trainer's own errors become one line naming the path and the flag (`output_error`); the libraries that write a
run in threads of their own (orbax and tensorstore save checkpoints, tensorboardX writes event files, asyncio runs their
futures) report the same failure themselves, a traceback per thread: hundreds of lines for one full disk, its
cause somewhere among them. Each of those failures also reaches the trainer, which says it: orbax raises it at the
next save or wait (`Checkpointer`), and the next write of metrics, event files or the summary fails on the same
disk. `quiet()` keeps the threads' reports of it off the terminal.

>>> error = ValueError("RESOURCE_EXHAUSTED: Failed writing: ... No space left on device [os_error_code='28']")
>>> cause(error).strerror
'No space left on device'
>>> str(output_error(OSError(28, 'No space left on device', '/runs/a/metrics.jsonl'), pathlib.Path('/runs/a')))
'cannot write /runs/a/metrics.jsonl (--workdir): No space left on device'
>>> str(output_error(OSError(30, 'Read-only file system', '/runs'), pathlib.Path('/runs/a')))
'cannot create /runs/a (--workdir): Read-only file system'
"""

from collections.abc import Iterator
import contextlib
import logging
import os
import pathlib
import re
import sys
import threading
import traceback

from searchless.plumbing import outputs

FLAG = '--workdir'
_OS_ERROR_CODE = re.compile(r"os_error_code='?(\d+)")  # How tensorstore's errors carry the system's.
_LOGGERS = ('absl', 'asyncio')  # Orbax logs its threads' errors through absl; asyncio, futures nobody awaited.
_WRITERS = tuple(f'{os.sep}{name}{os.sep}' for name in ('orbax', 'tensorstore', 'tensorboardX', 'asyncio'))


def _chain(error: BaseException | None) -> Iterator[BaseException]:
  """`error` and the errors it was raised from or while handling."""
  seen = set()
  while error is not None and id(error) not in seen:
    seen.add(id(error))
    yield error
    error = error.__cause__ or error.__context__


def cause(error: BaseException) -> OSError | None:
  """The system's error that `error` is or was raised from: an OSError with an errno, or tensorstore's error
  that carries one (``[os_error_code='28']``, as an OSError); None if none."""
  for e in _chain(error):
    if isinstance(e, OSError) and e.errno is not None:
      return e
    if (code := _OS_ERROR_CODE.search(str(e))) is not None:
      return OSError(int(code[1]), os.strerror(int(code[1])))
  return None


def output_error(error: OSError, work: pathlib.Path) -> OSError:
  """`error` as one line naming its path and ``--workdir`` when it is about the workdir `work`
  (`outputs.output_error`)."""
  return outputs.output_error(error, work, FLAG)


def _failed_write(error: BaseException | None) -> bool:
  """Whether `error`, reported by a thread, is a failed read or write (any OSError: a closed handle too) or an
  asyncio callback that came after orbax closed the event loop of a failed save, raised in the code of a library
  that writes the run (`_WRITERS`)."""
  failed = any(
    isinstance(e, OSError) or cause(e) is not None or (isinstance(e, RuntimeError) and str(e) == 'Event loop is closed')
    for e in _chain(error)
  )
  frames = [frame for e in _chain(error) for frame, _ in traceback.walk_tb(e.__traceback__)]
  # No frame at all: an exception set on a future by tensorstore's own threads (asyncio reports it unretrieved).
  return failed and (not frames or any(writer in frame.f_code.co_filename for writer in _WRITERS for frame in frames))


class _DropFailedWrites(logging.Filter):
  def filter(self, record: logging.LogRecord) -> bool:
    return not (record.exc_info and _failed_write(record.exc_info[1]))


@contextlib.contextmanager
def quiet() -> Iterator[None]:
  """Inside the block, a failed write that another thread reports (an uncaught exception, an exception nobody
  could raise, a log record of orbax or asyncio with the exception) is not printed: the trainer says it. Other
  exceptions are printed as before. When the block fails, the process is ending with that failure: the reports
  of its threads and of its exit stay quiet until it ends (tensorboardX flushes at exit, futures are collected);
  else everything is as it was before the block."""
  thread_hook, unraisable_hook = threading.excepthook, sys.unraisablehook
  filters = [(logging.getLogger(name), _DropFailedWrites()) for name in _LOGGERS]

  def in_thread(args: threading.ExceptHookArgs) -> None:
    if not _failed_write(args.exc_value):
      thread_hook(args)

  def unraisable(args) -> None:
    if not _failed_write(args.exc_value):
      unraisable_hook(args)

  threading.excepthook, sys.unraisablehook = in_thread, unraisable
  for logger, drop in filters:
    logger.addFilter(drop)
  yield  # An exception leaves the hooks in place (above).
  threading.excepthook, sys.unraisablehook = thread_hook, unraisable_hook
  for logger, drop in filters:
    logger.removeFilter(drop)
