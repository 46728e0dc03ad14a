"""How every console command fails: a user's mistake ends it with one line on stderr; a bug keeps its traceback.

Each command's `main(argv)` parses its flags and calls the library's typed
`run(...)` inside `one_line_errors()`:

    def main(argv: Sequence[str] | None = None) -> None:
      args = _parser().parse_args(argv)
      with errors.one_line_errors():
        result = library.run(args.input, limit=args.limit)
      errors.print_or_quit(str(result))

The library raises a `UserError` where it checks what a user gave (a flag, a
file, a record, a config, a checkpoint's name, a FEN or a move) or met in the
environment (an engine that will not start or dies, a full disk in an output
folder, a folder another command writes): the command ends with
``error: <message>`` and exit status 2. Any other exception is a bug, or a
fault nobody checked for, and keeps its traceback; an OSError about a path
first says the path (and the flag given it). Ctrl-C becomes
``interrupted; <what was kept>`` and exit status 130 (the shell's 128 +
SIGINT); SIGTERM (`kill`, a scheduler, a container's stop) is handled as Ctrl-C
is, the same cleanup and line, with exit status 143 (128 + SIGTERM). Output
goes through `print_or_quit`, so a reader that goes away (``| head``) ends the
command quietly. A Beam job's command adds its runner's
quirks (`searchless.data.beam_job`). docs/bad-input.md says which is which.

>>> try:
...   with one_line_errors():
...     raise MissingInput('games.pgn: no such file')
... except SystemExit as exit:
...   exit.code
2
>>> with one_line_errors():
...   raise ValueError('a shape mismatch: a bug')
Traceback (most recent call last):
...
ValueError: a shape mismatch: a bug
"""

from collections.abc import Iterator, Sequence
import contextlib
import fnmatch
import importlib
import logging
import os
import signal
import sys
import threading
from typing import NoReturn

import chess.engine


class UserError(Exception):
  """An error that a user's input or environment causes, not a bug: its message is one line that names the file,
  line, record or flag at fault. A command ends with it in one line (`one_line_errors`). Each concrete kind is
  also the builtin error it refines, so ``except ValueError`` still catches a `BadInput`."""


class BadInput(UserError, ValueError):
  """A value a user gave is wrong: a flag's, a record or line of an input file, a config's field, a FEN, a move."""


class MissingInput(UserError, FileNotFoundError):
  """A file, folder or checkpoint that a user named (or that a step needs from an earlier one) is not there."""


class NotAFile(UserError, IsADirectoryError):
  """A folder given where a file goes."""


class OutputExists(UserError, FileExistsError):
  """An output that must be new is there already."""


# Errors that a user's input or environment causes; anything else is a bug and keeps its traceback.
USER_ERRORS: tuple[type[BaseException], ...] = (
  UserError,
  chess.engine.EngineError,
  chess.engine.EngineTerminatedError,
)


def fail(message: object, status: int = 2) -> NoReturn:
  """Ends the command with ``error: <message>`` (one line) on stderr and exit `status`."""
  print(f'error: {" ".join(str(message).split())}', file=sys.stderr)
  raise SystemExit(status)


INTERRUPTED = 130  # The exit status of a command stopped by Ctrl-C (the shell's 128 + SIGINT).


TERMINATED = 143  # The exit status of a command stopped by SIGTERM (128 + SIGTERM), after Ctrl-C's cleanup.
_TERMINATED: list[int] = []  # The SIGTERMs `one_line_errors` turned into a KeyboardInterrupt.


def interrupted(error: KeyboardInterrupt) -> NoReturn:
  """Ends the command with ``interrupted; <message>`` (one line) on stderr and exit status 130 (143 after a
  SIGTERM); the message is the interrupt's own (what the library kept or removed: ``raise
  KeyboardInterrupt('checkpoint saved ...')``)."""
  said = ' '.join(str(error).split())
  print(f'interrupted; {said or "stopped before the end"}', file=sys.stderr, flush=True)
  raise SystemExit(TERMINATED if _TERMINATED else INTERRUPTED)


def _on_sigterm(number: int, frame: object) -> None:
  del frame
  _TERMINATED.append(number)
  raise KeyboardInterrupt


@contextlib.contextmanager
def _sigterm_as_ctrl_c() -> Iterator[None]:
  """Inside the block, SIGTERM raises KeyboardInterrupt in the main thread, so the cleanup of Ctrl-C runs (a
  tournament's pool stops its workers and engines, a job keeps what it finished) where the default would end this
  process alone, leaving its workers running. A handler a command installs inside (training's, the server's)
  takes over while it is installed; another thread, or a handler already set by the program, is left alone."""
  if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
    yield
    return
  signal.signal(signal.SIGTERM, _on_sigterm)
  try:
    yield
  finally:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def print_or_quit(text: str) -> None:
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


def require_beam(command: str) -> None:
  """What a Beam command's module does before its imports: Beam is required (the ``annotate`` extra), and
  Beam's 'apitools not found' warning is dropped from this program's log (the library leaves logging alone)."""
  logging.getLogger().addFilter(_QuietBeamImport())
  require_extra('apache_beam', 'annotate', command)


def _flag_of(path: str, argv: Sequence[str]) -> str | None:
  """The flag in `argv` whose value is `path`, a folder above it, or a pattern that matches it; None if none.

  >>> _flag_of('runs/a/games.pgn', ['--agent', 'x', '--out', 'runs/a'])
  '--out'
  >>> _flag_of('data/b.pgn', ['--games=data/*.pgn']), _flag_of('c.pgn', ['--games', 'd.pgn'])
  ('--games', None)
  """
  where = os.path.abspath(path)
  for i, arg in enumerate(argv):
    if not arg.startswith('--'):
      continue
    flag, given, value = arg.partition('=')
    if not given:
      if i + 1 == len(argv):
        break
      value = argv[i + 1]
    value = os.path.abspath(value)
    if where == value or where.startswith(value.rstrip(os.sep) + os.sep) or fnmatch.fnmatchcase(where, value):
      return flag
  return None


def _say_path(error: OSError) -> None:
  """Prints the path that `error` names, and the flag it came from when sys.argv shows one, before its traceback."""
  path = os.fsdecode(error.filename)
  flag = _flag_of(path, sys.argv[1:])
  where = f'{path} ({flag})' if flag else path
  print(f'error: {where}: {error.strerror or error} (not a checked input; the traceback follows)', file=sys.stderr)


@contextlib.contextmanager
def one_line_errors(*extra: type[BaseException]) -> Iterator[None]:
  """Turns `USER_ERRORS` (and `extra`) raised inside the block into `fail(...)`, and Ctrl-C (KeyboardInterrupt)
  into `interrupted(...)`: the one place a command handles either. Any other error keeps its traceback; an OSError
  that names a path says the path (and its flag) first. SIGTERM inside it is handled as Ctrl-C (exit status 143)."""
  try:
    with _sigterm_as_ctrl_c():
      yield
  except (*USER_ERRORS, *extra) as error:
    fail(error)
  except KeyboardInterrupt as error:
    interrupted(error)
  except OSError as error:
    if error.filename is not None and not isinstance(error, BrokenPipeError):
      _say_path(error)
    raise
