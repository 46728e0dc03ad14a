r"""Mine Lichess-style puzzles ("only move" tactics) from PGN games with Stockfish.

The demo cannot download the Lichess puzzle database, so it makes its own
puzzle set from games (the bundled ``data/sample_games.pgn`` or any Lichess
PGN) and writes it in the Lichess puzzle CSV columns, which
`searchless.puzzles.read_puzzles` and ``searchless-puzzles`` read unchanged.

Method:

* Games. Each input is read as the annotation pipeline reads it
  (`pgn.iter_raw_games`, `pgn.parse_game` with no filter); skipped games are
  counted. A game's split is the pipeline's: ``annotate.split_of(Game.key,
  test_fraction)`` with the pipeline's default ``test_fraction`` (0.1). Only
  ``test`` games are used by default (the demo trains on ``train`` games);
  ``split='train'`` or ``'all'`` choose otherwise.
* Candidates. Every move actually played is a candidate setup move: the
  puzzle's ``FEN`` is the board BEFORE it (as Lichess), ``Moves[0]`` is that
  move, and the solver faces the board after it. Boards where the game is over
  or the solver has a single legal move are skipped, and a solver board seen
  before (same position, move clocks aside) is not searched again.
* Only move. Stockfish (Threads 1, Hash 16 MiB, hash cleared with
  ``ucinewgame`` before every search, so each result depends on the board
  alone) searches the solver's board with MultiPV 2 at `limit` (default
  ``nodes=20000``). Scores become the solver's win probabilities
  (`values.score_to_win_probability`: Lichess' logistic fit of centipawns,
  mates 1.0 / 0.0). The board is a puzzle when the best move's win
  probability is >= `min_best` (0.7) and exceeds the second best's by >=
  `min_gap` (0.3); a best move that mates at once is accepted whatever the
  second best (another mate in one, say: the evaluator accepts any mate).
* Optionally (`min_swing` > 0, off by default) the setup move must be a
  mistake, as in Lichess' generator: the solver's win probability (the best
  move's, MultiPV 1) must rise by at least `min_swing` from the board before
  the setup move to the board after it. This drops "only moves" in positions
  that were already won, such as recaptures in an even trade (all the puzzles
  of the Stockfish self-play sample are of that kind: hence off by default).
* Longer lines. After a solver move that does not end the game, the
  opponent's reply is Stockfish's best move (MultiPV 1, same limit); if the
  solver's next board passes the same test, the reply and the next solver
  move are appended, up to `max_solver_moves` (2) solver moves. ``Moves`` thus
  always ends on a solver move, as in Lichess.
* Rating (a proxy; Lichess ratings come from players). For each solver move,
  the smallest depth d in 1..12 at which Stockfish (MultiPV 1, fresh hash)
  plays it (any mating move when it mates); a fresh ``go depth 12`` search
  reports the move of every iteration d, which is exactly what a fresh
  ``go depth d`` search plays (single thread, deterministic). The puzzle's
  depth is the largest over its solver moves, 13 when some move is not found
  by depth 12, and ``Rating = 600 + 150 * depth`` (750..2400; 2550 = beyond
  depth 12).
* Themes: ``mate`` and ``mateInN`` when the last solver move mates (N solver
  moves); the Lichess length theme (``oneMove``, ``short``: two solver moves,
  ``long``: three, ``veryLong``); ``onlyMove`` when every solver move passed
  the gap test (not only the mate-in-one rule); ``mined`` always.
* ``PuzzleId``: ``m`` + 8 hex digits of SHA-1 of ``FEN`` and ``Moves``.
  ``GameUrl``: the game's ``Site`` tag (else ``file:line``) + ``#N``, N the
  game's ply count after the setup move. ``RatingDeviation``, ``Popularity``,
  ``NbPlays`` are 0, ``OpeningTags`` empty.

With a node or depth limit the output is deterministic: the same inputs and
settings give a byte-identical CSV (also with several ``workers``).

>>> board = chess.Board('6k1/5ppp/8/8/8/8/5PPP/3R2K1 w - - 0 1')
>>> line = SearchLine(chess.Move.from_uci('d1d8'), 1.0)
>>> _verdict(board, [line, SearchLine(chess.Move.from_uci('g2g3'), 0.62)], 0.7, 0.3)
'only'
>>> _verdict(board, [line, SearchLine(chess.Move.from_uci('d1d7'), 0.95)], 0.7, 0.3)  # Mates: accepted.
'mate'
>>> _themes(1, mates=False, only_moves=True)
('mined', 'oneMove', 'onlyMove')
>>> _themes(2, mates=True, only_moves=True)
('mate', 'mateIn2', 'mined', 'onlyMove', 'short')
>>> rating_of_depth(1), rating_of_depth(12)
(750, 2400)

Command line::

  searchless-mine-puzzles --games data/sample_games.pgn --out runs/demo/puzzles.csv
  searchless-puzzles --puzzles runs/demo/puzzles.csv --agent stockfish:nodes=2000 --out runs/demo/puzzles-sf
"""

import argparse
import collections
import concurrent.futures
import csv
import dataclasses
import hashlib
import io
import os
import queue
import sys
import time
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import chess
import chess.engine
import chess.pgn
from tqdm import tqdm

from searchless import annotate
from searchless import cli
from searchless import engine as engine_lib
from searchless import pgn
from searchless import puzzles as puzzles_lib
from searchless import values

DEFAULT_LIMIT = 'nodes=20000'
DEFAULT_TEST_FRACTION = 0.1  # pipelines/annotate.py --test_fraction (checked by a test).
SPLITS = ('test', 'train', 'all')
MAX_RATING_DEPTH = 12
RATING_BASE, RATING_PER_DEPTH = 600, 150
HASH_MB = 16
HANG_SECONDS = 60.0  # Node and depth searches are capped at this (a hung engine fails the run).
LENGTH_THEMES = ('oneMove', 'short', 'long')  # Lichess: 1, 2, 3 solver moves; more: veryLong.


class SearchLine(NamedTuple):
  move: chess.Move
  win_prob: float  # The solver's (side to move) win probability after `move`.


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
        'PuzzleId': self.puzzle_id, 'FEN': self.fen, 'Moves': ' '.join(self.moves), 'Rating': str(self.rating),
        'RatingDeviation': '0', 'Popularity': '0', 'NbPlays': '0', 'Themes': ' '.join(self.themes),
        'GameUrl': self.game_url, 'OpeningTags': '',
    }


@dataclasses.dataclass
class MiningStats:
  """What a mining run read, scanned and found."""

  files: list[str] = dataclasses.field(default_factory=list)
  games_read: int = 0
  games_skipped: dict[str, int] = dataclasses.field(default_factory=dict)  # By `pgn.SKIP_REASONS`.
  games_selected: int = 0  # Kept games of the chosen split.
  games_other_split: int = 0
  positions: int = 0  # Solver boards searched.
  positions_terminal: int = 0  # Game over (or a single legal move) after the setup move.
  positions_duplicate: int = 0  # Solver boards already seen.
  puzzles: int = 0
  engine: str = ''
  seconds: float = 0.0


class _Position(NamedTuple):
  fen: str  # Before the setup move.
  setup: chess.Move
  game_url: str  # With the '#ply' suffix.


@dataclasses.dataclass(frozen=True)
class _SelectedGame:
  key: str
  url: str  # Site tag or file:line.
  start_fen: str
  moves: tuple[chess.Move, ...]


def rating_of_depth(depth: int) -> int:
  """The Rating column of a puzzle Stockfish first solves at `depth`."""
  return RATING_BASE + RATING_PER_DEPTH * depth


def puzzle_id(fen: str, moves: Sequence[str]) -> str:
  """A stable short id of a puzzle.

  >>> puzzle_id(chess.STARTING_FEN, ['e2e4', 'e7e5'])
  'mb7bd5c5d'
  """
  return 'm' + hashlib.sha1(f'{fen}|{" ".join(moves)}'.encode()).hexdigest()[:8]


def _themes(solver_moves: int, *, mates: bool, only_moves: bool) -> tuple[str, ...]:
  themes = {'mined'}
  if mates:
    themes |= {'mate', f'mateIn{solver_moves}'}
  themes.add(LENGTH_THEMES[solver_moves - 1] if solver_moves <= len(LENGTH_THEMES) else 'veryLong')
  if only_moves:
    themes.add('onlyMove')
  return tuple(sorted(themes))


def _mates(board: chess.Board, move: chess.Move) -> bool:
  board.push(move)
  try:
    return board.is_checkmate()
  finally:
    board.pop()


def _verdict(board: chess.Board, lines: Sequence[SearchLine], min_best: float, min_gap: float) -> str | None:
  """'only' (the best move wins and is clearly better), 'mate' (it mates at once) or None."""
  if not lines:
    return None
  best = lines[0]
  second = lines[1].win_prob if len(lines) > 1 else 0.0
  if best.win_prob >= min_best and best.win_prob - second >= min_gap:
    return 'only'
  if _mates(board, best.move):
    return 'mate'
  return None


def _is_over(board: chess.Board) -> bool:
  return board.is_game_over(claim_draw=False)


class _Searcher:
  """One Stockfish process; every search starts from a cleared hash."""

  def __init__(self, path: str, limit: engine_lib.SearchLimit):
    try:
      self._engine = chess.engine.SimpleEngine.popen_uci(path)
    except (FileNotFoundError, PermissionError) as e:
      raise engine_lib.EngineNotFound(f'cannot start engine {path!r}: {e}') from None
    options = {'Threads': 1, 'Hash': HASH_MB}
    self._engine.configure({k: v for k, v in options.items() if k in self._engine.options})
    self.name = self._engine.id.get('name', path)
    self._limit = limit.to_chess()
    if limit.kind != 'time':  # python-chess sets no deadline on node and depth searches.
      self._limit.time = HANG_SECONDS

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
    limit = chess.engine.Limit(depth=max_depth, time=HANG_SECONDS)
    with self._engine.analysis(board, limit, game=object()) as analysis:
      for info in analysis:
        if info.get('pv') and 'depth' in info and not info.get('lowerbound') and not info.get('upperbound'):
          by_depth[info['depth']] = info['pv'][0]
    return by_depth

  def close(self) -> None:
    try:
      self._engine.quit()
    except (chess.engine.EngineTerminatedError, chess.engine.EngineError, TimeoutError):
      self._engine.close()


def _solution_depth(searcher: _Searcher, board: chess.Board, solution: chess.Move) -> int | None:
  """The smallest depth whose best move is `solution` (or mates, when `solution` mates)."""
  mates = _mates(board, solution)
  for depth, move in sorted(searcher.moves_by_depth(board, MAX_RATING_DEPTH).items()):
    if move == solution or (mates and board.is_legal(move) and _mates(board, move)):
      return depth
  return None


@dataclasses.dataclass(frozen=True)
class _Settings:
  min_best: float
  min_gap: float
  max_solver_moves: int
  min_swing: float


def _puzzle_at(searcher: _Searcher, position: _Position, settings: _Settings) -> MinedPuzzle | None:
  """The puzzle starting with `position`'s setup move, or None."""
  board = chess.Board(position.fen)
  board.push(position.setup)
  moves = [position.setup]
  solver_boards: list[chess.Board] = []
  verdicts: list[str] = []
  first: list[SearchLine] = []
  pending: chess.Move | None = None  # The opponent's reply, kept if the solver's next move is unique.
  mates = False
  while True:
    lines = searcher.top(board, 2)
    verdict = _verdict(board, lines, settings.min_best, settings.min_gap)
    if verdict is None:
      break
    if pending is not None:
      moves.append(pending)
    if not first:
      first = lines
      if settings.min_swing > 0:  # The setup move must have been a mistake.
        before = 1.0 - searcher.top(chess.Board(position.fen), 1)[0].win_prob  # The solver's view.
        if first[0].win_prob - before < settings.min_swing:
          return None
    solver_boards.append(board.copy())
    verdicts.append(verdict)
    moves.append(lines[0].move)
    board.push(lines[0].move)
    mates = board.is_checkmate()
    if _is_over(board) or len(verdicts) >= settings.max_solver_moves:
      break
    pending = searcher.top(board, 1)[0].move
    board.push(pending)
    if _is_over(board) or board.legal_moves.count() < 2:
      break
  if not verdicts:
    return None
  depths = [_solution_depth(searcher, b, m) for b, m in zip(solver_boards, moves[1::2])]
  depth = MAX_RATING_DEPTH + 1 if None in depths else max(depths)
  ucis = tuple(m.uci() for m in moves)
  themes = _themes(len(verdicts), mates=mates, only_moves=all(v == 'only' for v in verdicts))
  second = first[1].win_prob if len(first) > 1 else 0.0
  return MinedPuzzle(puzzle_id(position.fen, ucis), position.fen, ucis, rating_of_depth(depth), themes,
                     position.game_url, depth, round(first[0].win_prob, 4), round(second, 4))


def _select_games(paths: Sequence[str], split: str, test_fraction: float,
                  stats: MiningStats) -> Iterator[_SelectedGame]:
  """The kept games of `split`, in file order, keyed exactly as the annotation pipeline keys them."""
  for path in paths:
    for raw in pgn.iter_raw_games(path):
      stats.games_read += 1
      parsed = pgn.parse_game(raw)
      if isinstance(parsed, pgn.Skip):
        stats.games_skipped[parsed.reason] = stats.games_skipped.get(parsed.reason, 0) + 1
        continue
      if split != 'all' and annotate.split_of(parsed.key, test_fraction) != split:
        stats.games_other_split += 1
        continue
      game = chess.pgn.read_game(io.StringIO(raw.text))
      site = game.headers.get('Site', '').strip()
      stats.games_selected += 1
      yield _SelectedGame(parsed.key, site if site not in ('', '?') else raw.location, game.board().fen(),
                          tuple(game.mainline_moves()))


def _positions(games: Sequence[_SelectedGame], stats: MiningStats) -> list[_Position]:
  """The candidate setup moves, game over and repeated solver boards left out."""
  seen: set[str] = set()
  positions = []
  for game in games:
    board = chess.Board(game.start_fen)
    for ply, move in enumerate(game.moves, start=1):
      fen = board.fen()
      board.push(move)
      key = annotate.dedup_key(board.fen(), 'position')
      if _is_over(board) or board.legal_moves.count() < 2:
        stats.positions_terminal += 1
      elif key in seen:
        stats.positions_duplicate += 1
      else:
        seen.add(key)
        positions.append(_Position(fen, move, f'{game.url}#{ply}'))
  return positions


def _check(split: str, test_fraction: float, max_puzzles: int | None, min_best: float, min_gap: float,
           max_solver_moves: int, min_swing: float, workers: int) -> None:
  if split not in SPLITS:
    raise ValueError(f'split must be one of {SPLITS}, got {split!r}')
  if not 0.0 <= test_fraction <= 1.0:
    raise ValueError(f'test_fraction must be in [0, 1], got {test_fraction}')
  if max_puzzles is not None and max_puzzles < 0:
    raise ValueError(f'max_puzzles must be >= 0, got {max_puzzles}')
  for name, value in (('min_best', min_best), ('min_gap', min_gap), ('min_swing', min_swing)):
    if not 0.0 <= value <= 1.0:
      raise ValueError(f'{name} must be in [0, 1], got {value}')
  if max_solver_moves < 1:
    raise ValueError(f'max_solver_moves must be >= 1, got {max_solver_moves}')
  if workers < 1:
    raise ValueError(f'workers must be >= 1, got {workers}')


def mine_with_stats(pgn_paths: str | Sequence[str], *, engine_path: str | None = None,
                    limit: str | engine_lib.SearchLimit = DEFAULT_LIMIT, split: str = 'test',
                    test_fraction: float = DEFAULT_TEST_FRACTION, max_puzzles: int | None = None,
                    min_best: float = 0.7, min_gap: float = 0.3, max_solver_moves: int = 2,
                    min_swing: float = 0.0, workers: int = 1,
                    progress: bool = True) -> tuple[list[MinedPuzzle], MiningStats]:
  """`mine`, also returning what was read and scanned."""
  start = time.perf_counter()
  _check(split, test_fraction, max_puzzles, min_best, min_gap, max_solver_moves, min_swing, workers)
  search_limit = limit if isinstance(limit, engine_lib.SearchLimit) else engine_lib.SearchLimit.parse(limit)
  if isinstance(pgn_paths, str):
    pgn_paths = [pgn_paths]
  if not pgn_paths:
    raise ValueError('no PGN file given')
  stats = MiningStats(files=pgn.match_files(pgn_paths, '--games'))
  path = engine_path or engine_lib.find_stockfish()
  if path is None:
    raise engine_lib.EngineNotFound(
        'no Stockfish found: install it (Debian: apt-get install stockfish), set SEARCHLESS_STOCKFISH'
        ' or pass --engine_path')
  if not os.access(path, os.X_OK):
    raise engine_lib.EngineNotFound(
        f'engine {path!r} not found or not executable: install Stockfish (Debian: apt-get install stockfish)'
        ' or pass --engine_path')
  positions = _positions(list(_select_games(stats.files, split, test_fraction, stats)), stats)
  settings = _Settings(min_best, min_gap, max_solver_moves, min_swing)
  wanted = len(positions) if max_puzzles is None else max_puzzles
  puzzles: list[MinedPuzzle] = []
  if wanted == 0 or not positions:
    stats.seconds = time.perf_counter() - start
    return puzzles, stats

  searchers: list[_Searcher] = []
  idle: queue.SimpleQueue = queue.SimpleQueue()  # Searchers not in use; every search is independent.

  def puzzle_at(position: _Position) -> MinedPuzzle | None:
    searcher = idle.get()
    try:
      return _puzzle_at(searcher, position, settings)
    finally:
      idle.put(searcher)

  executor = concurrent.futures.ThreadPoolExecutor(max_workers=workers)
  try:
    for _ in range(workers):
      searchers.append(_Searcher(path, search_limit))
      idle.put(searchers[-1])
    stats.engine = searchers[0].name
    # At most 4 positions per worker in flight, so max_puzzles stops the work soon.
    in_flight: collections.deque = collections.deque()
    todo = iter(positions)
    with tqdm(total=len(positions), desc='positions', unit='pos', disable=not progress, file=sys.stderr) as bar:
      while len(puzzles) < wanted:
        while len(in_flight) < 4 * workers and (position := next(todo, None)) is not None:
          in_flight.append(executor.submit(puzzle_at, position))
        if not in_flight:
          break
        puzzle = in_flight.popleft().result()  # In order: the output does not depend on `workers`.
        stats.positions += 1
        if puzzle is not None:
          puzzles.append(puzzle)
        bar.update()
        bar.set_postfix(puzzles=len(puzzles), refresh=False)
  finally:
    executor.shutdown(wait=True, cancel_futures=True)
    for searcher in searchers:
      searcher.close()
  stats.puzzles = len(puzzles)
  stats.seconds = time.perf_counter() - start
  return puzzles, stats


def mine(pgn_paths: str | Sequence[str], *, engine_path: str | None = None,
         limit: str | engine_lib.SearchLimit = DEFAULT_LIMIT, split: str = 'test',
         test_fraction: float = DEFAULT_TEST_FRACTION, max_puzzles: int | None = None, min_best: float = 0.7,
         min_gap: float = 0.3, max_solver_moves: int = 2, min_swing: float = 0.0, workers: int = 1,
         progress: bool = True) -> list[MinedPuzzle]:
  """Mines puzzles from the games of `pgn_paths` (files or globs); see the module docstring.

  Puzzles come in game order, then ply order; `max_puzzles` keeps the first
  ones. `workers` Stockfish processes search in parallel (same output).
  Raises FileNotFoundError (no such file, no Stockfish), ValueError (bad
  setting), `pgn.CorruptInputError` and python-chess engine errors.
  """
  puzzles, _ = mine_with_stats(
      pgn_paths, engine_path=engine_path, limit=limit, split=split, test_fraction=test_fraction,
      max_puzzles=max_puzzles, min_best=min_best, min_gap=min_gap, max_solver_moves=max_solver_moves,
      min_swing=min_swing, workers=workers, progress=progress)
  return puzzles


def write_csv(puzzles: Sequence[MinedPuzzle], path: str | os.PathLike) -> None:
  """Writes `puzzles` as a Lichess puzzle CSV (header `puzzles.LICHESS_COLUMNS`, '\n' line ends)."""
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


def _parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(prog='searchless-mine-puzzles', description=__doc__.split('\n\n')[0],
                              formatter_class=argparse.ArgumentDefaultsHelpFormatter)
  p.add_argument('--games', action='append', required=True,
                 help='PGN file or glob (.pgn, .pgn.zst, .pgn.bz2, .pgn.gz); repeat for several')
  p.add_argument('--out', required=True, help='puzzle CSV to write (Lichess columns)')
  p.add_argument('--max_puzzles', type=int, default=None, help='stop after this many puzzles')
  p.add_argument('--limit', default=DEFAULT_LIMIT, help='per search: nodes=N, depth=N or time=SECONDS')
  p.add_argument('--split', choices=SPLITS, default='test',
                 help="games of this split of the annotation pipeline (the demo trains on 'train')")
  p.add_argument('--test_fraction', type=float, default=DEFAULT_TEST_FRACTION,
                 help='the annotation pipeline\'s --test_fraction')
  p.add_argument('--min_best', type=float, default=0.7, help="the best move's least win probability")
  p.add_argument('--min_gap', type=float, default=0.3, help='its least win-probability lead over the second best')
  p.add_argument('--max_solver_moves', type=int, default=2, help='longest solution, in solver moves')
  p.add_argument('--min_swing', type=float, default=0.0,
                 help="the setup move's least gain in the solver's win probability (0: off; Lichess-like: 0.3)")
  p.add_argument('--workers', type=int, default=1, help='Stockfish processes searching in parallel')
  p.add_argument('--engine_path', default=None,
                 help='Stockfish binary (default: $SEARCHLESS_STOCKFISH, stockfish on PATH, /usr/games/stockfish)')
  p.add_argument('--no_progress', action='store_true', help='no progress bar')
  return p


def main(argv: Sequence[str] | None = None) -> None:
  args = _parser().parse_args(argv)
  try:
    puzzles, stats = mine_with_stats(
        args.games, engine_path=args.engine_path, limit=args.limit, split=args.split,
        test_fraction=args.test_fraction, max_puzzles=args.max_puzzles, min_best=args.min_best,
        min_gap=args.min_gap, max_solver_moves=args.max_solver_moves, min_swing=args.min_swing,
        workers=args.workers, progress=not args.no_progress)
    write_csv(puzzles, args.out)
  except (FileNotFoundError, ValueError, OSError, chess.engine.EngineError,
          chess.engine.EngineTerminatedError) as e:
    cli.fail(e)
  skipped = sum(stats.games_skipped.values())
  print(f'games: {stats.games_read} read, {skipped} skipped'
        + (f' {dict(sorted(stats.games_skipped.items()))}' if skipped else '')
        + f', {stats.games_selected} in split {args.split!r}, {stats.games_other_split} in the other split')
  print(f'positions: {stats.positions} scanned ({stats.positions_terminal} game over or forced,'
        f' {stats.positions_duplicate} repeated, left out); engine: {stats.engine or "-"} at {args.limit}')
  print(rating_histogram(puzzles))
  print(f'time: {stats.seconds:.1f} s')
  if not puzzles:
    print('warning: no puzzles found (more games, --split all, or lower --min_best / --min_gap)', file=sys.stderr)
  print(f'puzzles: {len(puzzles)} -> {args.out}')


if __name__ == '__main__':
  main()
