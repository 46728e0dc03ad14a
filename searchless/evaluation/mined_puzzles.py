"""A mined puzzle: its Lichess row, id, rating and themes, and the CSV it is written to.

`searchless.evaluation.puzzle_mining` finds the puzzles; this module says what
one is in the terms of the Lichess puzzle database, so that
`searchless.data.puzzles.read_puzzles` and ``searchless-puzzles`` read the
written CSV unchanged.

The rating, themes and id rules are described with the whole method in
`searchless.evaluation.puzzle_mining`.

>>> themes(1, mates=False, only_moves=True)
('mined', 'oneMove', 'onlyMove')
>>> themes(2, mates=True, only_moves=True)
('mate', 'mateIn2', 'mined', 'onlyMove', 'short')
>>> rating_of_depth(1), rating_of_depth(12)
(750, 2400)
"""

import collections
import csv
import dataclasses
import hashlib
import os
from collections.abc import Sequence

from searchless.data import puzzles as puzzles_lib

MAX_RATING_DEPTH = 12
RATING_BASE, RATING_PER_DEPTH = 600, 150
LENGTH_THEMES = ('oneMove', 'short', 'long')  # Lichess: 1, 2, 3 solver moves; more: veryLong.


@dataclasses.dataclass(frozen=True)
class MinedPuzzle:
  """One mined puzzle, in the terms of a Lichess puzzle row."""

  puzzle_id: str
  fen: str  # The board before the setup move `moves[0]` (Lichess `FEN`).
  moves: tuple[str, ...]  # UCI: setup move (played in the game), solver, reply, solver, ...
  rating: int
  themes: tuple[str, ...]
  game_url: str
  depth: int  # The rating's depth: 1..MAX_RATING_DEPTH, MAX_RATING_DEPTH + 1 = not found.
  best_win_prob: float  # Of the first solver move ...
  second_win_prob: float  # ... and of the second best move there (0.0 when there is none).

  @property
  def solver_moves(self) -> tuple[str, ...]:
    return self.moves[1::2]

  def lichess_row(self) -> dict[str, str]:
    """The row in `puzzles.LICHESS_COLUMNS`."""
    return {
      'PuzzleId': self.puzzle_id,
      'FEN': self.fen,
      'Moves': ' '.join(self.moves),
      'Rating': str(self.rating),
      'RatingDeviation': '0',
      'Popularity': '0',
      'NbPlays': '0',
      'Themes': ' '.join(self.themes),
      'GameUrl': self.game_url,
      'OpeningTags': '',
    }


def rating_of_depth(depth: int) -> int:
  """The Rating column of a puzzle Stockfish first solves at `depth`."""
  return RATING_BASE + RATING_PER_DEPTH * depth


def puzzle_id(fen: str, moves: Sequence[str]) -> str:
  """A stable short id of a puzzle.

  >>> puzzle_id('rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1', ['e2e4', 'e7e5'])
  'mb7bd5c5d'
  """
  return 'm' + hashlib.sha1(f'{fen}|{" ".join(moves)}'.encode()).hexdigest()[:8]


def themes(solver_moves: int, *, mates: bool, only_moves: bool) -> tuple[str, ...]:
  """The sorted Themes of a puzzle of `solver_moves` solver moves."""
  found = {'mined'}
  if mates:
    found |= {'mate', f'mateIn{solver_moves}'}
  found.add(LENGTH_THEMES[solver_moves - 1] if solver_moves <= len(LENGTH_THEMES) else 'veryLong')
  if only_moves:
    found.add('onlyMove')
  return tuple(sorted(found))


def write_csv(puzzles: Sequence[MinedPuzzle], path: str | os.PathLike) -> None:
  """Writes `puzzles` as a Lichess puzzle CSV (header `puzzles.LICHESS_COLUMNS`, '\\n' line ends)."""
  directory = os.path.dirname(os.fspath(path))
  if directory:
    os.makedirs(directory, exist_ok=True)
  with open(path, 'w', newline='', encoding='utf-8') as f:
    writer = csv.DictWriter(f, fieldnames=puzzles_lib.LICHESS_COLUMNS, lineterminator='\n')
    writer.writeheader()
    for puzzle in puzzles:
      writer.writerow(puzzle.lichess_row())


def rating_histogram(puzzles: Sequence[MinedPuzzle]) -> str:
  """A text table of the puzzles per rating (and its depth).

  >>> print(rating_histogram([]))
  rating  depth      n
  """
  counts = collections.Counter((p.rating, p.depth) for p in puzzles)
  lines = [f'{"rating":<7} {"depth":>5} {"n":>6}']
  for (rating, depth), n in sorted(counts.items()):
    depth_text = f'>{MAX_RATING_DEPTH}' if depth > MAX_RATING_DEPTH else str(depth)
    lines.append(f'{rating:<7} {depth_text:>5} {n:>6}  {"#" * min(n, 60)}')
  return '\n'.join(lines)
