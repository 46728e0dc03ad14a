"""Chess games by Stockfish self-play from random openings (the bundled sample games).

Each game starts with a few uniformly random legal moves (`random_opening`),
then one engine plays both sides. The engine is made deliberately imperfect so
the games cover varied, realistic positions: before every move it searches with
MultiPV (its ``multipv`` best moves, each with a score) and the move is *sampled*
with probability proportional to ``exp((score - best_score) / temperature_cp)``.
A move ``temperature_cp`` centipawns worse than the best is thus e (~2.7) times
less likely; ``temperature_cp=0`` always plays the best move. (Stockfish's own
``Skill Level`` is not used: its randomness is seeded from the clock, so games
could not be reproduced.)

Games are deterministic for a given ``seed`` when the limit is a node or depth
limit: the engine runs with Threads=1 and gets ``ucinewgame`` (hash cleared)
before every game, and all randomness comes from a ``random.Random`` seeded with
``"<seed>:<game index>"``, so game ``i`` is the same whatever ``num_games`` is.
A time limit makes the engine's answers, and so the games, vary run to run.

How a game ends (the ``Result`` tag, the ``Termination`` tag and a comment after
the last move say which rule applied):

* by the rules: checkmate, stalemate, insufficient material, or a draw that
  could be claimed (threefold repetition, fifty moves) or is automatic
  (fivefold, seventy-five moves), i.e. ``board.outcome(claim_draw=True)``;
  ``Termination "normal"``;
* win adjudication: the engine's evaluation of the best move favours the same
  side by at least ``win_threshold_cp`` centipawns, or is a forced mate, on
  ``win_plies`` consecutive plies (both sides agree); that side wins.
  Short mates are thus usually played out;
  ``Termination "adjudication"``;
* draw adjudication: ``max_plies`` plies (random opening included) were
  played; ``Termination "adjudication"``.

Example (prints two short games as PGN)::

    import chess.engine
    from searchless.data import selfplay
    from searchless.engines import launch

    for game in selfplay.play_games(launch.find_stockfish(), 2, seed=0,
                                    limit=chess.engine.Limit(nodes=1000),
                                    max_plies=40):
      print(game, end='\\n\\n')

`run` writes such games to a PGN file (what ``searchless-selfplay``,
``pipelines/selfplay.py``, does):

    summary = selfplay.run('searchless/samples/sample_games.pgn', num_games=50, seed=0, nodes=10_000)
"""

from collections.abc import Generator
import dataclasses
import math
import os
import random
import time
import typing

import chess
import chess.engine
import chess.pgn

from searchless.engines import launch
from searchless.plumbing import errors
from searchless.plumbing import outputs
from searchless.plumbing import progress_bars

EVENT = 'searchless self-play'
UNKNOWN_DATE = '????.??.??'  # PGN's "date unknown": keeps regenerated files byte-identical.
_MATE_CP = 100_000  # Centipawn value of "mate in 0"; mate in n scores _MATE_CP - n.


@dataclasses.dataclass(frozen=True)
class Adjudication:
  """When a game is stopped before the rules end it (see the module docstring)."""

  max_plies: int = 160  # Draw after this many plies (opening included).
  win_threshold_cp: int = 800  # |eval| at least this (or a mate score) is decisive...
  win_plies: int = 6  # ...on this many consecutive plies, for the same side.

  def __post_init__(self):
    if self.max_plies < 1 or self.win_threshold_cp < 1 or self.win_plies < 1:
      raise errors.BadInput(f'adjudication settings must be positive: {self}')


def random_opening(rng: random.Random, plies: int) -> list[chess.Move]:
  """Returns `plies` uniformly random legal moves from the starting position.

  The whole sequence is drawn again if the game ends during it (checkmate, or a
  draw by the rules), so the engine always has a position to play from.

  >>> moves = random_opening(random.Random(1), 6)
  >>> len(moves), moves == random_opening(random.Random(1), 6)
  (6, True)
  """
  if plies < 0:
    raise errors.BadInput(f'plies must be >= 0, got {plies}')
  while True:
    board = chess.Board()
    moves = []
    for _ in range(plies):
      # Sorted so the draw does not depend on move-generation order.
      move = rng.choice(sorted(board.legal_moves, key=chess.Move.uci))
      board.push(move)
      moves.append(move)
      if board.outcome(claim_draw=True) is not None:
        break
    else:
      return moves


def sample_move(
  infos: list[chess.engine.InfoDict], turn: chess.Color, rng: random.Random, temperature_cp: float
) -> chess.Move:
  """Samples a root move from MultiPV `infos` by a softmax of their scores.

  Scores are the mover's, in centipawns (mate in n counts as 100000 - n).
  ``temperature_cp <= 0`` returns the best-scored move.
  """
  candidates = []
  for info in infos:
    if info.get('pv') and 'score' in info:
      candidates.append((info['pv'][0], info['score'].pov(turn).score(mate_score=_MATE_CP)))
  if not candidates:
    raise chess.engine.EngineError('the engine returned no scored move')
  best = max(score for _, score in candidates)
  if temperature_cp <= 0:
    return next(move for move, score in candidates if score == best)
  weights = [math.exp((score - best) / temperature_cp) for _, score in candidates]
  return rng.choices([move for move, _ in candidates], weights=weights)[0]


def _limit_text(limit: chess.engine.Limit) -> str:
  fields = ('nodes', 'depth', 'time', 'mate')
  return ', '.join(f'{name}={getattr(limit, name):g}' for name in fields if getattr(limit, name) is not None)


def _player_name(engine_name: str, limit: chess.engine.Limit, multipv: int, temperature_cp: float) -> str:
  return f'{engine_name} ({_limit_text(limit)}, multipv={multipv}, temperature={temperature_cp:g}cp)'


def _play_one(
  engine: chess.engine.SimpleEngine,
  index: int,
  seed: int,
  player: str,
  date: str,
  opening_plies: tuple[int, int],
  limit: chess.engine.Limit,
  multipv: int,
  temperature_cp: float,
  adjudication: Adjudication,
) -> chess.pgn.Game:
  rng = random.Random(f'{seed}:{index}')
  opening = random_opening(rng, rng.randint(*opening_plies))
  board = chess.Board()
  opening_san = board.variation_san(opening) if opening else ''
  for move in opening:
    board.push(move)

  result: str | None = None
  termination = reason = ''  # Set with `result`.
  streak_side, streak = None, 0  # Which side the engine says is winning, for how many plies.
  while result is None:
    if (outcome := board.outcome(claim_draw=True)) is not None:
      result, termination = outcome.result(), 'normal'
      reason = outcome.termination.name.lower().replace('_', ' ')
      break
    if board.ply() >= adjudication.max_plies:
      result, termination = '1/2-1/2', 'adjudication'
      reason = f'draw adjudicated after {adjudication.max_plies} plies'
      break
    width = min(multipv, board.legal_moves.count())
    infos = engine.analyse(
      board, limit, multipv=width, game=(seed, index), info=chess.engine.INFO_SCORE | chess.engine.INFO_PV
    )
    move = sample_move(infos, board.turn, rng, temperature_cp)
    # Decisive: the best line's evaluation (White's view) is a mate or beyond the threshold.
    best = infos[0]['score'].white()
    cp = best.score(mate_score=_MATE_CP)
    side = (chess.WHITE if cp > 0 else chess.BLACK) if abs(cp) >= adjudication.win_threshold_cp else None
    streak = streak + 1 if side is not None and side == streak_side else (1 if side is not None else 0)
    streak_side = side
    if streak >= adjudication.win_plies:
      result, termination = ('1-0' if side == chess.WHITE else '0-1'), 'adjudication'
      winner = 'White' if side == chess.WHITE else 'Black'
      reason = (
        f'{winner} wins by adjudication: eval >= {adjudication.win_threshold_cp} cp or mate'
        f' for {adjudication.win_plies} plies (last: {best})'
      )
      break
    board.push(move)

  game = chess.pgn.Game.from_board(board)
  game.headers['Event'] = EVENT
  game.headers['Site'] = f'searchless:selfplay:{seed}:{index}'
  game.headers['Date'] = date
  game.headers['Round'] = str(index + 1)
  game.headers['White'] = player
  game.headers['Black'] = player
  game.headers['Result'] = result
  game.headers['Opening'] = opening_san
  game.headers['PlyCount'] = str(board.ply())
  game.headers['Termination'] = termination
  game.end().comment = reason
  return game


def play_games(
  engine_path: str,
  num_games: int,
  *,
  seed: int,
  opening_plies: tuple[int, int] = (4, 8),
  limit: chess.engine.Limit = chess.engine.Limit(nodes=5000),
  multipv: int = 4,
  temperature_cp: float = 50.0,
  max_plies: int = Adjudication.max_plies,
  win_threshold_cp: int = Adjudication.win_threshold_cp,
  win_plies: int = Adjudication.win_plies,
  hash_mb: int = 16,
  date: str = UNKNOWN_DATE,
) -> Generator[chess.pgn.Game, None, None]:
  """Yields `num_games` self-play games (see the module docstring for the rules).

  Args:
    engine_path: a UCI engine binary (Stockfish).
    num_games: how many games; game i has ``Site "searchless:selfplay:<seed>:<i>"``.
    seed: makes the games reproducible (with a node or depth `limit`).
    opening_plies: (min, max) random plies before the engine plays, drawn per game.
    limit: the engine's search limit per move (one MultiPV search).
    multipv: how many of the engine's best moves to sample from.
    temperature_cp: softmax temperature in centipawns; 0 plays the engine's best move.
    max_plies, win_threshold_cp, win_plies: adjudication (see `Adjudication`).
    hash_mb: the engine's hash table size (MiB).
    date: the ``Date`` tag (``YYYY.MM.DD``); unknown by default so files are reproducible.
  """
  low, high = opening_plies
  if not 0 <= low <= high:
    raise errors.BadInput(f'opening_plies must be (min, max) with 0 <= min <= max, got {opening_plies}')
  if multipv < 1:
    raise errors.BadInput(f'multipv must be >= 1, got {multipv}')
  adjudication = Adjudication(max_plies, win_threshold_cp, win_plies)
  engine = launch.open_engine(engine_path, hash_mb=hash_mb)
  try:
    player = _player_name(engine.id.get('name', engine_path), limit, multipv, temperature_cp)
    for index in range(num_games):
      yield _play_one(engine, index, seed, player, date, (low, high), limit, multipv, temperature_cp, adjudication)
  finally:
    launch.close_engine(engine)


@dataclasses.dataclass(frozen=True)
class SelfplaySummary:
  """What `run` wrote."""

  games: int  # Games written.
  plies: int  # Plies of all games.
  results: dict[str, int]  # Games per result ('1-0', '0-1', '1/2-1/2').
  seconds: float  # Wall-clock of the games.
  output: str  # The PGN file.

  def line(self) -> str:
    """One human line about the run."""
    results = ', '.join(f'{r}: {n}' for r, n in sorted(self.results.items()))
    return f'{self.games} games, {self.plies} plies ({results}) in {self.seconds} s -> {self.output}'


def run(
  output: str,
  *,
  num_games: int = 50,
  seed: int = 0,
  engine_path: str | None = None,
  nodes: int = 10_000,
  opening_plies: tuple[int, int] = (4, 8),
  max_plies: int = Adjudication.max_plies,
  win_threshold_cp: int = Adjudication.win_threshold_cp,
  win_plies: int = Adjudication.win_plies,
  multipv: int = 4,
  temperature_cp: float = 50.0,
  date: str = UNKNOWN_DATE,
  progress: bool = True,
) -> SelfplaySummary:
  """Writes `num_games` self-play games (`play_games`) to the PGN file `output` (overwritten).

  The defaults are the recipe of the shipped ``searchless/samples/sample_games.pgn``.
  `engine_path` defaults to the Stockfish `launch.find_stockfish` finds; `nodes`
  is the engine's node limit per move (one MultiPV search); `progress` shows a
  progress bar. Raises `launch.EngineNotFound` before `output` is touched when
  the engine binary is missing. `output` has one writer (`outputs.sole_writer`: a second is refused, and a
  filesystem error names the file and ``--out``).
  """
  path = launch.resolve(launch.require_stockfish(engine_path))
  if not os.access(path, os.X_OK):
    raise launch.EngineNotFound(
      f'engine binary {path!r} not found or not executable; install Stockfish'
      ' (Debian: apt-get install stockfish) or pass --engine_path'
    )
  games = play_games(
    path,
    num_games,
    seed=seed,
    opening_plies=opening_plies,
    limit=chess.engine.Limit(nodes=nodes),
    multipv=multipv,
    temperature_cp=temperature_cp,
    max_plies=max_plies,
    win_threshold_cp=win_threshold_cp,
    win_plies=win_plies,
    date=date,
  )
  start = time.monotonic()
  count, plies = 0, 0
  results: dict[str, int] = {}
  folder, name = os.path.dirname(output) or '.', os.path.basename(output)
  with outputs.sole_writer(folder, 'searchless-selfplay', '--out', file=name):
    try:
      with (
        outputs.open_output(output) as f,
        progress_bars.bar(total=num_games, unit='game', disable=not progress) as bar,
      ):
        exporter = chess.pgn.FileExporter(typing.cast(typing.TextIO, f))
        for game in games:
          game.accept(exporter)
          f.flush()  # Each game whole in the file as soon as it ends.
          count += 1
          plies += int(game.headers['PlyCount'])
          results[game.headers['Result']] = results.get(game.headers['Result'], 0) + 1
          bar.set_postfix(plies=plies, refresh=False)
          bar.update()
    except BaseException as error:
      games.close()  # A loop left early leaves the games suspended, their engine running: stopped here.
      if os.path.exists(output) and not os.path.getsize(output):
        os.remove(output)  # Not one game in it.
      if isinstance(error, KeyboardInterrupt) and count:
        raise KeyboardInterrupt(f'{count} of {num_games} games written to {output} (a rerun plays them all)') from None
      raise
  return SelfplaySummary(
    games=count, plies=plies, results=results, seconds=round(time.monotonic() - start, 1), output=output
  )
