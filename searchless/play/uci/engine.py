"""`UciEngine`: the UCI protocol over a searchless player, one input line at a time.

It keeps the position and the option values, loads the player on first use (``isready`` or ``go``),
answers each ``go`` on a worker thread (`search`) so that ``stop``, ``isready`` and ``quit`` are read
meanwhile, and reports every bad input as ``info string error: ...`` without changing anything. The
package docstring (`searchless.play.uci`) describes the commands and options.

>>> lines = []
>>> engine = UciEngine(lambda policy, options: None, lines.append, checkpoint_name='demo')
>>> engine.handle('uci'), lines[0], lines[-1]
(True, 'id name searchless (action_value, demo)', 'uciok')
>>> engine.handle('position startpos moves e2e4 e7e5 e1e3'), lines[-1]  # doctest: +ELLIPSIS
(True, "info string error: illegal move 'e1e3' in position rnbqkbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w ...")
>>> engine.handle('xyzzy'), lines[-1]
(True, "info string error: unknown command 'xyzzy'")
>>> engine.handle('quit')
False
"""

from collections.abc import Callable
from typing import Any
import logging
import threading
import time

import chess

from searchless.play import player as player_lib
from searchless.play import policy as policy_lib
from searchless.play.search import agent as search_agent
from searchless.play.search import alphabeta
from searchless.play.search import mcts
from searchless.play.uci import going
from searchless.play.uci import loader as loader_lib
from searchless.play.uci import options as options_lib
from searchless.play.uci import process
from searchless.play.uci import protocol
from searchless.play.uci import search as search_lib
from searchless.play.uci.protocol import UciError
from searchless.plumbing import errors

Output = Callable[[str], None]

_LOG = logging.getLogger(__name__)

SEARCHES = (protocol.NO_SEARCH, *search_agent.ALGORITHMS)  # The Search option's values.


class UciEngine(going.Going):
  """The UCI protocol over a searchless player; `handle` one input line at a time.

  `player_factory(policy, options)` loads the checkpoint as a `Player` with that policy; `output` receives
  each output line (no newline). Lines from the search worker and from `handle` never interleave. `policy`
  and `options` are the starting option values; `threads` Threads' (at most `max_threads`, default: the
  CPUs this process may use), applied by `thread_limiter` (e.g. `process.limit_cpu_threads`; None: never)
  around the first load. `warm_up=False` skips compiling the batch shapes at load; `clock` times ``go``.
  """

  def __init__(
    self,
    player_factory: loader_lib.PlayerFactory,
    output: Output,
    *,
    policy: str = policy_lib.ACTION_VALUE,
    checkpoint_name: str = '',
    options: player_lib.PlayOptions = player_lib.PlayOptions(temperature=0.0),
    threads: int = 1,
    max_threads: int | None = None,
    thread_limiter: loader_lib.ThreadLimiter | None = None,
    warm_up: bool = True,
    clock: Callable[[], float] = time.perf_counter,
    search: str = protocol.NO_SEARCH,
    search_nodes: int = mcts.MctsConfig.simulations,
    search_depth: int = alphabeta.AlphaBetaConfig.depth,
  ):
    if policy not in policy_lib.POLICIES:
      raise errors.BadInput(f'unknown policy {policy!r}; expected one of {policy_lib.POLICIES}')
    if search not in SEARCHES:
      raise errors.BadInput(f'unknown search {search!r}; expected one of {SEARCHES}')
    self._loader = loader_lib.Loader(player_factory, thread_limiter=thread_limiter, warm_up=warm_up)
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
    self._clock = clock
    self._player: player_lib.Player | None = None
    self._warm = False  # Whether the player's first batch shape is compiled (`load` leaves it to first use).
    self._load_lock = threading.RLock()
    self._board: chess.Board | None = chess.Board()  # None after a rejected position: no move is answered.
    self._rejected = ''  # Why the last position was rejected.
    self._search: search_lib.Search | None = None
    self._debug = False
    self._settings = options_lib.Settings(search_nodes=search_nodes, search_depth=search_depth)
    self._search_kind = search  # none: the searchless player; mcts or alphabeta over its policy.
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
    self._send(f'id name {self.name}')
    self._send('id author searchless')
    declared: dict[str, Any] = dict(policy=self._policy, options=self._options, threads=self._threads)
    declared.update(search=self._search_kind, searches=SEARCHES, settings=self._settings)
    for line in options_lib.declarations(**declared):
      self._send(line)
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
        self._loader.ready(player)  # Ready to search: a root of most positions runs at once.
    except Exception as e:  # pylint: disable=broad-except
      _LOG.exception('loading the model failed')
      self._error(f'could not load the model: {e}')
    self._send('readyok')

  def _cmd_register(self, args: list[str]) -> None:
    del args  # Nothing to register.

  def _cmd_ucinewgame(self, args: list[str]) -> None:
    del args
    self._finish_search()
    self._board = chess.Board(chess960=self._settings.chess960)
    if self._searcher is not None:
      self._searcher.new_game()

  def _cmd_position(self, args: list[str]) -> None:
    try:
      self._board = protocol.parse_position(args, chess960=self._settings.chess960)
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
    name, key, value = options_lib.parse_setoption(args)
    if self._settings.set(key, value):
      return
    play_options = options_lib.play_options(key, value, self._options)
    if play_options is not None:
      self._options = play_options
      if self._player is not None:
        self._player.options = play_options
      return
    setter = getattr(self, f'_set_{key}', None)
    if setter is None:
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
      self._player, self._policy, self._loaded_policy, self._warm = player, value, value, True
      self._searcher = None

  def _set_threads(self, value: str) -> None:
    self._threads, notes = options_lib.threads(value, self._max_threads, self._loader.backend_started)
    for note in notes:
      self._info(note)

  def _set_search(self, value: str) -> None:
    if value not in SEARCHES:
      raise UciError(f'Search must be one of {", ".join(SEARCHES)}, got {value!r}')
    self._finish_search()
    if value != self._search_kind:
      self._search_kind, self._searcher = value, None

  # Loading.

  def _load(self, policy: str, *, warm_up: bool = True) -> player_lib.Player:
    """A new player with `policy`, warmed up unless not `warm_up`; raises ValueError when the model does not fit."""
    start = self._clock()
    player = self._loader.player(policy, self._options, self._threads, warm_up=warm_up)
    seconds = self._clock() - start
    _LOG.info('loaded the %s model in %.2f s', policy, seconds)
    if self._debug:
      self._info(f'loaded {policy} in {seconds:.2f} s')
    return player

  def load(self) -> None:
    """Loads the model now (shapes compile on first use); raises what loading raises: a bad checkpoint stops it."""
    with self._load_lock:
      if self._player is None:
        self._player, self._loaded_policy, self._warm = self._load(self._policy, warm_up=False), self._policy, False

  def _ensure_player(self) -> player_lib.Player:
    """The player, loaded (and warmed up) on first use."""
    with self._load_lock:
      if self._player is not None and not self._warm:
        self._loader.warm(self._player)
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
      self._warm = True
      return self._player

  # Shutting down.

  def quit(self, timeout: float = 2.0) -> bool:
    """Releases any pending search and closes the player; False if a search is still running."""
    self._finish_search(timeout)
    done = not self.searching
    if done and self._player is not None:
      self._player.close()
    return done
