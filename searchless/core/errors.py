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
the command quietly. A Beam job's command adds its runner's quirks (`searchless.data.beam_command`).

>>> try:
...   with one_line_errors():
...     raise FileNotFoundError('games.pgn: no such file')
... except SystemExit as exit:
...   exit.code
2
"""

from collections.abc import Iterator
import contextlib
import importlib
import os
import sys
from typing import NoReturn

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
