"""Playing a tournament's games in worker processes, each reusing its agents across games.

`play_all` plays tasks in this process (one worker) or in a 'spawn'
multiprocessing pool; a `Worker` builds each entrant's agent from its spec once,
keeps an adjudicating engine, and starts an agent afresh after it crashed.
Ctrl-C is the parent's: the pool's processes, and the engines they start,
ignore SIGINT (a terminal sends it to them all), and the parent stops them.

>>> from searchless.evaluation.tournament.games import Adjudication
>>> list(play_all([], workers=4, adjudication=Adjudication(eval=False), event='test'))
[]
"""

from collections.abc import Iterator, Sequence
import contextlib
import multiprocessing
import multiprocessing.context
import multiprocessing.pool
import os
import signal
import threading

import chess.pgn

from searchless.evaluation.tournament import games
from searchless.evaluation.tournament import scheduling
from searchless.play import agents as agents_lib


class Worker:
  """Agents (built once per spec) and an adjudicating engine, reused across games."""

  def __init__(self, adjudication: games.Adjudication, event: str):
    self.adjudication, self.event = adjudication, event
    self.agents: dict[scheduling.Entrant, agents_lib.Agent] = {}
    self.evaluator = games.make_evaluator(adjudication)

  def agent(self, entrant: scheduling.Entrant) -> agents_lib.Agent:
    if entrant not in self.agents:
      agent = agents_lib.from_spec(entrant.spec)
      agent.name = entrant.name
      self.agents[entrant] = agent
    return self.agents[entrant]

  def play(self, task: scheduling.Task) -> str:
    """The PGN text of `task`'s game."""
    game = games.play_game(
      self.agent(task.white),
      self.agent(task.black),
      task.opening,
      adjudication=self.adjudication,
      evaluator=self.evaluator,
      round_number=task.round,
      event=self.event,
    )
    if game.headers['Termination'].startswith('engine crash'):  # Rebuild the loser for its next game.
      loser = task.white if game.headers['Result'] == '0-1' else task.black
      self._close(loser)
    return game.accept(chess.pgn.StringExporter())

  def _close(self, entrant: scheduling.Entrant) -> None:
    agent = self.agents.pop(entrant, None)
    if agent is not None:
      try:
        agent.close()
      except Exception:  # Already dead.
        pass

  def close(self) -> None:
    for entrant in list(self.agents):
      self._close(entrant)
    if self.evaluator is not None:
      self.evaluator.close()
      self.evaluator = None


_WORKER: Worker | None = None  # A pool process' worker.


def _init_worker(adjudication: games.Adjudication, event: str) -> None:
  global _WORKER
  # Several worker processes may load checkpoints on one accelerator: JAX must not grab 75% of it in each.
  os.environ.setdefault('XLA_PYTHON_CLIENT_PREALLOCATE', 'false')
  signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's; a worker started later ignores it too.
  _WORKER = Worker(adjudication, event)


def _close_worker() -> None:
  global _WORKER
  if _WORKER is not None:
    _WORKER.close()
    _WORKER = None


class _WorkerProcess(multiprocessing.context.SpawnProcess):
  """A pool process that closes its agents as soon as its task loop ends.

  Agents hold engine threads (python-chess runs each engine's event loop on a
  non-daemon thread) that a process joins before it exits. Closing them at exit
  (a `multiprocessing.util.Finalize`) no longer works from Python 3.13, which
  joins threads before it runs those: the pool's join then waits for ever.
  """

  def run(self) -> None:
    try:
      super().run()
    finally:
      _close_worker()


class _Pool(multiprocessing.pool.Pool):
  """A 'spawn' pool of `_WorkerProcess`es."""

  @staticmethod
  def Process(ctx, *args, **kwds):  # pylint: disable=invalid-name  # multiprocessing.pool.Pool's hook.
    del ctx
    return _WorkerProcess(*args, **kwds)


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
  """Inside the block, SIGINT is ignored (in the main thread; elsewhere nothing changes): processes started there
  keep ignoring it, Python ones too (Python installs its KeyboardInterrupt handler only where SIGINT is not
  ignored), and so do the engines they start."""
  if threading.current_thread() is not threading.main_thread():
    yield
    return
  previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
  try:
    yield
  finally:
    signal.signal(signal.SIGINT, previous)


def _play_task(item: tuple[int, scheduling.Task]) -> tuple[int, str]:
  index, task = item
  assert _WORKER is not None, 'not in a pool worker'
  return index, _WORKER.play(task)


def play_all(
  tasks: Sequence[scheduling.Task], workers: int, adjudication: games.Adjudication, event: str
) -> Iterator[tuple[int, str]]:
  """(index, PGN text) of every task, as games finish."""
  if not tasks:
    return
  if workers <= 1 or len(tasks) <= 1:
    worker = Worker(adjudication, event)
    try:
      for index, task in enumerate(tasks):
        yield index, worker.play(task)
    finally:
      worker.close()
    return
  with _sigint_ignored():  # Inherited through exec: Ctrl-C cannot hit a process while it starts.
    pool = _Pool(
      min(workers, len(tasks)),
      initializer=_init_worker,
      initargs=(adjudication, event),
      context=multiprocessing.get_context('spawn'),
    )
  try:
    yield from pool.imap_unordered(_play_task, enumerate(tasks), chunksize=1)
    pool.close()  # Workers close their agents and exit.
  except BaseException:
    pool.terminate()
    raise
  finally:
    pool.join()
