r"""Read Lichess puzzles, in the Lichess or the ChessBench CSV layout.

Two layouts are recognised from the header (extra columns are ignored):

* Lichess (``lichess_db_puzzle.csv``): ``PuzzleId,FEN,Moves,Rating,...,Themes,...``;
* ChessBench (``puzzles.csv`` of searchless_chess):
  ``PuzzleId,Rating,PGN,Solution,FEN,Moves`` - the board is the final position
  of the ``PGN`` game (as the reference evaluation reads it).

In both, that board is the position BEFORE the opponent's move ``Moves[0]``
(https://database.lichess.org/#puzzles). The solver faces the board after it
(`Puzzle.start_fen`) and must find ``Moves[1]``; the opponent replies
``Moves[2]``, the solver must find ``Moves[3]``, and so on.

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), 'p.csv')
>>> _ = open(path, 'w').write('PuzzleId,FEN,Moves,Rating,Themes\n'
...     'x1,6k1/5ppp/8/8/8/8/5PPP/3R2K1 b - - 0 1,g8f8 d1d8,600,mate mateIn1\n')
>>> puzzle, = read_puzzles(path)
>>> puzzle.start_fen, puzzle.solver_moves, puzzle.themes
('5k2/5ppp/8/8/8/8/5PPP/3R2K1 w - - 1 2', ('d1d8',), ('mate', 'mateIn1'))

Files are read as `searchless.data.pgn` reads games: ``gs://`` works (through Beam),
``.gz``/``.bz2``/``.zst`` are decompressed by extension.
"""

import codecs
import csv
import io
from collections.abc import Iterator, Mapping
from typing import NamedTuple

import chess
import chess.pgn


from searchless.data import streams
from searchless.plumbing import errors

LICHESS = 'lichess'
CHESSBENCH = 'chessbench'
LICHESS_COLUMNS = (
  'PuzzleId',
  'FEN',
  'Moves',
  'Rating',
  'RatingDeviation',
  'Popularity',
  'NbPlays',
  'Themes',
  'GameUrl',
  'OpeningTags',
)
REQUIRED_COLUMNS = {
  LICHESS: ('PuzzleId', 'FEN', 'Moves', 'Rating'),
  CHESSBENCH: ('PuzzleId', 'PGN', 'Moves', 'Rating'),
}


class PuzzleFormatError(errors.BadInput):
  """A puzzle file or row that cannot be read; the message names file and line."""


class Puzzle(NamedTuple):
  puzzle_id: str
  rating: int
  themes: tuple[str, ...]
  fen: str  # The board before the opponent's move `moves[0]` (Lichess `FEN`).
  moves: tuple[str, ...]  # UCI: opponent, solver, opponent, solver, ...
  start_fen: str  # The board the solver faces first: `fen` after `moves[0]`.
  row: Mapping[str, str]  # The CSV row as read (for passing other columns on).

  @property
  def solver_moves(self) -> tuple[str, ...]:
    """The moves the solver must find: ``Moves[1], Moves[3], ...``."""
    return self.moves[1::2]

  @property
  def opponent_moves(self) -> tuple[str, ...]:
    """The opponent's moves: the setup move ``Moves[0]``, then ``Moves[2], ...``."""
    return self.moves[0::2]

  def start_board(self) -> chess.Board:
    return chess.Board(self.start_fen)

  def lichess_row(self) -> dict[str, str]:
    """This puzzle in the Lichess columns (those the source lacks are empty)."""
    out = {column: self.row.get(column) or '' for column in LICHESS_COLUMNS}
    out.update(PuzzleId=self.puzzle_id, FEN=self.fen, Moves=' '.join(self.moves), Rating=str(self.rating))
    return out


def detect_layout(header: list[str]) -> str:
  """Returns `LICHESS` or `CHESSBENCH` for a CSV header (PGN column -> ChessBench)."""
  layout = CHESSBENCH if 'PGN' in header else LICHESS
  missing = [c for c in REQUIRED_COLUMNS[layout] if c not in header]
  if missing:
    raise ValueError(f'missing column(s) {missing} for the {layout} layout (header: {header})')
  return layout


def _board_before(layout: str, row: Mapping[str, str]) -> chess.Board:
  if layout == CHESSBENCH:
    game = chess.pgn.read_game(io.StringIO(row['PGN']))
    if game is None or game.errors:
      raise ValueError(f'bad PGN {row["PGN"]!r}' + (f': {game.errors[0]}' if game else ''))
    return game.end().board()
  board = chess.Board(row['FEN'])  # ValueError names a malformed FEN.
  if not board.is_valid():
    raise ValueError(f'invalid position in FEN {row["FEN"]!r} ({board.status()!r})')
  return board


def parse_row(layout: str, row: Mapping[str, str]) -> Puzzle:
  """Returns the puzzle of one CSV row; ValueError says what is wrong with it."""
  try:
    rating = int(row['Rating'])
  except ValueError:
    raise ValueError(f'bad Rating {row["Rating"]!r}') from None
  board = _board_before(layout, row)
  fen = row['FEN'] if layout == LICHESS else board.fen()
  moves = tuple(row['Moves'].split())
  if len(moves) < 2:
    raise ValueError(f'Moves {row["Moves"]!r}: need the opponent move and at least one solution move')
  start_fen = ''  # The board after Moves[0] (there are at least two moves).
  for index, uci in enumerate(moves):
    try:
      move = chess.Move.from_uci(uci)
    except ValueError:
      move = None
    if move is None or not board.is_legal(move):
      raise ValueError(f'illegal move Moves[{index}]={uci!r} in {board.fen()}')
    board.push(move)
    if index == 0:
      start_fen = board.fen()
  themes = tuple((row.get('Themes') or '').split())
  return Puzzle(row['PuzzleId'], rating, themes, fen, moves, start_fen, row)


def _text_lines(path: str) -> Iterator[str]:
  """Yields the lines (with their ends) of the UTF-8 text file at `path`, decompressed by its extension."""
  number = 0
  try:
    for data in streams.read_lines(path):
      number += 1
      if number == 1:
        data = data.removeprefix(codecs.BOM_UTF8)
      try:
        yield data.decode('utf-8') + '\n'
      except UnicodeDecodeError as e:
        raise PuzzleFormatError(f'{path}:{number}: not UTF-8 text ({e})') from None
  except streams.CorruptInputError as e:
    raise PuzzleFormatError(str(e)) from None


def read_puzzles(path: str, limit: int | None = None) -> Iterator[Puzzle]:
  """Streams the first `limit` (default all) puzzles of the CSV at `path`.

  Raises PuzzleFormatError naming the file and line of the first bad row.
  """
  reader = csv.reader(_text_lines(path))
  try:
    header = next(reader, None)
    if header is None:
      raise PuzzleFormatError(f'{path}: empty file, expected a puzzle CSV header')
    try:
      layout = detect_layout(header)
    except ValueError as e:
      raise PuzzleFormatError(f'{path}:1: {e}') from None
    count = 0
    while limit is None or count < limit:
      line = reader.line_num + 1
      fields = next(reader, None)
      if fields is None:
        return
      if not any(fields):
        continue  # A blank line.
      try:
        if len(fields) != len(header):
          raise ValueError(f'{len(fields)} fields, the header has {len(header)}')
        puzzle = parse_row(layout, dict(zip(header, fields)))
      except ValueError as e:
        raise PuzzleFormatError(f'{path}:{line}: {e}') from None
      count += 1
      yield puzzle
  except csv.Error as e:
    raise PuzzleFormatError(f'{path}:{reader.line_num + 1}: {e}') from None
