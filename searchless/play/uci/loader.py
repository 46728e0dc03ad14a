"""Loading the UCI engine's model: the first load under the Threads limit, then batch shapes compiled.

`Loader.player` builds a `Player` with the factory the engine was given. The
first load starts JAX's backend with the process narrowed to ``Threads`` CPUs
(XLA sizes its thread pools then, so later Threads values cannot act); each
load compiles one batch shape (the first move's) and leaves the others to a
background worker (`searchless.play.background_compile`), so the first ``bestmove`` comes
soon and a ``go`` limit holds while the rest compile. `Loader.searcher` builds
the search agent of the ``Search`` option the same way, and `Loader.ready` is what
``isready`` adds before a search: the shape most positions need.
"""

from collections.abc import Callable

import chess

from searchless.play import player as player_lib
from searchless.play.search import agent as search_agent

PlayerFactory = Callable[[str, player_lib.PlayOptions], player_lib.Player]
ThreadLimiter = Callable[[int], Callable[[], None] | None]
# 43 legal moves: a board in the move bucket most positions fit (`searchless.play.predictor.FIRST_MOVE_SLOTS`).
MIDDLEGAME = 'r3k2r/pppq1ppp/2npbn2/2b1p3/2B1P3/2NPBN2/PPPQ1PPP/R3K2R w KQkq - 0 1'


class Loader:
  """Loads players (`player`) and search agents (`searcher`), compiling their batch shapes unless `warm_up` is off."""

  def __init__(self, factory: PlayerFactory, *, thread_limiter: ThreadLimiter | None, warm_up: bool):
    self._factory = factory
    self._thread_limiter = thread_limiter  # Applied around the first load only.
    self._warm_up = warm_up
    self.backend_started = False  # After the first load Threads cannot act.

  def player(
    self, policy: str, options: player_lib.PlayOptions, threads: int, *, warm_up: bool = True
  ) -> player_lib.Player:
    """A new player with `policy`; raises ValueError when the model does not fit it. `warm_up=False`: only
    load it (`warm` later)."""
    restore = None
    if not self.backend_started and self._thread_limiter is not None:
      restore = self._thread_limiter(threads)
    try:
      self.backend_started = True
      player = self._factory(policy, options)
      if warm_up:
        self.warm(player)
    finally:
      if restore is not None:
        restore()
    return player

  def warm(self, player: player_lib.Player) -> None:
    """Compiles one batch shape of `player` now (the first move's), the others on a worker thread (unless off)."""
    if self._warm_up:
      player.policy.warm_up(background=True)
      player.analyse(chess.Board())

  def ready(self, player: player_lib.Player) -> None:
    """Compiles now the one-board shape most positions fit (up to 48 moves), unless one that holds them is
    compiled already: `warm` compiles the start position's (up to 32), and a search's root with more moves would
    compile its own on the search's clock."""
    if self._warm_up:
      player.analyse(chess.Board(MIDDLEGAME))

  def searcher(self, player: player_lib.Player, kind: str) -> search_agent.SearchAgent:
    """The `kind` search agent over the player's policy."""
    searcher = search_agent.agent_for(player.policy, kind)
    if self._warm_up:
      searcher.searcher.warm_up(background=True)
    return searcher
