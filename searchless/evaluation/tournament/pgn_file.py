"""A tournament's games file (``OUT/games.pgn``): appended as games finish, read back to resume.

Every finished game is appended (and synced) at once, so nothing is lost on a
crash; a rerun reads the complete games back (`load_games` drops a game a
crash cut short) and plays only the others; at the end the file is rewritten in
schedule order (`write_games`). A `Record` is what the rest of the tournament
needs of one game.

>>> text = ('[Round "3"]\\n[White "A"]\\n[Black "B"]\\n[Result "1-0"]\\n[Termination "normal"]\\n\\n'
...         '1. f3 e5 {checkmate} 1-0')
>>> record = parse(text)
>>> record.key, record.result, record.reason
((3, 'A', 'B'), '1-0', 'checkmate')
"""

from collections.abc import Iterable
import io
import os
from typing import NamedTuple

import chess.pgn

from searchless.plumbing import atomic
from searchless.plumbing import errors
from searchless.plumbing import outputs

GAMES_FILE = 'games.pgn'
RESULTS = ('1-0', '0-1', '1/2-1/2')


class Record(NamedTuple):
  """One game of the games file."""

  key: tuple[int, str, str]  # (round, White, Black)
  white: str
  black: str
  result: str
  opening: str
  termination: str
  reason: str  # The comment after the last move.
  text: str  # The game's PGN.


def record(game: chess.pgn.Game) -> Record:
  """The record of a parsed game (round -1 when its Round is not a number)."""
  h = game.headers
  try:
    round_number = int(h.get('Round', ''))
  except ValueError:
    round_number = -1
  return Record(
    (round_number, h.get('White', '?'), h.get('Black', '?')),
    h.get('White', '?'),
    h.get('Black', '?'),
    h.get('Result', '*'),
    h.get('Opening', ''),
    h.get('Termination', ''),
    game.end().comment,
    game.accept(chess.pgn.StringExporter()),
  )


def parse(text: str) -> Record:
  """The record of one game's PGN text."""
  game = chess.pgn.read_game(io.StringIO(text))
  if game is None:
    raise errors.BadInput(f'no PGN game in {text[:80]!r}')
  return record(game)


def load_games(path: str) -> tuple[list[Record], int]:
  """Complete games of an existing games file, and how many incomplete ones (e.g. cut by a crash) were dropped.

  A game is complete when it parses without errors, has a result, as many moves
  as its PlyCount and its text ends with its result (a cut comment hides moves).
  """
  if not os.path.exists(path):
    return [], 0
  with open(path, encoding='utf-8') as f:
    stream = io.StringIO(f.read())
  records: list[Record] = []
  dropped = 0
  while True:
    start = stream.tell()
    if (game := chess.pgn.read_game(stream)) is None:
      return records, dropped
    text = stream.getvalue()[start : stream.tell()].strip()
    result = game.headers.get('Result')
    plies = sum(1 for _ in game.mainline_moves())
    if game.errors or result not in RESULTS or game.headers.get('PlyCount') != str(plies) or not text.endswith(result):
      dropped += 1
    else:
      records.append(record(game))


def write_games(path: str, records: Iterable[Record]) -> None:
  """Replaces the games file with `records` (atomically)."""
  atomic.write_text(path, ''.join(r.text + '\n\n' for r in records))


def append(path: str, text: str) -> None:
  """Appends one game's PGN text and syncs it to disk. An error names `path`; a file it made is not left empty
  (a cut game that is left is dropped when the file is read back)."""
  new = not os.path.exists(path)
  try:
    with outputs.open_output(path, 'a') as f:
      f.write(text + '\n\n')
      f.flush()
      with outputs.errors_naming(path):
        os.fsync(f.fileno())
  except OSError:
    if new and os.path.exists(path) and not os.path.getsize(path):
      os.remove(path)
    raise
