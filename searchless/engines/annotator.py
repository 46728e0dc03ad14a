"""Value every legal move of a board with a UCI engine (Stockfish).

`BoardAnnotator` owns one engine process. `annotate(fen)` returns the engine's
win probability for every legal move, the board's own value and the best
move. Faults are handled here, not by the caller: an engine that dies, hangs
past its deadline or answers without a usable score is killed, restarted and
the whole board retried (all moves again, so a board is never half-annotated);
after `max_attempts` the board raises `BoardFailed`. An unusable answer to a
node- or depth-limited search on one thread is not retried (it would be the
same): the board fails at once, its reason naming the limit to raise.

Two ways to value the moves (`mode`):

* ``per_move`` (the paper): one search per legal move, restricted to that move
  (UCI ``go ... searchmoves <move>``), each at the full limit.
* ``multipv``: one search with MultiPV = number of legal moves, which scores
  every root move in a single search at the limit (much cheaper); a move that
  search left unscored (a node or depth limit too small to reach every line)
  gets a ``searchmoves`` search of its own at the same limit.
* ``board``: one ordinary search of the board at the limit: its value and best
  move only, no move values (``action_values`` is empty), for state-value and
  behavioral-cloning data at one search per board.

Every board is searched from a fresh engine state: ``ucinewgame`` (and
``isready``) before each board clears Stockfish's hash and search histories,
so with a node or depth limit and one thread a board's labels do not depend on
which boards the same engine searched before it (any order, any number of
workers, any machine gives identical records).

Python-chess' asyncio engine API is used on a private event loop, so every
search has a deadline whatever its limit (the synchronous wrapper has none for
depth or node limits).
"""

import asyncio
import dataclasses
import os

import chess
import chess.engine

from searchless.core import values
from searchless.engines import launch
from searchless.engines import uci_commands
from searchless.plumbing import errors
from searchless.engines.launch import EngineNotFound, SearchLimit

MODES = ('per_move', 'multipv', 'board')
STATE_VALUE_SOURCES = ('search', 'best_move')


@dataclasses.dataclass(frozen=True)
class EngineConfig:
  """How to run the engine; recorded with every dataset made with it."""

  path: str  # Engine binary (on the workers).
  limit: SearchLimit  # Per move in `per_move` mode; per board in `multipv` and `board` modes.
  mode: str = 'per_move'  # One of MODES.
  threads: int = launch.DEFAULT_THREADS  # UCI Threads per engine process.
  hash_mb: int = launch.DEFAULT_HASH_MB  # UCI Hash (MiB) per engine process.
  state_value: str = 'search'  # 'search': own search of the board; 'best_move': the best move's value.
  deadline: float = 30.0  # Seconds a search may take beyond its own time limit before the engine is restarted.
  max_attempts: int = 3  # Tries per board (engine restarted between tries).
  max_failures_in_a_row: int = 10  # Boards failing one after another before the engine is called broken.

  def __post_init__(self):
    if self.mode not in MODES:
      raise errors.BadInput(f'mode must be one of {MODES}, got {self.mode!r}')
    if self.state_value not in STATE_VALUE_SOURCES:
      raise errors.BadInput(f'state_value must be one of {STATE_VALUE_SOURCES}, got {self.state_value!r}')
    for name, low in (('threads', 1), ('hash_mb', 1), ('max_attempts', 1), ('max_failures_in_a_row', 1)):
      if getattr(self, name) < low:
        raise errors.BadInput(f'--{name} must be >= {low}, got {getattr(self, name)}')
    if not self.deadline > 0:  # Also NaN.
      raise errors.BadInput(f'--deadline must be > 0 seconds, got {self.deadline}')

  def describe(self) -> dict:
    return {
      'path': self.path,
      'limit': str(self.limit),
      'mode': self.mode,
      'threads': self.threads,
      'hash_mb': self.hash_mb,
      'state_value': self.state_value,
      'deadline_s': self.deadline,
      'max_attempts': self.max_attempts,
      'max_failures_in_a_row': self.max_failures_in_a_row,
    }


@dataclasses.dataclass(frozen=True)
class BoardAnnotation:
  """The engine's view of one board; win probabilities are the mover's."""

  fen: str
  action_values: tuple[tuple[str, float], ...]  # (UCI move, win prob), legal-move order; () in `board` mode.
  state_value: float
  best_move: str | None  # None on terminal boards.


class EngineBroken(chess.engine.EngineError):
  """`max_failures_in_a_row` boards failed one after another: the engine, not the boards, is the problem."""


class BoardFailed(RuntimeError):
  """A board that failed `max_attempts` times; `reason` says how it last failed."""

  def __init__(self, fen: str, reason: str, attempts: int):
    super().__init__(f'{fen}: {reason} (after {attempts} attempts)')
    self.fen, self.reason, self.attempts = fen, reason, attempts


def terminal_annotation(board: chess.Board) -> BoardAnnotation | None:
  """Checkmate (0.0 for the mated side) and stalemate (0.5) need no engine."""
  if board.is_checkmate():
    return BoardAnnotation(board.fen(), (), 0.0, None)
  if board.is_stalemate():
    return BoardAnnotation(board.fen(), (), 0.5, None)
  return None


class BoardAnnotator:
  """One engine process that annotates boards; restarts itself on faults."""

  def __init__(self, config: EngineConfig):
    self.config = config
    self.restarts = 0  # Engine restarts after faults.
    self._failures_in_a_row = 0  # Boards that failed since the last one annotated.
    self.engine_id: dict[str, str] = {}
    self._loop = asyncio.new_event_loop()
    self._transport: asyncio.SubprocessTransport | None = None
    self._engine: chess.engine.UciProtocol | None = None
    self._limit = config.limit.to_chess()
    self._go = f'go {config.limit.uci_go()}'
    self._timeout = (config.limit.value if config.limit.kind == 'time' else 0.0) + config.deadline
    # A node or depth limit on one thread: a search's answer is the same every time it is asked.
    self._deterministic = config.limit.kind != 'time' and config.threads == 1

  @property
  def pid(self) -> int | None:
    return self._transport.get_pid() if self._transport else None

  def start(self) -> None:
    if not os.access(self.config.path, os.X_OK):
      raise EngineNotFound(
        f'engine binary {self.config.path!r} not found or not executable; install Stockfish'
        ' (Debian: apt-get install stockfish) or pass --engine_path'
      )
    # UCI_AnalyseMode as python-chess' analyse() would set it on its first search: the
    # same options for every search, the first board's included. An engine killed during its handshake is started
    # again, `max_attempts` times in all.
    for attempt in range(1, self.config.max_attempts + 1):
      try:
        self._transport, engine = self._loop.run_until_complete(
          launch.open_engine_async(
            self.config.path,
            threads=self.config.threads,
            hash_mb=self.config.hash_mb,
            options={'UCI_AnalyseMode': True},
            deadline=self.config.deadline,
          )
        )
      except launch.EngineKilled:
        if attempt == self.config.max_attempts:
          raise
        self.restarts += 1
        continue
      self._engine = engine
      self.engine_id = dict(engine.id)
      return

  def _kill(self) -> None:
    if self._transport is not None:
      try:
        self._transport.kill()
      except (ProcessLookupError, RuntimeError):  # It has exited already (after quit).
        pass
      self._transport.close()  # Always: else its pipes leak (a ResourceWarning).
    self._transport = self._engine = None
    # Let the loop process the child's exit so nothing is left behind.
    self._loop.run_until_complete(asyncio.sleep(0))

  def close(self) -> None:
    if self._engine is not None:
      try:
        self._loop.run_until_complete(asyncio.wait_for(self._engine.quit(), 5))
      except Exception:  # Whatever state it is in, make sure it is gone.
        pass
      self._kill()
    if not self._loop.is_closed():
      self._loop.close()

  def __enter__(self):
    self.start()
    return self

  def __exit__(self, *exc):
    self.close()

  def _protocol(self) -> chess.engine.UciProtocol:
    if self._engine is None:
      raise RuntimeError('the engine is not started')
    return self._engine

  async def _search(self, board, **kwargs):
    return await asyncio.wait_for(self._protocol().analyse(board, self._limit, **kwargs), self._timeout)

  async def _search_move(self, position: str, move: str) -> float:
    score = await asyncio.wait_for(
      self._protocol().communicate(lambda e: uci_commands.MoveSearch(e, position, self._go, move)), self._timeout
    )
    if score is None:
      raise uci_commands.BadAnswer('the engine gave no score')
    return values.score_to_win_probability(score)

  @staticmethod
  def _win_prob(info: dict) -> float:
    score = info.get('score')
    if score is None:
      raise uci_commands.BadAnswer('the engine gave no score')
    return values.score_to_win_probability(score.relative)

  async def _annotate(self, board: chess.Board) -> BoardAnnotation:
    moves = list(board.legal_moves)
    # A fresh engine state per board: its labels must not depend on the boards before it.
    await asyncio.wait_for(self._protocol().communicate(uci_commands.NewGame), self.config.deadline)
    if self.config.mode == 'board':
      info = await self._search(board, info=chess.engine.INFO_SCORE | chess.engine.INFO_PV)
      if not info.get('pv'):
        raise uci_commands.BadAnswer('the engine gave no best move')
      return BoardAnnotation(board.fen(), (), self._win_prob(info), info['pv'][0].uci())
    if self.config.mode == 'per_move':
      position = f'position fen {board.fen()}'
      action_values = []
      for move in moves:
        action_values.append((move.uci(), await self._search_move(position, move.uci())))
    else:
      scores = await asyncio.wait_for(
        self._protocol().communicate(lambda e: uci_commands.MultiPVSearch(e, board, self._go, len(moves))),
        self._timeout,
      )
      ucis = [m.uci() for m in moves]
      probs = {u: values.score_to_win_probability(score) for u, score in scores.items()}
      position = f'position fen {board.fen()}'
      for uci in (u for u in ucis if u not in probs):  # A limit too small for MultiPV to reach every move:
        probs[uci] = await self._search_move(position, uci)  # that move gets a search of its own.
      action_values = [(u, probs[u]) for u in ucis]
    best_value = max(v for _, v in action_values)
    if self.config.state_value == 'search':
      info = await self._search(board, info=chess.engine.INFO_SCORE | chess.engine.INFO_PV)
      state_value = self._win_prob(info)
      engine_best = info['pv'][0].uci() if info.get('pv') else None
    else:
      state_value, engine_best = best_value, None
    # The best move is the highest-valued one; among ties, the engine's own choice.
    best_move = max(action_values, key=lambda mv: (mv[1], mv[0] == engine_best))[0]
    return BoardAnnotation(board.fen(), tuple(action_values), state_value, best_move)

  def annotate(self, fen: str) -> BoardAnnotation:
    """Returns the annotation of `fen`; raises BoardFailed after max_attempts."""
    board = chess.Board(fen)
    if not board.is_valid():  # Engines may crash on impossible boards.
      raise BoardFailed(fen, f'invalid position ({board.status()!r})', 0)
    if (terminal := terminal_annotation(board)) is not None:
      return terminal
    try:
      annotation = self._annotate_with_retries(fen, board)
    except BoardFailed as failed:
      self._failures_in_a_row += 1
      if self._failures_in_a_row >= self.config.max_failures_in_a_row:
        raise EngineBroken(
          f'engine {self.config.path!r}: {self._failures_in_a_row} boards in a row failed after '
          f'{failed.attempts} attempts each (the last: {failed.reason}); stopping'
        ) from None
      raise
    self._failures_in_a_row = 0
    return annotation

  def _annotate_with_retries(self, fen: str, board: chess.Board) -> BoardAnnotation:
    reason = ''
    for attempt in range(1, self.config.max_attempts + 1):
      try:
        if self._engine is None:
          self.start()
        return self._loop.run_until_complete(self._annotate(board))
      except (EngineNotFound, launch.EngineUnresponsive):
        raise  # Not a board's fault: retrying would not help.
      except asyncio.TimeoutError:
        reason = f'no answer within the deadline ({self._timeout:g} s)'
      except chess.engine.EngineTerminatedError as e:
        reason = f'engine terminated: {e}'
      except uci_commands.BadAnswer as e:
        reason = f'bad engine answer: {e}'
        if self._deterministic:  # The same search again would give the same answer: no retry, no restart.
          raise BoardFailed(
            fen,
            f'{reason} (a {self.config.limit.kind}-limited search gives the same answer every '
            f'time: raise --limit {self.config.limit})',
            attempt,
          ) from None
      except chess.engine.EngineError as e:
        reason = f'bad engine answer: {e}'
      except (OSError, ValueError, RuntimeError) as e:
        reason = f'{type(e).__name__}: {e}'
      self._kill()
      self.restarts += 1
    raise BoardFailed(fen, reason, self.config.max_attempts)
