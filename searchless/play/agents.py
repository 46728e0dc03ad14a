"""Agents that play chess: searchless checkpoints, Stockfish, any UCI engine.

Every agent has a `name`, `play(board) -> chess.Move` and `close()`. Agents are
named by spec strings so that tools (puzzles, EPD suites, tournaments, worker
processes) can build them:

* ``checkpoint:DIR[,policy=P][,temperature=T][,decisive=rule|stockfish|off][,dtype=D]``
  a searchless `Player` (DIR: one of our checkpoints or a published-layout one);
* ``search:DIR[,algo=mcts|alphabeta][,sims=N][,depth=D][,time=S][,...]`` the
  checkpoint played with search (`searchless.play.search.agent`);
* ``stockfish:LIMIT[,elo=N][,skill=N][,threads=N][,hash=MB][,path=BIN]``
  Stockfish at ``time=S``, ``depth=N`` or ``nodes=N``; ``elo`` plays at a
  limited strength (``UCI_LimitStrength``/``UCI_Elo``, an Elo ladder);
* ``stockfish-all-moves:LIMIT[,...]`` the paper's oracle: every legal move
  searched on its own (``searchmoves``), the best value played;
* ``uci:PATH[,LIMIT][,handshake=S][,option.NAME=VALUE ...]`` any UCI engine
  (Debian ships Ethereal, Toga II, Glaurung, Phalanx, ...), given S seconds
  (default 5) to answer ``uci``, more for one that loads a model first, such as
  ``searchless-uci``; its LIMIT may also be a game clock,
  ``clock=BASE+INC`` (seconds, e.g. ``clock=60+0.6``): the engine gets ``go wtime
  btime winc binc`` and spends its own time, and loses the game when it overruns.

Any spec may end with ``,name=NAME``.

>>> parse_spec('stockfish:time=0.05,elo=1350')
('stockfish', '', {'time': '0.05', 'elo': '1350'})
>>> parse_spec('checkpoint:/runs/demo/train,temperature=1')
('checkpoint', '/runs/demo/train', {'temperature': '1'})
"""

from collections.abc import Iterator
import contextlib
import dataclasses
import time
from typing import Literal, Protocol, overload

import chess
import chess.engine

from searchless.engines import annotator as engine_lib
from searchless.plumbing import errors

from searchless.engines import launch

KINDS = ('checkpoint', 'search', 'stockfish', 'stockfish-all-moves', 'uci')
_PATH_KINDS = ('checkpoint', 'search', 'uci')  # Kinds whose first item is a path.
_LIMIT_KEYS = ('time', 'depth', 'nodes')


class Agent(Protocol):
  name: str

  def play(self, board: chess.Board) -> chess.Move:
    """The move to play on `board` (which is left unchanged)."""

  def close(self) -> None:
    """Releases processes and devices."""


class TimeForfeit(RuntimeError):
  """An agent on a game clock overran it: it loses the game."""


@dataclasses.dataclass(frozen=True)
class Clock:
  """A game clock: `base` seconds for the game plus `increment` seconds a move.

  >>> Clock.parse('60+0.6'), str(Clock.parse('180'))
  (Clock(base=60.0, increment=0.6), 'clock=180+0')
  """

  base: float
  increment: float = 0.0

  @classmethod
  def parse(cls, text: str) -> 'Clock':
    """Parses ``BASE+INC`` or ``BASE`` (seconds)."""
    base, _, increment = text.partition('+')
    try:
      clock = cls(float(base), float(increment or 0))
      if not (clock.base > 0 and clock.increment >= 0):
        raise ValueError
    except ValueError:
      raise errors.BadInput(f'bad clock {text!r}: expected BASE+INC in seconds, e.g. 60+0.6') from None
    return clock

  def __str__(self) -> str:
    return f'clock={self.base:g}+{self.increment:g}'


class UciAgent:
  """A UCI engine process playing at a fixed limit, or on a game clock of its own."""

  def __init__(
    self,
    path: str,
    limit: launch.SearchLimit | Clock,
    *,
    options: dict | None = None,
    name: str | None = None,
    hang_seconds: float = 60.0,
    handshake_seconds: float = launch.HANDSHAKE_SECONDS,
  ):
    self._engine = launch.open_engine(path, options=options, handshake_seconds=handshake_seconds)
    self.limit = limit
    self.path = launch.resolve(path)
    self.engine_name = self._engine.id.get('name', path)
    self.name = name or f'{self.engine_name} ({limit})'
    # python-chess only times out searches with a time limit: cap depth and node
    # searches too, so a hung engine fails its game instead of blocking forever.
    self._limit = limit if isinstance(limit, Clock) else limit.to_chess(hang_seconds)
    self._game: object | None = None
    self._last_stack: list[chess.Move] = []
    self._clock_game: object | None = None
    self._clock_left = 0.0  # Seconds on this agent's clock in the game `_clock_game`.

  def _game_token(self, board: chess.Board) -> object:
    """A new token (so python-chess sends ucinewgame) when `board` is not the game continued."""
    stack = board.move_stack
    continued = (
      self._game is not None
      and len(stack) >= len(self._last_stack)
      and stack[: len(self._last_stack)] == self._last_stack
    )
    if not continued:
      self._game = object()
    self._last_stack = list(stack)
    return self._game

  def play(self, board: chess.Board) -> chess.Move:
    game = self._game_token(board)
    if not isinstance(self._limit, Clock):  # A fixed limit.
      result = self._engine.play(board, self._limit, game=game)
    else:
      if game is not self._clock_game:
        self._clock_game, self._clock_left = game, self._limit.base
      left, increment = self._clock_left, self._limit.increment
      clock = chess.engine.Limit(white_clock=left, black_clock=left, white_inc=increment, black_inc=increment)
      start = time.monotonic()
      result = self._engine.play(board, clock, game=game)
      self._clock_left -= time.monotonic() - start
      if self._clock_left < 0:
        raise TimeForfeit(f'{self.name} lost on time ({-self._clock_left:.3f} s over)')
      self._clock_left += increment
    if result.move is None:
      raise RuntimeError(f'{self.name} returned no move for {board.fen()}')
    return result.move

  def close(self) -> None:
    launch.close_engine(self._engine)


class StockfishAgent(UciAgent):
  """Stockfish at a limit; `elo` limits its strength with UCI_Elo."""

  def __init__(
    self,
    limit: launch.SearchLimit,
    *,
    elo: int | None = None,
    skill: int | None = None,
    threads: int = 1,
    hash_mb: int = 16,
    path: str | None = None,
    name: str | None = None,
  ):
    path = launch.require_stockfish(path)
    options: dict[str, object] = {'Threads': threads, 'Hash': hash_mb}
    if elo is not None:
      options.update({'UCI_LimitStrength': True, 'UCI_Elo': elo})
    if skill is not None:
      options['Skill Level'] = skill
    self.elo = elo
    suffix = (f', elo {elo}' if elo is not None else '') + (f', skill {skill}' if skill is not None else '')
    super().__init__(path, limit, options=options, name=name or f'stockfish ({limit}{suffix})')


class AllMovesStockfishAgent:
  """The paper's oracle: each legal move searched separately at the limit, the best played."""

  def __init__(self, limit: launch.SearchLimit, *, path: str | None = None, name: str | None = None):
    path = launch.require_stockfish(path)
    self._annotator = engine_lib.BoardAnnotator(engine_lib.EngineConfig(path=path, limit=limit, mode='per_move'))
    self._annotator.start()
    self.name = name or f'stockfish-all-moves ({limit})'

  def play(self, board: chess.Board) -> chess.Move:
    annotation = self._annotator.annotate(board.fen())  # Values in legal-move order.
    best, _ = max(annotation.action_values, key=lambda pair: pair[1])  # First of equals.
    return chess.Move.from_uci(best)

  def close(self) -> None:
    self._annotator.close()


def parse_spec(spec: str) -> tuple[str, str, dict[str, str]]:
  """'kind:arg,key=value,...' -> (kind, arg, {key: value}); arg is the first non key=value item."""
  kind, sep, rest = spec.partition(':')
  if not sep or kind not in KINDS:
    raise errors.BadInput(f'bad agent {spec!r}: expected one of {", ".join(k + ":..." for k in KINDS)}')
  arg, params = '', {}
  items = rest.split(',') if rest else []
  if kind in _PATH_KINDS and items:
    arg, items = items[0], items[1:]
  for item in items:
    key, eq, value = item.partition('=')
    if not eq:
      raise errors.BadInput(f'bad agent {spec!r}: {item!r} is not key=value')
    params[key.strip()] = value.strip()
  if kind in _PATH_KINDS and not arg:
    raise errors.BadInput(f'bad agent {spec!r}: {kind} needs a path')
  return kind, arg, params


@overload
def _limit(params: dict[str, str], spec: str, *, clock: Literal[False] = False) -> launch.SearchLimit: ...
@overload
def _limit(params: dict[str, str], spec: str, *, clock: Literal[True]) -> launch.SearchLimit | Clock: ...
def _limit(params: dict[str, str], spec: str, *, clock: bool = False) -> launch.SearchLimit | Clock:
  """The one limit `params` give (popped): ``time``, ``depth`` or ``nodes``, or (`clock`) ``clock=BASE+INC``."""
  keys = (*_LIMIT_KEYS, 'clock') if clock else _LIMIT_KEYS
  given = [k for k in keys if k in params]
  if len(given) != 1:
    also = ' or clock=BASE+INC' if clock else ''
    raise errors.BadInput(f'bad agent {spec!r}: give exactly one limit of time=S, depth=N, nodes=N{also}')
  try:
    if given[0] == 'clock':
      return Clock.parse(params.pop('clock'))
    return launch.SearchLimit.parse(f'{given[0]}={params.pop(given[0])}')
  except ValueError as error:
    raise errors.BadInput(f'bad agent {spec!r}: {error}') from None


@contextlib.contextmanager
def opened(spec: str) -> Iterator[Agent]:
  """The agent `spec` names, closed (engine processes and devices released) when the block ends."""
  agent = from_spec(spec)
  try:
    yield agent
  finally:
    agent.close()


def from_spec(spec: str) -> Agent:
  """Builds the agent a spec string names (see the module docstring)."""
  kind, arg, params = parse_spec(spec)
  name = params.pop('name', None)
  if kind == 'checkpoint':
    from searchless.play import player as player_lib  # Only checkpoint agents need JAX.

    option_types = {
      'temperature': float,
      'temperature_full_moves': int,
      'decisive': str,
      'decisive_threshold': float,
      'seed': int,
      'stockfish_limit': str,
    }
    policy = params.pop('policy', None)
    dtype = params.pop('dtype', 'auto')
    unknown = set(params) - set(option_types)
    if unknown:
      raise errors.BadInput(
        f'bad agent {spec!r}: unknown option(s) {sorted(unknown)}; '
        f'expected policy, dtype, name, {", ".join(option_types)}'
      )
    options = player_lib.PlayOptions(**{k: option_types[k](v) for k, v in params.items()})
    return player_lib.Player.load(arg, policy=policy, compute_dtype=dtype, options=options, name=name)
  if kind == 'search':
    from searchless.play.search import agent as search_agent  # Needs JAX.

    return search_agent.from_options(arg, params, spec=spec, name=name)
  if kind == 'uci':
    limit = _limit(params, spec, clock=True)
    engine_options: dict[str, str] = {}
    try:
      handshake = float(params.pop('handshake', launch.HANDSHAKE_SECONDS))
      if not handshake > 0:
        raise ValueError
    except ValueError:
      raise errors.BadInput(f'bad agent {spec!r}: handshake must be a positive number of seconds') from None
    for key in list(params):
      if not key.startswith('option.'):
        raise errors.BadInput(f'bad agent {spec!r}: {key!r} (engine options are option.NAME=VALUE)')
      engine_options[key[len('option.') :]] = params.pop(key)
    return UciAgent(arg, limit, options=engine_options, name=name, handshake_seconds=handshake)
  fixed = _limit(params, spec)
  path = params.pop('path', None)
  if kind == 'stockfish-all-moves':
    if params:
      raise errors.BadInput(f'bad agent {spec!r}: unknown option(s) {sorted(params)}')
    return AllMovesStockfishAgent(fixed, path=path, name=name)
  known = {'elo', 'skill', 'threads', 'hash'}
  if set(params) - known:
    raise errors.BadInput(
      f'bad agent {spec!r}: unknown option(s) {sorted(set(params) - known)}; expected {sorted(known)}'
    )
  as_int = lambda key: int(params[key]) if key in params else None
  return StockfishAgent(
    fixed,
    elo=as_int('elo'),
    skill=as_int('skill'),
    threads=as_int('threads') or 1,
    hash_mb=as_int('hash') or 16,
    path=path,
    name=name,
  )
