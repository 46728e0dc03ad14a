r"""Mine Lichess-style puzzles ("only move" tactics) from PGN games with Stockfish.

The demo cannot download the Lichess puzzle database, so it makes its own
puzzle set from games (the shipped ``searchless/samples/sample_games.pgn`` or any Lichess
PGN) and writes it in the Lichess puzzle CSV columns, which
`searchless.data.puzzles.read_puzzles` and ``searchless-puzzles`` read unchanged.

Method:

* Games. Each input is read as the annotation pipeline reads it
  (`pgn.iter_raw_games`, `pgn.parse_game` with no filter); skipped games are
  counted. A game's split is the pipeline's: ``splits.split_of(Game.key,
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

Module map: `mined_puzzles` (a puzzle's row, id, rating, themes; the CSV),
`mining_search` (the Stockfish searches and the puzzle test), this module
(games, candidates, workers). ``searchless-mine-puzzles``
(`searchless.commands.mine_puzzles`) is the command line::

  searchless-mine-puzzles --games searchless/samples/sample_games.pgn --out runs/demo/puzzles.csv
  searchless-puzzles --puzzles runs/demo/puzzles.csv --agent stockfish:nodes=2000 --out runs/demo/puzzles-sf
"""

import collections
import concurrent.futures
import dataclasses
import io
import os
import queue
import sys
import time
from collections.abc import Iterator, Sequence

import chess
import chess.pgn

from searchless.data import pgn
from searchless.data import splits
from searchless.data import streams
from searchless.engines import launch
from searchless.evaluation import mined_puzzles
from searchless.evaluation import mining_search
from searchless.plumbing import errors
from searchless.plumbing import progress_bars

DEFAULT_LIMIT = 'nodes=20000'
SPLITS = ('test', 'train', 'all')


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


@dataclasses.dataclass(frozen=True)
class _SelectedGame:
  key: str
  url: str  # Site tag or file:line.
  start_fen: str
  moves: tuple[chess.Move, ...]


def _select_games(
  paths: Sequence[str], split: str, test_fraction: float, stats: MiningStats
) -> Iterator[_SelectedGame]:
  """The kept games of `split`, in file order, keyed exactly as the annotation pipeline keys them."""
  for path in paths:
    for raw in pgn.iter_raw_games(path):
      stats.games_read += 1
      parsed = pgn.parse_game(raw)
      if isinstance(parsed, pgn.Skip):
        stats.games_skipped[parsed.reason] = stats.games_skipped.get(parsed.reason, 0) + 1
        continue
      if split != 'all' and splits.split_of(parsed.key, test_fraction) != split:
        stats.games_other_split += 1
        continue
      game = chess.pgn.read_game(io.StringIO(raw.text))
      assert game is not None  # parse_game has read it.
      site = game.headers.get('Site', '').strip()
      stats.games_selected += 1
      yield _SelectedGame(
        parsed.key, site if site not in ('', '?') else raw.location, game.board().fen(), tuple(game.mainline_moves())
      )


def _positions(games: Sequence[_SelectedGame], stats: MiningStats) -> list[mining_search.Candidate]:
  """The candidate setup moves, game over and repeated solver boards left out."""
  seen: set[str] = set()
  positions = []
  for game in games:
    board = chess.Board(game.start_fen)
    for ply, move in enumerate(game.moves, start=1):
      fen = board.fen()
      board.push(move)
      key = splits.dedup_key(board.fen(), 'position')
      if mining_search.is_over(board) or board.legal_moves.count() < 2:
        stats.positions_terminal += 1
      elif key in seen:
        stats.positions_duplicate += 1
      else:
        seen.add(key)
        positions.append(mining_search.Candidate(fen, move, f'{game.url}#{ply}'))
  return positions


@dataclasses.dataclass(frozen=True)
class MiningOptions:
  """How `mine` mines (see the module docstring); ValueError when a setting is out of range."""

  engine_path: str | None = None  # Stockfish (default: `launch.require_stockfish`'s search).
  limit: str | launch.SearchLimit = DEFAULT_LIMIT  # Per search.
  split: str = 'test'  # Games of this split of the annotation pipeline (`SPLITS`).
  test_fraction: float = splits.DEFAULT_TEST_FRACTION  # The pipeline's.
  max_puzzles: int | None = None  # Keep the first ones; None: all.
  min_best: float = 0.7  # The best move's least win probability.
  min_gap: float = 0.3  # Its least lead over the second best.
  max_solver_moves: int = 2  # Longest solution.
  min_swing: float = 0.0  # The setup move's least gain for the solver; 0: off.
  workers: int = 1  # Stockfish processes searching in parallel (same output).
  progress: bool = True  # A progress bar on stderr.

  def __post_init__(self) -> None:
    if self.split not in SPLITS:
      raise errors.BadInput(f'split must be one of {SPLITS}, got {self.split!r}')
    if not 0.0 <= self.test_fraction <= 1.0:
      raise errors.BadInput(f'test_fraction must be in [0, 1], got {self.test_fraction}')
    if self.max_puzzles is not None and self.max_puzzles < 0:
      raise errors.BadInput(f'max_puzzles must be >= 0, got {self.max_puzzles}')
    for name in ('min_best', 'min_gap', 'min_swing'):
      if not 0.0 <= getattr(self, name) <= 1.0:
        raise errors.BadInput(f'{name} must be in [0, 1], got {getattr(self, name)}')
    if self.max_solver_moves < 1:
      raise errors.BadInput(f'max_solver_moves must be >= 1, got {self.max_solver_moves}')
    if self.workers < 1:
      raise errors.BadInput(f'workers must be >= 1, got {self.workers}')


def mine(
  pgn_paths: str | Sequence[str], options: MiningOptions = MiningOptions()
) -> tuple[list[mined_puzzles.MinedPuzzle], MiningStats]:
  """The puzzles in the games of `pgn_paths` (files or globs; see the module docstring), and what was read and
  scanned.

  Puzzles come in game order, then ply order; `options.max_puzzles` keeps the
  first ones. `options.workers` Stockfish processes search in parallel (same
  output). Raises FileNotFoundError (no such file), `launch.EngineNotFound`
  (no Stockfish), ValueError (bad setting), `streams.CorruptInputError` and
  python-chess engine errors.
  """
  start = time.perf_counter()
  limit, workers = options.limit, options.workers
  search_limit = limit if isinstance(limit, launch.SearchLimit) else launch.SearchLimit.parse(limit)
  if isinstance(pgn_paths, str):
    pgn_paths = [pgn_paths]
  if not pgn_paths:
    raise errors.BadInput('no PGN file given')
  stats = MiningStats(files=streams.match_files(pgn_paths, '--games'))
  launch.check_executable(options.engine_path)
  path = launch.require_stockfish(options.engine_path)
  positions = _positions(list(_select_games(stats.files, options.split, options.test_fraction, stats)), stats)
  settings = mining_search.Settings(options.min_best, options.min_gap, options.max_solver_moves, options.min_swing)
  wanted = len(positions) if options.max_puzzles is None else options.max_puzzles
  puzzles: list[mined_puzzles.MinedPuzzle] = []
  if wanted == 0 or not positions:
    stats.seconds = time.perf_counter() - start
    return puzzles, stats

  searchers: list[mining_search.Searcher] = []
  idle: queue.SimpleQueue = queue.SimpleQueue()  # Searchers not in use; every search is independent.

  def puzzle_at(position: mining_search.Candidate) -> mined_puzzles.MinedPuzzle | None:
    searcher = idle.get()
    try:
      return mining_search.puzzle_at(searcher, position, settings)
    finally:
      idle.put(searcher)

  executor = concurrent.futures.ThreadPoolExecutor(max_workers=workers)
  try:
    for _ in range(workers):
      searchers.append(mining_search.Searcher(path, search_limit))
      idle.put(searchers[-1])
    stats.engine = searchers[0].name
    # At most 4 positions per worker in flight, so max_puzzles stops the work soon.
    in_flight: collections.deque = collections.deque()
    todo = iter(positions)
    with progress_bars.bar(
      total=len(positions), desc='positions', unit='pos', disable=not options.progress, file=sys.stderr
    ) as bar:
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


def run(
  *, games: Sequence[str], out: str | os.PathLike, options: MiningOptions = MiningOptions()
) -> tuple[list[mined_puzzles.MinedPuzzle], MiningStats]:
  """Mines puzzles from `games` (files or globs) with `options` and writes them to the Lichess CSV `out` (`mine`).

  Returns the puzzles and what was read and scanned; nothing is written when
  mining fails.
  """
  puzzles, stats = mine(games, options)
  mined_puzzles.write_csv(puzzles, out)
  return puzzles, stats
