"""The UCI loop both fake engines run (imported from the script's own folder, which Python puts on sys.path)."""

import sys
from collections.abc import Callable


def serve(name: str, answer: Callable[[str], str]) -> None:
  """Speaks UCI on stdin/stdout as `name` (with a MultiPV option) until quit; `answer(go)` is a search's output."""
  for line in sys.stdin:
    command = line.strip()
    if command == 'uci':
      print(f'id name {name}\noption name MultiPV type spin default 1 min 1 max 500\nuciok', flush=True)
    elif command == 'isready':
      print('readyok', flush=True)
    elif command.startswith('go'):
      print(answer(command), flush=True)
    elif command == 'quit':
      break
