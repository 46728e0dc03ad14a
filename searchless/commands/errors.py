"""How every console command fails: a bad input ends it with one line on stderr, not a traceback.

Each command's `main(argv)` parses its flags and calls the library's typed
`run(...)` inside `one_line_errors()`:

    def main(argv: Sequence[str] | None = None) -> None:
      args = _parser().parse_args(argv)
      with errors.one_line_errors():
        result = library.run(args.input, limit=args.limit)
      errors.print_out(str(result))

A user's mistake (a missing file, a bad value, an engine that will not start or
dies) becomes ``error: <message>`` and exit status 2; Ctrl-C becomes
``interrupted; <what was kept>`` and exit status 130 (the shell's 128 + SIGINT);
a bug still shows its traceback. Output goes through `print_out`, so a reader that goes away (``| head``) ends
the command quietly.

>>> try:
...   with one_line_errors():
...     raise FileNotFoundError('games.pgn: no such file')
... except SystemExit as exit:
...   exit.code
2
"""

from collections.abc import Callable, Iterator, Sequence
import contextlib
import importlib
import logging
import os
import re
import sys
import tempfile
import threading
import traceback
from typing import Any, NoReturn

import chess.engine

# Errors that a user's input or environment causes; anything else is a bug and keeps its traceback.
USER_ERRORS: tuple[type[BaseException], ...] = (
  FileNotFoundError,
  ValueError,
  OSError,
  chess.engine.EngineError,
  chess.engine.EngineTerminatedError,
)


def fail(message: object, status: int = 2) -> NoReturn:
  """Ends the command with ``error: <message>`` (one line) on stderr and exit `status`."""
  print(f'error: {" ".join(str(message).split())}', file=sys.stderr)
  raise SystemExit(status)


INTERRUPTED = 130  # The exit status of a command stopped by Ctrl-C (the shell's 128 + SIGINT).


def interrupted(error: KeyboardInterrupt) -> NoReturn:
  """Ends the command with ``interrupted; <message>`` (one line) on stderr and exit status 130; the message is
  the interrupt's own (what the library kept or removed: ``raise KeyboardInterrupt('checkpoint saved ...')``)."""
  said = ' '.join(str(error).split())
  print(f'interrupted; {said or "stopped before the end"}', file=sys.stderr, flush=True)
  raise SystemExit(INTERRUPTED)


def print_out(text: str) -> None:
  """Prints `text` on stdout; a reader that went away (`command | head`) ends the command quietly, with status 1,
  as a Unix tool ends, not with a traceback."""
  try:
    print(text, flush=True)
  except BrokenPipeError:
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's last flush of stdout must not fail.
    raise SystemExit(1)


def require_extra(module: str, extra: str, command: str) -> None:
  """Exits with one line naming the extra to install when `module`, an optional dependency, is missing.

  A command that needs one calls this before importing what uses it.
  """
  try:
    importlib.import_module(module)
  except ModuleNotFoundError as e:
    if e.name != module:
      raise
    fail(f"{command} needs {module}, which comes with an extra: pip install 'searchless[{extra}]'")


class _QuietBeamImport(logging.Filter):
  """Drops Beam's import-time 'apitools not found' warning (its GCS extras not installed)."""

  def filter(self, record: logging.LogRecord) -> bool:
    return 'apitools not found' not in record.getMessage()


def beam_command(command: str) -> None:
  """What a Beam command's module does before its imports: Beam is required (the ``annotate`` extra), and
  Beam's 'apitools not found' warning is dropped from this program's log (the library leaves logging alone)."""
  logging.getLogger().addFilter(_QuietBeamImport())
  require_extra('apache_beam', 'annotate', command)


@contextlib.contextmanager
def one_line_errors(*extra: type[BaseException]) -> Iterator[None]:
  """Turns `USER_ERRORS` (and `extra`) raised inside the block into `fail(...)`, and Ctrl-C (KeyboardInterrupt)
  into `interrupted(...)`: the one place a command handles either."""
  try:
    yield
  except (*USER_ERRORS, *extra) as error:
    fail(error)
  except KeyboardInterrupt as error:
    interrupted(error)


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
_USER_ERROR_NAMES = frozenset(
  {
    'FileNotFoundError',
    'ValueError',
    'OSError',
    'PermissionError',
    'IsADirectoryError',
    'NotADirectoryError',
    'EngineError',
    'EngineTerminatedError',
    'CorruptInputError',
    'EngineNotFound',
    'EngineUnresponsive',
    'EngineBroken',
    'FileExistsError',
  }
)


_WHILE_RUNNING = re.compile(r" \[while running '[^']*'\]$")  # What Beam adds to a step's error.


def worker_error(error: BaseException) -> str | None:
  """The message of the user error inside a runner's wrapped worker error (a traceback as text), if any.

  >>> worker_error(RuntimeError('Traceback (most recent call last):\\n  File "x.py", line 1\\n'
  ...                           'searchless.data.streams.CorruptInputError: g.pgn.zst: zstd stream is truncated'
  ...                           " [while running 'ReadGames']"))
  'g.pgn.zst: zstd stream is truncated'
  >>> worker_error(RuntimeError('a bug')) is None
  True
  """
  found = [m for m in _ERROR_LINE.finditer(str(error).replace('\\n', '\n')) if m['name'] in _USER_ERROR_NAMES]
  if not found:
    return None
  return _WHILE_RUNNING.sub('', found[-1]['message'].strip())


def beam_main(
  run: Callable[[list[str]], Any], argv: Sequence[str] | None, name: str, *extra: type[BaseException]
) -> Any:
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
    with one_line_errors(*extra):
      try:
        with quiet:
          return run(argv)
      except (*USER_ERRORS, *extra) as error:  # Raised here or by an in-process runner (with the step's name).
        fail(_WHILE_RUNNING.sub('', str(error)))
      except Exception as error:  # pylint: disable=broad-except
        if verbose or (message := worker_error(error)) is None:
          raise
        keep_log = os.path.getsize(worker_log) > 0
        fail(message + (f" (workers' log: {worker_log})" if keep_log else ''))
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
