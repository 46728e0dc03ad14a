"""A UCI engine over a checkpoint: the searchless player behind any chess GUI.

    searchless-uci --checkpoint DIR [--policy P] [--dtype auto|float32|bfloat16]
                   [--temperature T] [--threads N] [--seed S] [--compilation_cache DIR]

speaks UCI on stdin/stdout (one line in, lines out, flushed one by one; logs
and anything JAX or a C library prints go to stderr). ``DIR`` is anything
`checkpoint.load_model` reads: our workdir / step dir, a published-layout
model dir, or ``pretrained`` (the model shipped in the package). `UciEngine` holds the protocol, `main` wires it to the process.

Commands: ``uci``, ``isready``, ``setoption name N [value V]``, ``ucinewgame``,
``position startpos|fen FEN [moves ...]``, ``go [wtime|btime|winc|binc|
movestogo|movetime|depth|nodes|mate N] [infinite] [ponder] [searchmoves ...]``,
``stop``, ``ponderhit``, ``debug on|off``, ``register`` (ignored), ``d`` (the
board, for humans) and ``quit`` (end of input counts as ``quit``).

* The model is loaded (and every batch shape compiled, so the first move is
  fast) on the first ``isready`` or ``go``, not for ``uci``. Compiling
  takes most of that time: the compiled shapes are kept on disk for the next
  start (``--compilation_cache DIR``, default ``~/.cache/searchless/xla``;
  ``''`` turns it off) (the tiny test model on 2 CPU cores:
  readyok 7.8 s after start, 2.4 s with a warm cache; moves ~10 ms).
* ``go`` answers at once whatever its limits (a searchless policy has no
  search to extend): one ``info depth 1 seldepth 1 multipv 1 score cp C nodes
  N nps R time T pv M`` line, then ``bestmove M``. N counts the moves the model
  scored; C is the chosen move's win probability for the mover, 0.5 if it
  allows a repetition claim (``RepetitionDraws``), as centipawns
  (`values.win_probability_to_centipawns`, clipped to +-`CP_CLIP`). A
  behavioral-cloning policy predicts moves, not values: its info line has no
  score. ``go infinite`` / ``go ponder`` hold ``bestmove`` back until ``stop``
  (or ``ponderhit`` for ponder); the search runs on a worker thread, so
  ``isready``, ``stop`` and ``quit`` are read meanwhile. ``searchmoves``
  restricts the choice (illegal ones are reported; none legal: all moves). No
  legal move: ``bestmove 0000`` after an ``info string``.
* ``go`` before any ``position`` plays from the start position; the move list
  of ``position`` is kept as the board's move stack (repetition rules).
* Malformed input (unknown command, bad FEN or illegal position, illegal move,
  bad option value, bad ``go`` argument) answers ``info string error: ...``
  and changes nothing: the last good position and option values stay. As UCI
  asks, unknown leading tokens are skipped (``joho debug on`` turns debug on).

Options (``setoption``):

* ``Policy`` (combo): reloads the checkpoint with that policy; one the model
  does not fit (e.g. behavioral_cloning on a value model) is an error and the
  old policy stays. Before the first load it is only recorded (checked then).
* ``Temperature`` (string, a float >= 0, default 0 = argmax): softmax sampling
  while the game is in its first ``TemperatureFullMoves`` (spin, default 5)
  full moves; argmax afterwards (`player.PlayOptions`).
* ``Decisive`` (combo rule/stockfish/off) and ``RepetitionDraws`` (check): the
  player's decisive-win and repetition rules.
* ``Threads`` (spin, default all available CPUs or ``--threads``): CPU threads for XLA. It acts
  when the model is first loaded: the process is restricted to that many CPUs
  while JAX's backend starts and compiles, so XLA sizes its CPU thread pools to
  it, and the affinity is restored afterwards (Linux; elsewhere a no-op). Once
  the backend is up it cannot change: later values are accepted and ignored
  (an ``info string`` says so).
* ``Ponder`` (check): accepted for GUIs that manage it; pondering itself is
  ``go ponder`` above.

``debug on`` adds ``info string`` lines (load time, the top moves' scores).

>>> lines = []
>>> engine = UciEngine(lambda policy, options: None, lines.append, checkpoint_name='demo')
>>> engine.handle('uci'), lines[0], lines[-1]
(True, 'id name searchless (action_value, demo)', 'uciok')
>>> engine.handle('position startpos moves e2e4 e7e5 e1e3')
True
>>> lines[-1]
"info string error: illegal move 'e1e3' in position rnbqkbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - 0 2"
>>> engine.handle('xyzzy'), lines[-1]
(True, "info string error: unknown command 'xyzzy'")
>>> engine.handle('quit')
False
"""

import argparse
import dataclasses
import logging
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence

import chess
import jax

from searchless import checkpoint
from searchless import player as player_lib
from searchless import policy as policy_lib
from searchless import values

CP_CLIP = 3000  # |score cp| limit: a model's win probability never proves a mate.
NULL_MOVE = '0000'  # UCI's "no move".
GO_NUMBERS = ('wtime', 'btime', 'winc', 'binc', 'movestogo', 'movetime', 'depth', 'nodes', 'mate')
GO_FLAGS = ('infinite', 'ponder')
_GO_KEYWORDS = (*GO_NUMBERS, *GO_FLAGS, 'searchmoves')
_COMMANDS = ('uci', 'debug', 'isready', 'setoption', 'register', 'ucinewgame', 'position', 'go', 'stop',
             'ponderhit', 'quit', 'd')
_MAX_FULL_MOVES = 1000  # TemperatureFullMoves' spin maximum.

Output = Callable[[str], None]
PlayerFactory = Callable[[str, player_lib.PlayOptions], player_lib.Player]
ThreadLimiter = Callable[[int], Callable[[], None] | None]

_LOG = logging.getLogger(__name__)


class UciError(ValueError):
  """Malformed or inapplicable input; its message follows ``info string error:``."""


@dataclasses.dataclass
class GoRequest:
  """The arguments of one ``go``."""

  limits: dict[str, int] = dataclasses.field(default_factory=dict)  # wtime, depth, ...: recorded, not used.
  infinite: bool = False
  ponder: bool = False
  searchmoves: list[str] = dataclasses.field(default_factory=list)  # UCI strings, unchecked.


def parse_go(args: Sequence[str]) -> tuple[GoRequest, list[str]]:
  """Parses ``go``'s arguments into a request and the errors found (bad parts are skipped).

  >>> request, errors = parse_go('wtime 1000 btime x searchmoves e2e4 d2d4 infinite'.split())
  >>> request
  GoRequest(limits={'wtime': 1000}, infinite=True, ponder=False, searchmoves=['e2e4', 'd2d4'])
  >>> errors
  ["go btime expects a non-negative integer, got 'x'"]
  """
  request, errors = GoRequest(), []
  i = 0
  while i < len(args):
    token = args[i]
    i += 1
    if token in GO_FLAGS:
      setattr(request, token, True)
    elif token in GO_NUMBERS:
      if i >= len(args) or args[i] in _GO_KEYWORDS:
        errors.append(f'go {token} expects a value')
        continue
      try:
        number = int(args[i])
        if number < 0 and token not in ('wtime', 'btime', 'mate'):  # Clocks may run negative.
          raise ValueError
        request.limits[token] = number
      except ValueError:
        errors.append(f'go {token} expects a non-negative integer, got {args[i]!r}')
      i += 1
    elif token == 'searchmoves':
      while i < len(args) and args[i] not in _GO_KEYWORDS:
        request.searchmoves.append(args[i])
        i += 1
    else:
      errors.append(f'unknown go argument {token!r}')
  return request, errors


def parse_position(args: Sequence[str]) -> chess.Board:
  """The board of ``position``'s arguments, move stack included; raises UciError.

  >>> parse_position('startpos moves e2e4 e7e5'.split()).fen()
  'rnbqkbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - 0 2'
  >>> parse_position(['fen', '8/8/8/8/8/8/8/8', 'w', '-', '-', '0', '1'])
  Traceback (most recent call last):
  ...
  searchless.uci.UciError: illegal position 8/8/8/8/8/8/8/8 w - - 0 1: no white king, no black king, empty
  """
  if not args:
    raise UciError('position needs startpos or fen')
  if 'moves' in args:
    split = args.index('moves')
    setup, moves = args[:split], args[split + 1:]
  else:
    setup, moves = args, []
  if setup[0] == 'startpos':
    if len(setup) > 1:
      raise UciError(f'unexpected {" ".join(setup[1:])!r} after position startpos')
    board = chess.Board()
  elif setup[0] == 'fen':
    fen = ' '.join(setup[1:])
    try:
      board = chess.Board(fen)
    except ValueError as e:
      raise UciError(f'bad FEN {fen!r}: {e}') from None
    if not board.is_valid():
      raise UciError(f'illegal position {board.fen()}: {_status_text(board.status())}')
  else:
    raise UciError(f'position needs startpos or fen, got {setup[0]!r}')
  for text in moves:
    try:
      move = board.parse_uci(text)
      if not move:
        raise ValueError
    except ValueError:
      raise UciError(f'illegal move {text!r} in position {board.fen()}') from None
    board.push(move)
  return board


def _status_text(status: chess.Status) -> str:
  names = [flag.name.lower().replace('_', ' ') for flag in chess.Status if flag and flag in status]
  return ', '.join(names) or 'invalid'


def checkpoint_policy(path: str) -> str:
  """The policy a checkpoint was trained for (published checkpoints: action_value), without loading it."""
  experiment = checkpoint._experiment_config(checkpoint.resolve(path))  # pylint: disable=protected-access
  return experiment.policy if experiment is not None else policy_lib.ACTION_VALUE


def _available_cpus() -> int:
  return len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count() or 1


def limit_cpu_threads(threads: int) -> Callable[[], None] | None:
  """Restricts this process to `threads` CPUs until the returned restore function is called.

  Meant to be held while JAX's backend starts and compiles (XLA sizes its CPU
  thread pools from the CPUs it may use). None where infeasible: no
  `os.sched_setaffinity`, or JAX's backend already started.
  """
  if not hasattr(os, 'sched_setaffinity'):
    return None
  try:
    from jax._src import xla_bridge  # pylint: disable=import-outside-toplevel
    if xla_bridge.backends_are_initialized():
      return None
  except (ImportError, AttributeError):
    return None
  allowed = os.sched_getaffinity(0)
  if threads >= len(allowed):
    return lambda: None

  def set_all(cpus: set[int]) -> None:
    for task in os.listdir('/proc/self/task'):
      try:
        os.sched_setaffinity(int(task), cpus)
      except OSError:  # A thread that just ended.
        pass

  set_all(set(sorted(allowed)[:threads]))
  return lambda: set_all(allowed)


def _format_float(x: float) -> str:
  return f'{x:g}'


class _Search:
  """One pending ``go``: its worker thread and the event that releases ``bestmove``."""

  def __init__(self, board: chess.Board, request: GoRequest, started: float):
    self.board = board
    self.request = request
    self.started = started
    self.release = threading.Event()  # Set by stop (or ponderhit): bestmove may go out.
    self.thread: threading.Thread | None = None

  @property
  def holds(self) -> bool:
    """Whether bestmove waits for stop / ponderhit."""
    return self.request.infinite or self.request.ponder


class UciEngine:
  """The UCI protocol over a searchless player; `handle` one input line at a time.

  `player_factory(policy, options)` loads the checkpoint as a `Player` with
  that policy; `output` receives each output line (no newline). Lines from the
  search worker and from `handle` never interleave. `policy` and `options` are
  the starting option values; `threads` Threads' (at most `max_threads`,
  default: the CPUs this process may use), applied by `thread_limiter` (e.g.
  `limit_cpu_threads`; None: never) around the first load. `warm_up=False`
  skips compiling the batch shapes at load; `clock` times the ``go`` lines.
  """

  def __init__(self, player_factory: PlayerFactory, output: Output, *,
               policy: str = policy_lib.ACTION_VALUE, checkpoint_name: str = '',
               options: player_lib.PlayOptions = player_lib.PlayOptions(temperature=0.0),
               threads: int = 1, max_threads: int | None = None, thread_limiter: ThreadLimiter | None = None,
               warm_up: bool = True, clock: Callable[[], float] = time.perf_counter):
    if policy not in policy_lib.POLICIES:
      raise ValueError(f'unknown policy {policy!r}; expected one of {policy_lib.POLICIES}')
    self._factory = player_factory
    self._output = output
    self._output_lock = threading.Lock()
    self._checkpoint_name = checkpoint_name
    self._policy = policy  # Requested; loaded on first use.
    self._initial_policy = policy  # Falls back on it when a Policy set before loading does not fit.
    self._loaded_policy: str | None = None
    self._options = options
    if max_threads is None:
      max_threads = _available_cpus()
    self._max_threads = max_threads
    self._threads = min(max(threads, 1), self._max_threads)
    self._thread_limiter = thread_limiter
    self._backend_started = False  # After the first load Threads cannot act.
    self._warm_up = warm_up
    self._clock = clock
    self._player: player_lib.Player | None = None
    self._load_lock = threading.RLock()
    self._board = chess.Board()
    self._search: _Search | None = None
    self._debug = False

  # Output.

  def _send(self, line: str) -> None:
    with self._output_lock:
      self._output(line)

  def _info(self, text: str) -> None:
    self._send(f'info string {text}')

  def _error(self, text: str) -> None:
    self._info(f'error: {text}')

  @property
  def name(self) -> str:
    return f'searchless ({self._policy}, {self._checkpoint_name})'

  @property
  def board(self) -> chess.Board:
    """A copy of the current position (move stack included)."""
    return self._board.copy()

  # The input loop's entry point.

  def handle(self, line: str) -> bool:
    """Handles one input line; False after ``quit``."""
    tokens = line.split()
    known = next((i for i, token in enumerate(tokens) if token in _COMMANDS), len(tokens))
    if known:  # UCI: skip unknown tokens, parse the rest.
      self._error(f'unknown command {" ".join(tokens[:known])!r}')
    tokens = tokens[known:]
    if not tokens:
      return True
    command, args = tokens[0], tokens[1:]
    try:
      if command == 'quit':
        self.quit()
        return False
      getattr(self, f'_cmd_{command}')(args)
    except UciError as e:
      self._error(str(e))
    except Exception as e:  # pylint: disable=broad-except
      _LOG.exception('%s failed', command)
      self._error(f'{command} failed: {type(e).__name__}: {e}')
    return True

  def _cmd_uci(self, args: list[str]) -> None:
    del args
    options = self._options
    self._send(f'id name {self.name}')
    self._send('id author searchless')
    self._send(f'option name Policy type combo default {self._policy} '
               + ' '.join(f'var {p}' for p in policy_lib.POLICIES))
    self._send(f'option name Temperature type string default {_format_float(options.temperature or 0.0)}')
    full_moves = options.temperature_full_moves
    full_moves = _MAX_FULL_MOVES if full_moves is None else full_moves
    self._send(f'option name TemperatureFullMoves type spin default {full_moves} min 0 max {_MAX_FULL_MOVES}')
    self._send(f'option name Decisive type combo default {options.decisive} '
               + ' '.join(f'var {d}' for d in player_lib.DECISIVE_RULES))
    self._send(f'option name RepetitionDraws type check default {str(options.repetition_draws).lower()}')
    self._send(f'option name Threads type spin default {self._threads} min 1 max {self._max_threads}')
    self._send('option name Ponder type check default false')
    self._send('uciok')

  def _cmd_debug(self, args: list[str]) -> None:
    if args not in (['on'], ['off']):
      raise UciError(f'debug expects on or off, got {" ".join(args)!r}')
    self._debug = args[0] == 'on'

  def _cmd_isready(self, args: list[str]) -> None:
    del args
    try:
      self._ensure_player()
    except Exception as e:  # pylint: disable=broad-except
      _LOG.exception('loading the model failed')
      self._error(f'could not load the model: {e}')
    self._send('readyok')

  def _cmd_register(self, args: list[str]) -> None:
    del args  # Nothing to register.

  def _cmd_ucinewgame(self, args: list[str]) -> None:
    del args
    self._finish_search()
    self._board = chess.Board()

  def _cmd_position(self, args: list[str]) -> None:
    self._board = parse_position(args)

  def _cmd_d(self, args: list[str]) -> None:
    del args
    board = self._board
    rule = ' +---+---+---+---+---+---+---+---+'
    self._send('')
    self._send(rule)
    for rank in range(7, -1, -1):
      pieces = [board.piece_at(chess.square(f, rank)) for f in range(8)]
      self._send(' | ' + ' | '.join(p.symbol() if p else ' ' for p in pieces) + f' | {rank + 1}')
      self._send(rule)
    self._send('   a   b   c   d   e   f   g   h')
    self._send('')
    self._send(f'Fen: {board.fen()}')
    self._send(f'Checkers: {" ".join(chess.square_name(s) for s in board.checkers())}')
    self._send(f'Moves: {" ".join(m.uci() for m in board.move_stack)}')

  # Options.

  def _cmd_setoption(self, args: list[str]) -> None:
    if not args or args[0] != 'name':
      raise UciError('setoption expects: setoption name <id> [value <x>]')
    rest = args[1:]
    split = rest.index('value') if 'value' in rest else len(rest)
    name, value = ' '.join(rest[:split]), ' '.join(rest[split + 1:])
    setter = getattr(self, f'_set_{name.lower()}', None)
    if not name or setter is None:
      raise UciError(f'unknown option {name!r}')
    setter(value)

  def _set_policy(self, value: str) -> None:
    if value not in policy_lib.POLICIES:
      raise UciError(f'Policy must be one of {", ".join(policy_lib.POLICIES)}, got {value!r}')
    with self._load_lock:
      if self._player is None:  # Checked when loaded.
        self._policy = value
        return
      if value == self._loaded_policy:
        self._policy = value
        return
      try:
        player = self._load(value)
      except ValueError as e:
        raise UciError(f'cannot use Policy {value}: {e}; keeping {self._loaded_policy}') from None
      self._player.close()
      self._player, self._policy, self._loaded_policy = player, value, value

  def _set_temperature(self, value: str) -> None:
    try:
      temperature = float(value)
      if not math.isfinite(temperature) or temperature < 0:
        raise ValueError
    except ValueError:
      raise UciError(f'Temperature must be a number >= 0, got {value!r}') from None
    self._set_play_options(temperature=temperature)

  def _set_temperaturefullmoves(self, value: str) -> None:
    self._set_play_options(temperature_full_moves=self._spin('TemperatureFullMoves', value, 0, _MAX_FULL_MOVES))

  def _set_decisive(self, value: str) -> None:
    if value not in player_lib.DECISIVE_RULES:
      raise UciError(f'Decisive must be one of {", ".join(player_lib.DECISIVE_RULES)}, got {value!r}')
    self._set_play_options(decisive=value)

  def _set_repetitiondraws(self, value: str) -> None:
    self._set_play_options(repetition_draws=self._check('RepetitionDraws', value))

  def _set_threads(self, value: str) -> None:
    threads = self._spin('Threads', value, 1, self._max_threads)
    self._threads = threads
    if self._backend_started:
      self._info(f'Threads {threads} recorded, but it only acts before the model is first loaded (no-op now)')

  def _set_ponder(self, value: str) -> None:
    self._check('Ponder', value)

  @staticmethod
  def _spin(name: str, value: str, low: int, high: int) -> int:
    try:
      number = int(value)
      if not low <= number <= high:
        raise ValueError
    except ValueError:
      raise UciError(f'{name} must be an integer in [{low}, {high}], got {value!r}') from None
    return number

  @staticmethod
  def _check(name: str, value: str) -> bool:
    if value not in ('true', 'false'):
      raise UciError(f'{name} must be true or false, got {value!r}')
    return value == 'true'

  def _set_play_options(self, **changes) -> None:
    self._options = dataclasses.replace(self._options, **changes)
    if self._player is not None:
      self._player.options = self._options

  # Loading.

  def _load(self, policy: str) -> player_lib.Player:
    """A new player with `policy`, warmed up; raises ValueError when the model does not fit it."""
    restore = None
    if not self._backend_started and self._thread_limiter is not None:
      restore = self._thread_limiter(self._threads)
    start = self._clock()
    try:
      self._backend_started = True
      player = self._factory(policy, self._options)
      if self._warm_up:
        player.policy.warm_up()
        player.analyse(chess.Board())
    finally:
      if restore is not None:
        restore()
    seconds = self._clock() - start
    _LOG.info('loaded the %s model in %.2f s', policy, seconds)
    if self._debug:
      self._info(f'loaded {policy} in {seconds:.2f} s')
    return player

  def _ensure_player(self) -> player_lib.Player:
    """The player, loaded (and warmed up) on first use."""
    with self._load_lock:
      if self._player is None:
        try:
          player = self._load(self._policy)
        except ValueError as e:
          if self._policy == self._initial_policy:
            raise
          self._error(f'cannot use Policy {self._policy}: {e}; using {self._initial_policy}')
          self._policy = self._initial_policy
          player = self._load(self._policy)
        self._player, self._loaded_policy = player, self._policy
      return self._player

  # Searching.

  def _cmd_go(self, args: list[str]) -> None:
    started = self._clock()
    request, errors = parse_go(args)
    for error in errors:
      self._error(error)
    self._finish_search()
    search = _Search(self._board.copy(), request, started)
    search.thread = threading.Thread(target=self._run_search, args=(search,), name='uci-go', daemon=True)
    self._search = search
    search.thread.start()

  def _cmd_stop(self, args: list[str]) -> None:
    del args
    self._finish_search()

  def _cmd_ponderhit(self, args: list[str]) -> None:
    del args
    search = self._search
    if search is not None and search.request.ponder:
      search.request.ponder = False
      if not search.request.infinite:
        self._finish_search()

  def _finish_search(self, timeout: float | None = None) -> None:
    """Releases the pending search and waits for its bestmove."""
    search = self._search
    if search is None:
      return
    search.release.set()
    search.thread.join(timeout)
    if not search.thread.is_alive():
      self._search = None

  def wait(self, timeout: float | None = None) -> bool:
    """Waits for a pending search that needs no stop to finish; True if none is left pending."""
    search = self._search
    if search is None:
      return True
    if not search.holds:
      search.thread.join(timeout)
    return not search.thread.is_alive()

  @property
  def searching(self) -> bool:
    """Whether a ``go`` has not sent its bestmove yet."""
    return self._search is not None and self._search.thread.is_alive()

  def _run_search(self, search: _Search) -> None:
    try:
      move = self._choose(search)
    except Exception as e:  # pylint: disable=broad-except
      _LOG.exception('go failed')
      legal = policy_lib.ordered_legal_moves(search.board)
      move = legal[0] if legal else None
      self._error(f'search failed: {type(e).__name__}: {e}; playing {move.uci() if move else NULL_MOVE}')
    if search.holds:
      search.release.wait()
    self._send(f'bestmove {move.uci() if move else NULL_MOVE}')

  def _choose(self, search: _Search) -> chess.Move | None:
    board = search.board
    player = self._ensure_player()
    legal = {m.uci(): m for m in board.legal_moves}
    if not legal:
      outcome = 'checkmate' if board.is_checkmate() else 'stalemate'
      self._info(f'no legal moves ({outcome})')
      return None
    allowed = []
    for text in search.request.searchmoves:
      move = legal.get(text) or legal.get(_normalise(board, text))
      if move is None:
        self._error(f'searchmoves: {text!r} is not a legal move')
      elif move not in allowed:
        allowed.append(move)
    move, analysis = player.choose(board, root_moves=allowed if len(allowed) < len(legal) else None)
    nodes = len(legal)
    elapsed = max(self._clock() - search.started, 0.0)
    score = _score_cp(board, move, analysis, player)
    score_text = '' if score is None else f'score cp {score} '
    if self._debug:
      top = ' '.join(f'{m.uci()} {s:.4f}' for m, s in analysis.ranked()[:5])
      self._info(f'{player.policy.kind} top moves: {top}')
    self._send(f'info depth 1 seldepth 1 multipv 1 {score_text}nodes {nodes} nps {int(nodes / max(elapsed, 1e-3))} '
               f'time {int(round(elapsed * 1000))} pv {move.uci()}')
    return move

  # Shutting down.

  def quit(self, timeout: float = 2.0) -> bool:
    """Releases any pending search and closes the player; False if a search is still running."""
    self._finish_search(timeout)
    done = not self.searching
    if done and self._player is not None:
      self._player.close()
    return done


def _normalise(board: chess.Board, text: str) -> str | None:
  """`text` as python-chess writes the move (e.g. king-takes-rook castling), or None."""
  try:
    return board.parse_uci(text).uci()
  except ValueError:
    return None


def _score_cp(board: chess.Board, move: chess.Move, analysis: policy_lib.Analysis,
              player: player_lib.Player) -> int | None:
  """The chosen move's value for the mover (after the player's repetition rule) in centipawns;
  None for behavioral cloning."""
  if analysis.win_probs is None:
    return None
  win_prob = float(player.adjusted_scores(board, analysis)[analysis.moves.index(move)])
  return values.win_probability_to_centipawns(win_prob, clip=CP_CLIP)


def _parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(prog='searchless-uci', description=__doc__.split('\n\n')[0])
  p.add_argument('--checkpoint', required=True, help="Workdir, checkpoint dir, published-layout model dir, or 'pretrained' (the model shipped in the package).")
  p.add_argument('--policy', choices=policy_lib.POLICIES, help="Default: the checkpoint's (published: action_value).")
  p.add_argument('--dtype', default='auto', choices=('auto', 'float32', 'bfloat16'),
                 help='Compute dtype (auto: bfloat16 on GPU/TPU, float32 on CPU).')
  p.add_argument('--temperature', type=float, default=0.0, help='Default of the Temperature option (0: argmax).')
  p.add_argument('--threads', type=int, default=None, help='Default of the Threads option (default: all available CPUs).')
  p.add_argument('--seed', type=int, help='Sampling seed (default: fresh entropy).')
  p.add_argument('--compilation_cache', metavar='DIR', default=_default_cache(),
                 help="JAX's persistent compilation cache: later starts reuse the compiled batch shapes"
                      " ('' turns it off).")
  p.add_argument('--log_level', default='WARNING', help='Log level of the stderr log.')
  return p


def _default_cache() -> str:
  root = os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')
  return os.path.join(root, 'searchless', 'xla')


def _uci_stdout():
  """A line-buffered writer on the real stdout; fd 1 itself then points at stderr.

  So whatever else writes to stdout (JAX, absl, a C library, print) cannot
  corrupt the protocol.
  """
  try:
    sys.stdout.flush()
    fd = os.dup(sys.stdout.fileno())
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
  except (AttributeError, OSError, ValueError):  # No real file descriptors (embedded, captured).
    return sys.stdout
  sys.stdout = sys.stderr
  return os.fdopen(fd, 'w', buffering=1, encoding='utf-8', newline='\n')


def main(argv: Sequence[str] | None = None) -> None:
  args = _parser().parse_args(argv)
  logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(),
                      format='%(asctime)s %(name)s %(levelname)s: %(message)s')
  try:
    policy = args.policy or checkpoint_policy(args.checkpoint)
    options = player_lib.PlayOptions(temperature=args.temperature, seed=args.seed)
  except (FileNotFoundError, ValueError) as e:
    sys.exit(f'error: {e}')
  if args.compilation_cache:
    jax.config.update('jax_compilation_cache_dir', args.compilation_cache)
    jax.config.update('jax_persistent_cache_min_compile_time_secs', 0.0)
  out = _uci_stdout()

  def output(line: str) -> None:
    try:
      out.write(line + '\n')
      out.flush()
    except (BrokenPipeError, OSError, ValueError):  # The GUI is gone: nothing left to do.
      os._exit(0)  # pylint: disable=protected-access

  def factory(policy_name: str, play_options: player_lib.PlayOptions) -> player_lib.Player:
    return player_lib.Player.load(args.checkpoint, policy=policy_name, compute_dtype=args.dtype,
                                  options=play_options)

  engine = UciEngine(factory, output, policy=policy,
                     checkpoint_name=os.path.basename(os.path.normpath(args.checkpoint)),
                     options=options, threads=args.threads or _available_cpus(), thread_limiter=limit_cpu_threads)
  while True:
    try:
      line = sys.stdin.readline()
    except (OSError, ValueError, UnicodeDecodeError):
      line = ''
    if not line:  # End of input: the GUI closed the pipe or died.
      done = engine.quit()
      break
    if not engine.handle(line):
      done = not engine.searching
      break
  if not done:  # A search stuck in the model: don't wait for it (nor let JAX tear down under it).
    out.flush()
    os._exit(0)  # pylint: disable=protected-access


if __name__ == '__main__':
  main()
