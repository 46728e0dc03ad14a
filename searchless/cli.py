"""What the console commands share: a bad input ends the command with one line, not a traceback."""

import sys
from typing import NoReturn


def fail(message: object, status: int = 2) -> NoReturn:
  """Ends the command with ``error: <message>`` (one line) on stderr and exit `status`."""
  print(f'error: {" ".join(str(message).split())}', file=sys.stderr)
  raise SystemExit(status)
