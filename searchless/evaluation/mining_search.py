"""How puzzle mining asks Stockfish whether a played move sets up a puzzle ("only move" tactics).

`Searcher` is one Stockfish process whose every search starts from a cleared
hash, so each result depends on the board alone; `puzzle_at` follows the line
that one `Candidate` setup move starts: the only-move test (`verdict`) on each
solver board, the opponent's best replies, and the depth at which Stockfish
first finds each solver move (the rating). The method, with its defaults, is
described in `searchless.evaluation.puzzle_mining`.

>>> board = chess.Board('6k1/5ppp/8/8/8/8/5PPP/3R2K1 w - - 0 1')
>>> line = SearchLine(chess.Move.from_uci('d1d8'), 1.0)
>>> verdict(board, [line, SearchLine(chess.Move.from_uci('g2g3'), 0.62)], 0.7, 0.3)
'only'
>>> verdict(board, [line, SearchLine(chess.Move.from_uci('d1d7'), 0.95)], 0.7, 0.3)  # Mates: accepted.
'mate'
"""

import dataclasses
from collections.abc import Sequence
from typing import NamedTuple

import chess
import chess.engine

from searchless.core import values
from searchless.engines import launch
from searchless.evaluation import mined_puzzles


class SearchLine(NamedTuple):
  move: chess.Move
  win_prob: float  # The solver's (side to move) win probability after `move`.


class Candidate(NamedTuple):
  """A played move that may set up a puzzle."""

  fen: str  # Before the setup move.
  setup: chess.Move
  game_url: str  # With the '#ply' suffix.


@dataclasses.dataclass(frozen=True)
class Settings:
  """The puzzle test's thresholds (see `searchless.evaluation.puzzle_mining.mine`)."""

  min_best: float
  min_gap: float
  max_solver_moves: int
  min_swing: float


def mates(board: chess.Board, move: chess.Move) -> bool:
  """Whether `move` checkmates on `board` (left unchanged)."""
  board.push(move)
  try:
    return board.is_checkmate()
  finally:
    board.pop()


def verdict(board: chess.Board, lines: Sequence[SearchLine], min_best: float, min_gap: float) -> str | None:
  """'only' (the best move wins and is clearly better), 'mate' (it mates at once) or None."""
  if not lines:
    return None
  best = lines[0]
  second = lines[1].win_prob if len(lines) > 1 else 0.0
  if best.win_prob >= min_best and best.win_prob - second >= min_gap:
    return 'only'
  if mates(board, best.move):
    return 'mate'
  return None


def is_over(board: chess.Board) -> bool:
  """Whether the game is over on `board` (draw claims aside)."""
  return board.is_game_over(claim_draw=False)


class Searcher:
  """One Stockfish process; every search starts from a cleared hash."""

  def __init__(self, path: str, limit: launch.SearchLimit):
    self._engine = launch.open_engine(path)
    self.name = self._engine.id.get('name', path)
    self._limit = limit.to_chess(launch.HANG_SECONDS)  # python-chess sets no deadline on node and depth searches.

  def top(self, board: chess.Board, multipv: int) -> list[SearchLine]:
    """The engine's `multipv` best moves, best first, with the mover's win probabilities."""
    infos = self._engine.analyse(board, self._limit, multipv=multipv, game=object())
    lines = []
    for info in infos:
      if not info.get('pv') or 'score' not in info:
        raise chess.engine.EngineError(f'no move or score for {board.fen()} (multipv {multipv})')
      lines.append(SearchLine(info['pv'][0], values.score_to_win_probability(info['score'].relative)))
    return lines

  def moves_by_depth(self, board: chess.Board, max_depth: int) -> dict[int, chess.Move]:
    """The best move after each iteration 1..max_depth of one fresh depth-limited search."""
    by_depth: dict[int, chess.Move] = {}
    limit = chess.engine.Limit(depth=max_depth, time=launch.HANG_SECONDS)
    with self._engine.analysis(board, limit, game=object()) as analysis:
      for info in analysis:
        if info.get('pv') and 'depth' in info and not info.get('lowerbound') and not info.get('upperbound'):
          by_depth[info['depth']] = info['pv'][0]
    return by_depth

  def close(self) -> None:
    launch.close_engine(self._engine)


def solution_depth(searcher: Searcher, board: chess.Board, solution: chess.Move) -> int | None:
  """The smallest depth whose best move is `solution` (or mates, when `solution` mates)."""
  mating = mates(board, solution)
  for depth, move in sorted(searcher.moves_by_depth(board, mined_puzzles.MAX_RATING_DEPTH).items()):
    if move == solution or (mating and board.is_legal(move) and mates(board, move)):
      return depth
  return None


def puzzle_at(searcher: Searcher, candidate: Candidate, settings: Settings) -> mined_puzzles.MinedPuzzle | None:
  """The puzzle starting with `candidate`'s setup move, or None."""
  board = chess.Board(candidate.fen)
  board.push(candidate.setup)
  moves = [candidate.setup]
  solver_boards: list[chess.Board] = []
  verdicts: list[str] = []
  first: list[SearchLine] = []
  pending: chess.Move | None = None  # The opponent's reply, kept if the solver's next move is unique.
  mated = False
  while True:
    lines = searcher.top(board, 2)
    found = verdict(board, lines, settings.min_best, settings.min_gap)
    if found is None:
      break
    if pending is not None:
      moves.append(pending)
    if not first:
      first = lines
      if settings.min_swing > 0:  # The setup move must have been a mistake.
        before = 1.0 - searcher.top(chess.Board(candidate.fen), 1)[0].win_prob  # The solver's view.
        if first[0].win_prob - before < settings.min_swing:
          return None
    solver_boards.append(board.copy())
    verdicts.append(found)
    moves.append(lines[0].move)
    board.push(lines[0].move)
    mated = board.is_checkmate()
    if is_over(board) or len(verdicts) >= settings.max_solver_moves:
      break
    pending = searcher.top(board, 1)[0].move
    board.push(pending)
    if is_over(board) or board.legal_moves.count() < 2:
      break
  if not verdicts:
    return None
  depths = [solution_depth(searcher, b, m) for b, m in zip(solver_boards, moves[1::2])]
  solved_at = [d for d in depths if d is not None]
  depth = max(solved_at) if len(solved_at) == len(depths) else mined_puzzles.MAX_RATING_DEPTH + 1
  ucis = tuple(m.uci() for m in moves)
  themes = mined_puzzles.themes(len(verdicts), mates=mated, only_moves=all(v == 'only' for v in verdicts))
  second = first[1].win_prob if len(first) > 1 else 0.0
  return mined_puzzles.MinedPuzzle(
    mined_puzzles.puzzle_id(candidate.fen, ucis),
    candidate.fen,
    ucis,
    mined_puzzles.rating_of_depth(depth),
    themes,
    candidate.game_url,
    depth,
    round(first[0].win_prob, 4),
    round(second, 4),
  )
