"""`UciEngine`: the UCI protocol over a searchless player, one input line at a time.

It keeps the position and the option values, loads the player on first use
(``isready`` or ``go``), answers each ``go`` on a worker thread (`search`) so
that ``stop``, ``isready`` and ``quit`` are read meanwhile, and reports every
bad input as ``info string error: ...`` without changing anything. The
package docstring (`searchless.play.uci`) describes the commands and options.

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

from collections.abc import Callable
import dataclasses
import logging
import math
import threading
import time

import chess

from searchless.play import player as player_lib
from searchless.play import policy as policy_lib
from searchless.play.search import agent as search_agent
from searchless.play.search import alphabeta
from searchless.play.search import mcts
from searchless.play.uci import process
from searchless.play.uci import protocol
from searchless.play.uci import search as search_lib
from searchless.play.uci.protocol import UciError

Output = Callable[[str], None]
PlayerFactory = Callable[[str, player_lib.PlayOptions], player_lib.Player]
ThreadLimiter = Callable[[int], Callable[[], None] | None]

_LOG = logging.getLogger(__name__)

SEARCHES = (protocol.NO_SEARCH, *search_agent.ALGORITHMS)  # The Search option's values.


class UciEngine:
  """The UCI protocol over a searchless player; `handle` one input line at a time.

  `player_factory(policy, options)` loads the checkpoint as a `Player` with
  that policy; `output` receives each output line (no newline). Lines from the
  search worker and from `handle` never interleave. `policy` and `options` are
  the starting option values; `threads` Threads' (at most `max_threads`,
  default: the CPUs this process may use), applied by `thread_limiter` (e.g.
  `process.limit_cpu_threads`; None: never) around the first load.
  `warm_up=False` skips compiling the batch shapes at load; `clock` times the
  ``go`` lines.
  """

  def __init__(self, player_factory: PlayerFactory, output: Output, *,
               policy: str = policy_lib.ACTION_VALUE, checkpoint_name: str = '',
               options: player_lib.PlayOptions = player_lib.PlayOptions(temperature=0.0),
               threads: int = 1, max_threads: int | None = None, thread_limiter: ThreadLimiter | None = None,
               warm_up: bool = True, clock: Callable[[], float] = time.perf_counter,
               search: str = protocol.NO_SEARCH, search_nodes: int = mcts.MctsConfig.simulations,
               search_depth: int = alphabeta.AlphaBetaConfig.depth):
    if policy not in policy_lib.POLICIES:
      raise ValueError(f'unknown policy {policy!r}; expected one of {policy_lib.POLICIES}')
    if search not in SEARCHES:
      raise ValueError(f'unknown search {search!r}; expected one of {SEARCHES}')
    self._factory = player_factory
    self._output = output
    self._output_lock = threading.Lock()
    self._checkpoint_name = checkpoint_name
    self._policy = policy  # Requested; loaded on first use.
    self._initial_policy = policy  # Falls back on it when a Policy set before loading does not fit.
    self._loaded_policy: str | None = None
    self._options = options
    if max_threads is None:
      max_threads = process.available_cpus()
    self._max_threads = max_threads
    self._threads = min(max(threads, 1), self._max_threads)
    self._thread_limiter = thread_limiter
    self._backend_started = False  # After the first load Threads cannot act.
    self._warm_up = warm_up
    self._clock = clock
    self._player: player_lib.Player | None = None
    self._load_lock = threading.RLock()
    self._board: chess.Board | None = chess.Board()  # None after a rejected position: no move is answered.
    self._rejected = ''  # Why the last position was rejected.
    self._search: search_lib.Search | None = None
    self._debug = False
    self._multipv = 1  # Info lines per go.
    self._show_wdl = False  # Win/draw/loss per mille in the info lines.
    self._chess960 = False  # Positions are Chess960 (castling as king-takes-rook).
    # Accepted and recorded for GUIs and lichess-bot; Move Overhead is kept off a search's time:
    self._hash_mb, self._move_overhead_ms, self._syzygy_path = 16, 10, ''
    self._search_kind = search  # none: the searchless player; mcts or alphabeta over its policy.
    self._search_nodes = search_nodes  # MCTS simulations of a go without nodes or time.
    self._search_depth = search_depth  # Alpha-beta depth of a go without depth or time.
    self._searcher: search_agent.SearchAgent | None = None  # Built on the first searching go; keeps the tree.

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
  def board(self) -> chess.Board | None:
    """A copy of the current position (move stack included); None after a rejected ``position``."""
    return None if self._board is None else self._board.copy()

  # The input loop's entry point.

  def handle(self, line: str) -> bool:
    """Handles one input line; False after ``quit``."""
    tokens = line.split()
    known = next((i for i, token in enumerate(tokens) if token in protocol.COMMANDS), len(tokens))
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
    self._send(f'option name Temperature type string default {protocol.format_float(options.temperature or 0.0)}')
    full_moves = options.temperature_full_moves
    full_moves = protocol.MAX_FULL_MOVES if full_moves is None else full_moves
    self._send(f'option name TemperatureFullMoves type spin default {full_moves} min 0 '
               f'max {protocol.MAX_FULL_MOVES}')
    self._send(f'option name Decisive type combo default {options.decisive} '
               + ' '.join(f'var {d}' for d in player_lib.DECISIVE_RULES))
    self._send(f'option name RepetitionDraws type check default {str(options.repetition_draws).lower()}')
    self._send(f'option name Threads type spin default {self._threads} min 1 max {protocol.MAX_THREADS}')
    self._send('option name Ponder type check default false')
    self._send(f'option name MultiPV type spin default {self._multipv} min 1 max {protocol.MAX_MULTIPV}')
    self._send(f'option name UCI_ShowWDL type check default {str(self._show_wdl).lower()}')
    self._send(f'option name UCI_Chess960 type check default {str(self._chess960).lower()}')
    self._send(f'option name Hash type spin default {self._hash_mb} min 1 max {protocol.MAX_HASH_MB}')
    self._send(f'option name Move Overhead type spin default {self._move_overhead_ms} min 0 '
               f'max {protocol.MAX_MOVE_OVERHEAD_MS}')
    self._send(f'option name SyzygyPath type string default {self._syzygy_path or "<empty>"}')
    self._send(f'option name Search type combo default {self._search_kind} '
               + ' '.join(f'var {k}' for k in SEARCHES))
    self._send(f'option name SearchNodes type spin default {self._search_nodes} min 1 max {protocol.MAX_SEARCH_NODES}')
    self._send(f'option name SearchDepth type spin default {self._search_depth} min 1 max {alphabeta.MAX_DEPTH}')
    self._send('uciok')

  def _cmd_debug(self, args: list[str]) -> None:
    if args not in (['on'], ['off']):
      raise UciError(f'debug expects on or off, got {" ".join(args)!r}')
    self._debug = args[0] == 'on'

  def _cmd_isready(self, args: list[str]) -> None:
    del args
    try:
      player = self._ensure_player()
      if self._search_kind != protocol.NO_SEARCH:
        self._ensure_searcher(player)
    except Exception as e:  # pylint: disable=broad-except
      _LOG.exception('loading the model failed')
      self._error(f'could not load the model: {e}')
    self._send('readyok')

  def _cmd_register(self, args: list[str]) -> None:
    del args  # Nothing to register.

  def _cmd_ucinewgame(self, args: list[str]) -> None:
    del args
    self._finish_search()
    self._board = chess.Board(chess960=self._chess960)
    if self._searcher is not None:
      self._searcher.new_game()

  def _cmd_position(self, args: list[str]) -> None:
    try:
      self._board = protocol.parse_position(args, chess960=self._chess960)
    except UciError as e:
      # No stale board: a go now answers bestmove 0000, never a move of the previous position.
      self._board, self._rejected = None, str(e)
      raise

  def _cmd_d(self, args: list[str]) -> None:
    del args
    if self._board is None:
      raise UciError(f'no position: the last position command was rejected ({self._rejected})')
    for line in protocol.board_lines(self._board):
      self._send(line)

  # Options.

  def _cmd_setoption(self, args: list[str]) -> None:
    if not args or args[0] != 'name':
      raise UciError('setoption expects: setoption name <id> [value <x>]')
    rest = args[1:]
    split = rest.index('value') if 'value' in rest else len(rest)
    name, value = ' '.join(rest[:split]), ' '.join(rest[split + 1:])
    setter = getattr(self, f'_set_{name.lower().replace(" ", "_")}', None)
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
      self._searcher = None

  def _set_temperature(self, value: str) -> None:
    try:
      temperature = float(value)
      if not math.isfinite(temperature) or temperature < 0:
        raise ValueError
    except ValueError:
      raise UciError(f'Temperature must be a number >= 0, got {value!r}') from None
    self._set_play_options(temperature=temperature)

  def _set_temperaturefullmoves(self, value: str) -> None:
    full_moves = self._spin('TemperatureFullMoves', value, 0, protocol.MAX_FULL_MOVES)
    self._set_play_options(temperature_full_moves=full_moves)

  def _set_decisive(self, value: str) -> None:
    if value not in player_lib.DECISIVE_RULES:
      raise UciError(f'Decisive must be one of {", ".join(player_lib.DECISIVE_RULES)}, got {value!r}')
    self._set_play_options(decisive=value)

  def _set_repetitiondraws(self, value: str) -> None:
    self._set_play_options(repetition_draws=self._check('RepetitionDraws', value))

  def _set_threads(self, value: str) -> None:
    threads = self._spin('Threads', value, 1, protocol.MAX_THREADS)
    if threads > self._max_threads:  # lichess-bot and GUIs send their own default (4 for lichess-bot).
      self._info(f'Threads {threads}: this process may use {self._max_threads} CPUs; using {self._max_threads}')
      threads = self._max_threads
    self._threads = threads
    if self._backend_started:
      self._info(f'Threads {threads} recorded, but it only acts before the model is first loaded (no-op now)')

  def _set_ponder(self, value: str) -> None:
    self._check('Ponder', value)

  def _set_multipv(self, value: str) -> None:
    self._multipv = self._spin('MultiPV', value, 1, protocol.MAX_MULTIPV)

  def _set_uci_showwdl(self, value: str) -> None:
    self._show_wdl = self._check('UCI_ShowWDL', value)

  def _set_uci_chess960(self, value: str) -> None:
    self._chess960 = self._check('UCI_Chess960', value)  # For the next position.

  def _set_hash(self, value: str) -> None:
    self._hash_mb = self._spin('Hash', value, 1, protocol.MAX_HASH_MB)

  def _set_move_overhead(self, value: str) -> None:
    self._move_overhead_ms = self._spin('Move Overhead', value, 0, protocol.MAX_MOVE_OVERHEAD_MS)

  def _set_syzygypath(self, value: str) -> None:
    self._syzygy_path = '' if value == '<empty>' else value

  def _set_search(self, value: str) -> None:
    if value not in SEARCHES:
      raise UciError(f'Search must be one of {", ".join(SEARCHES)}, got {value!r}')
    self._finish_search()
    if value != self._search_kind:
      self._search_kind, self._searcher = value, None

  def _set_searchnodes(self, value: str) -> None:
    self._search_nodes = self._spin('SearchNodes', value, 1, protocol.MAX_SEARCH_NODES)

  def _set_searchdepth(self, value: str) -> None:
    self._search_depth = self._spin('SearchDepth', value, 1, alphabeta.MAX_DEPTH)

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
    request, errors = protocol.parse_go(args)
    for error in errors:
      self._error(error)
    self._finish_search()
    if self._board is None:
      self._error(f'no position to search: the last position command was rejected ({self._rejected})')
      self._send(f'bestmove {protocol.NULL_MOVE}')
      return
    search = search_lib.Search(self._board.copy(), request, started, self._run_search)
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

  def _run_search(self, search: search_lib.Search) -> None:
    try:
      move = self._choose(search)
    except Exception as e:  # pylint: disable=broad-except
      _LOG.exception('go failed')
      legal = policy_lib.ordered_legal_moves(search.board)
      move = legal[0] if legal else None
      self._error(f'search failed: {type(e).__name__}: {e}; playing {move.uci() if move else protocol.NULL_MOVE}')
    if search.holds:
      search.release.wait()
    self._send(f'bestmove {move.uci() if move else protocol.NULL_MOVE}')

  def _choose(self, search: search_lib.Search) -> chess.Move | None:
    board = search.board
    player = self._ensure_player()
    nodes = board.legal_moves.count()
    if not nodes:
      outcome = 'checkmate' if board.is_checkmate() else 'stalemate'
      self._info(f'no legal moves ({outcome})')
      return None
    allowed, errors = search_lib.allowed_moves(board, search.request.searchmoves)
    for error in errors:
      self._error(error)
    if self._search_kind != protocol.NO_SEARCH:
      return self._choose_by_search(search, player, allowed if len(allowed) < nodes else None)
    move, analysis = player.choose(board, root_moves=allowed if len(allowed) < nodes else None)
    seconds = max(self._clock() - search.started, 0.0)
    if self._debug:
      top = ' '.join(f'{m.uci()} {s:.4f}' for m, s in analysis.ranked()[:5])
      self._info(f'{player.policy.kind} top moves: {top}')
    for line in search_lib.info_lines(board, move, analysis, player, multipv=self._multipv, show_wdl=self._show_wdl,
                                      nodes=nodes, seconds=seconds):
      self._send(line)
    return move

  def _ensure_searcher(self, player: player_lib.Player) -> search_agent.SearchAgent:
    """The search agent over the player's policy, built (and its batch shapes compiled) on first use."""
    with self._load_lock:
      if self._searcher is None:
        searcher = search_agent.agent_for(player.policy, self._search_kind)
        if self._warm_up:
          searcher.searcher.warm_up()
        self._searcher = searcher
      return self._searcher

  def _choose_by_search(self, search: search_lib.Search, player: player_lib.Player,
                        root_moves: list[chess.Move] | None) -> chess.Move | None:
    """The move of an MCTS or alpha-beta search over the player's policy, within the go's limits."""
    searcher_agent = self._ensure_searcher(player)
    budget = search_lib.budget(search.board, search.request, kind=self._search_kind, nodes=self._search_nodes,
                               depth=self._search_depth, overhead_ms=self._move_overhead_ms)
    searcher = searcher_agent.searcher
    searcher.config = dataclasses.replace(searcher.config, **budget)  # type: ignore[arg-type]
    result = searcher_agent.search(search.board, stop=search.release.is_set, root_moves=root_moves)
    seconds = max(self._clock() - search.started, 0.0)
    if self._debug:
      self._info(f'{self._search_kind} {budget}: {result.simulations} nodes, {result.evaluations} boards evaluated')
    for line in search_lib.search_info_lines(result, multipv=self._multipv, show_wdl=self._show_wdl, seconds=seconds):
      self._send(line)
    return result.move

  # Shutting down.

  def quit(self, timeout: float = 2.0) -> bool:
    """Releases any pending search and closes the player; False if a search is still running."""
    self._finish_search(timeout)
    done = not self.searching
    if done and self._player is not None:
      self._player.close()
    return done
