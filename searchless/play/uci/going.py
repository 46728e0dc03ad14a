"""The ``go`` side of `engine.UciEngine` (a base class of it): each ``go`` answered on a worker thread (`search`),
so that ``stop``, ``ponderhit``, ``isready`` and ``quit`` are read meanwhile; the move chosen by the searchless
player, or by an MCTS or alpha-beta search over its policy, with its ``info`` lines; one ``bestmove`` per ``go``."""

from collections.abc import Callable
import logging
import threading

import chess

from searchless.play import background_compile
from searchless.play import player as player_lib
from searchless.play import policy as policy_lib
from searchless.play.search import agent as search_agent
from searchless.play.uci import loader as loader_lib
from searchless.play.uci import options as options_lib
from searchless.play.uci import protocol
from searchless.play.uci import search as search_lib

_LOG = logging.getLogger('searchless.play.uci.engine')  # The engine's log: one logger for the protocol.


class Going:
  """``go``, ``stop`` and ``ponderhit``, and the search worker, over the state `engine.UciEngine` keeps."""

  _board: chess.Board | None
  _rejected: str
  _search: search_lib.Search | None
  _search_kind: str
  _searcher: search_agent.SearchAgent | None
  _player: player_lib.Player | None
  _settings: options_lib.Settings
  _debug: bool
  _clock: Callable[[], float]
  _load_lock: threading.RLock
  _loader: loader_lib.Loader
  _send: Callable[[str], None]
  _info: Callable[[str], None]
  _error: Callable[[str], None]
  _ensure_player: Callable[[], player_lib.Player]

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
      with background_compile.held():  # No background compile starts while the clock runs.
        move = self._choose(search)
    except Exception as e:  # pylint: disable=broad-except
      _LOG.exception('go failed')
      legal = policy_lib.ordered_legal_moves(search.board) if self._player is not None else []  # No model: no move.
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
    lines = search_lib.policy_info_lines(board, move, analysis, player, self._settings, nodes, seconds, self._debug)
    for line in lines:
      self._send(line)
    return move

  def _ensure_searcher(self, player: player_lib.Player) -> search_agent.SearchAgent:
    """The search agent over the player's policy, built (and its batch shapes compiled) on first use."""
    with self._load_lock:
      if self._searcher is None:
        self._searcher = self._loader.searcher(player, self._search_kind)
      return self._searcher

  def _choose_by_search(
    self, search: search_lib.Search, player: player_lib.Player, root_moves: list[chess.Move] | None
  ) -> chess.Move | None:
    """The move of an MCTS or alpha-beta search over the player's policy, within the go's limits."""
    spent = self._clock() - search.started
    result, budget = search_lib.run_search(
      self._ensure_searcher(player), search, self._search_kind, self._settings, spent=spent, root_moves=root_moves
    )
    seconds = max(self._clock() - search.started, 0.0)
    if self._debug:
      self._info(f'{self._search_kind} {budget}: {result.simulations} nodes, {result.evaluations} boards evaluated')
    settings = self._settings
    lines = search_lib.search_info_lines(result, multipv=settings.multipv, show_wdl=settings.show_wdl, seconds=seconds)
    for line in lines:
      self._send(line)
    return result.move
