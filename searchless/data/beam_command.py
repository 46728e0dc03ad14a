"""How a Beam job runs as a console command: Beam's logs quiet, its workers' tracebacks kept in a log file, and a
user's error raised in a worker process still one line (`searchless.plumbing.errors`).

A pipeline module calls `require_beam` before its Beam imports; the command runs the pipeline's `run(argv)`
through `main`:

    beam_command.require_beam('searchless-annotate')  # The 'annotate' extra named when Beam is missing.
    ...
    manifest = beam_command.main(lambda args: annotate.run(args), argv, 'searchless-annotate')
"""

from collections.abc import Callable, Iterator, Sequence
import contextlib
import logging
import os
import re
import sys
import tempfile
import threading
import traceback
from typing import Any

from searchless.plumbing import errors


class _QuietBeamImport(logging.Filter):
  """Drops Beam's import-time 'apitools not found' warning (its GCS extras not installed)."""

  def filter(self, record: logging.LogRecord) -> bool:
    return 'apitools not found' not in record.getMessage()


def require_beam(command: str) -> None:
  """What a Beam command's module does before its imports: Beam is required (the ``annotate`` extra), and
  Beam's 'apitools not found' warning is dropped from this program's log (the library leaves logging alone)."""
  logging.getLogger().addFilter(_QuietBeamImport())
  errors.require_extra('apache_beam', 'annotate', command)


@contextlib.contextmanager
def child_stderr_to(path: str) -> Iterator[None]:
  """Inside the block, processes this one starts write their stderr to `path`; its own `sys.stderr` does not move.

  Beam's worker processes print each failed bundle's traceback to the stderr
  they inherit (file descriptor 2), whatever the log level; this sends fd 2 to
  `path` and gives `sys.stderr` a copy of the terminal's descriptor. Both are
  restored at the end.

  >>> import subprocess, tempfile
  >>> log = tempfile.mktemp()
  >>> with child_stderr_to(log):
  ...   _ = subprocess.run('echo from-a-child >&2', shell=True)
  >>> open(log).read()
  'from-a-child\\n'
  """
  original = sys.stderr
  original.flush()
  terminal = os.dup(2)
  log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
  os.dup2(log, 2)
  os.close(log)
  sys.stderr = open(
    terminal, 'w', buffering=1, encoding=getattr(original, 'encoding', None) or 'utf-8', errors='backslashreplace'
  )
  try:
    yield
  finally:
    sys.stderr.flush()
    os.dup2(terminal, 2)
    sys.stderr.close()  # Closes `terminal`; fd 2 is the terminal again.
    sys.stderr = original


# The last "package.module.Class: message" line of a traceback that Beam wraps a worker's error in.
_ERROR_LINE = re.compile(r'^(?:[A-Za-z_][\w.]*\.)?(?P<name>[A-Za-z_]\w*): (?P<message>.+)$', re.MULTILINE)


def _user_error_names(extra: Sequence[type[BaseException]] = ()) -> frozenset[str]:
  """The class names of `errors.USER_ERRORS`, `extra` and their subclasses (those imported by now): what a worker's
  traceback names when a user's input failed it."""
  names, todo = set(), [*errors.USER_ERRORS, *extra]
  while todo:
    cls = todo.pop()
    if cls.__name__ not in names:
      names.add(cls.__name__)
      todo.extend(cls.__subclasses__())
  return frozenset(names)


_WHILE_RUNNING = re.compile(r" \[while running '[^']*'\]$")  # What Beam adds to a step's error.


def worker_error(error: BaseException, extra: Sequence[type[BaseException]] = ()) -> str | None:
  """The message of the user error inside a runner's wrapped worker error (a traceback as text), if any.

  >>> from searchless.data import streams  # Where CorruptInputError, an OSError, is defined.
  >>> worker_error(RuntimeError('Traceback (most recent call last):\\n  File "x.py", line 1\\n'
  ...                           'searchless.data.streams.CorruptInputError: g.pgn.zst: zstd stream is truncated'
  ...                           " [while running 'ReadGames']"))
  'g.pgn.zst: zstd stream is truncated'
  >>> worker_error(RuntimeError('a bug')) is None
  True
  """
  names = _user_error_names(extra)
  found = [m for m in _ERROR_LINE.finditer(str(error).replace('\\n', '\n')) if m['name'] in names]
  if not found:
    return None
  return _WHILE_RUNNING.sub('', found[-1]['message'].strip())


def main(run: Callable[[list[str]], Any], argv: Sequence[str] | None, name: str, *extra: type[BaseException]) -> Any:
  """Runs a Beam command's `run(argv)` quietly: Beam's logs off, the workers' stderr to a log file kept
  (and named in the one-line error) only when the job fails, and every user error as one line.
  With ``--verbose`` in `argv`, Beam's logs and the traceback stay. Returns what `run` returned."""
  argv = list(sys.argv[1:] if argv is None else argv)
  verbose = '--verbose' in argv
  logging.getLogger().setLevel(logging.WARNING)
  if not verbose:  # Beam logs each failed bundle's traceback; the one-line error says it all.
    logging.getLogger('apache_beam').setLevel(logging.CRITICAL)
    if not any(a.startswith('--default_sdk_harness_log_level') for a in argv):
      argv = [*argv, '--default_sdk_harness_log_level', 'CRITICAL']  # The worker processes' own logs.
  fd, worker_log = tempfile.mkstemp(prefix=f'{name}-', suffix='.log')
  os.close(fd)
  quiet = contextlib.nullcontext() if verbose else _quiet_beam(worker_log)
  keep_log = False
  try:
    with errors.one_line_errors(*extra):
      try:
        with quiet:
          return run(argv)
      except (*errors.USER_ERRORS, *extra) as error:  # Raised here or by an in-process runner (with the step's name).
        errors.fail(_WHILE_RUNNING.sub('', str(error)))
      except Exception as error:  # pylint: disable=broad-except
        if verbose or (message := worker_error(error, extra)) is None:
          raise
        keep_log = os.path.getsize(worker_log) > 0
        errors.fail(message + (f" (workers' log: {worker_log})" if keep_log else ''))
  finally:
    if not keep_log:
      os.remove(worker_log)


@contextlib.contextmanager
def _quiet_beam(log: str) -> Iterator[None]:
  """Inside the block, child processes' stderr (`child_stderr_to`) and the tracebacks of this process's other
  threads (Beam's job service reports a worker killed by Ctrl-C from its own thread) go to `log`."""
  previous = threading.excepthook

  def to_log(hook_args: threading.ExceptHookArgs) -> None:
    with open(log, 'a', encoding='utf-8') as f:
      traceback.print_exception(hook_args.exc_type, hook_args.exc_value, hook_args.exc_traceback, file=f)

  threading.excepthook = to_log
  try:
    with child_stderr_to(log):
      yield
  finally:
    threading.excepthook = previous
