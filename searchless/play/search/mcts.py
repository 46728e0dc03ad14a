"""PUCT Monte-Carlo tree search over a learned model, as AlphaZero, with batched leaf evaluation.

Each simulation walks from the root choosing, at every node, the move that
maximises ``Q(a) + c * P(a) * sqrt(N) / (1 + N(a))`` (AlphaZero's PUCT, with
``c = c_init + log((1 + N + c_base) / c_base)``), until it reaches a board not
yet in the tree. That board is evaluated by the model (`evaluator`): its move
priors P and its value, which is backed up along the path (negated each ply).
A finished game (mate, draw, a repeated position) is valued exactly instead.

* Values are in [-1, 1] from the side to move. An edge never visited reads as
  the model's own value of that move when the model has one (action-value and
  state-value checkpoints: the searchless policy's view), else as its parent's
  value (behavioral cloning).
* Batched evaluation: `batch_size` leaves are gathered per model call; each
  path is given a virtual loss while it waits, so the next ones spread out.
  A leaf chosen twice ends the batch early.
* Budget: `simulations` (leaf evaluations and terminal visits) per move, a time
  limit in `seconds`, a `depth` (the search ends after the batch in which a
  simulation reaches that many plies: depth 1 evaluates at most one batch of the
  root's moves), or a `stop()` callback (checked before each batch), whichever
  comes first. The clock is read before each batch, and a batch
  gathers only as many leaves as the time left evaluates
  (`Evaluator.boards_within`): with no time for one, the search plays what it
  holds, at worst the model's own best move (as ``simulations=0`` does). A
  batch whose call needs a shape not compiled yet compiles it when the time
  left exceeds the compile's measured cost, else ends the search the same way
  (`background_compile.compiled_only`); the root's own compile is not counted.
* Proven mates (an MCTS-solver): a board is proven won when one of its moves
  leads to a proven loss (a checkmate first), and proven lost when every move
  leads to a proven win. A proven edge reads as `result.MATE` minus a step per ply
  (as alpha-beta's), so selection follows a proven mate, avoids a proven loss, the
  root plays the fastest mate, and `SearchResult.mate_in` (UCI ``score mate N``) says it.
* Tree reuse: `Mcts.search` keeps its tree; the next board that continues the
  same game (the old root's moves plus the ones played since) starts from the
  matching subtree and its statistics.
* Self-play: Dirichlet noise at the root (`dirichlet_fraction`) and sampling
  proportional to visits^(1/T) (`SearchResult.sample`).

>>> from searchless.play import player
>>> from searchless.play.search import evaluator
>>> mcts = Mcts(evaluator.Evaluator(player.load_policy('pretrained-transformer', compute_dtype='float32')),
...             MctsConfig(simulations=32))
>>> result = mcts.search(chess.Board('6k1/5ppp/8/8/8/8/5PPP/3R2K1 w - - 0 1'))
>>> result.move.uci(), int(result.visits.sum()) >= 32, result.win_probability > 0.9
('d1d8', True, True)
"""

import dataclasses
import math
from typing import Any
import time
from collections.abc import Callable, Sequence

import chess
import numpy as np

from searchless.play import background_compile
from searchless.play.search import evaluator as evaluator_lib
from searchless.plumbing import errors
from searchless.play.search.result import MATE, MATE_STEP, SearchResult


@dataclasses.dataclass(frozen=True)
class MctsConfig:
  """The search's budget and constants."""

  simulations: int = 256  # New simulations per move (leaf evaluations + terminal visits); 0: the model's move.
  seconds: float | None = None  # Time limit per move (None: none); the search stops at the first limit.
  depth: int | None = None  # Plies: the search stops after the batch whose deepest simulation reaches them.
  c_init: float = 1.25  # AlphaZero's exploration constant at few visits.
  c_base: float = 19652.0  # ... growing as log((1 + N + c_base) / c_base) with the parent's visits N.
  batch_size: int = 16  # Leaves per model call (virtual loss spreads them); 1: plain sequential MCTS.
  reuse_tree: bool = True  # Keep the subtree of the moves played between two searches of one game.
  dirichlet_alpha: float = 0.3  # Root noise concentration (AlphaZero chess: 0.3).
  dirichlet_fraction: float = 0.0  # Root priors mixed with that much noise: 0 in play, 0.25 in self-play.
  seed: int | None = None  # Root-noise seed.

  def __post_init__(self):
    if self.simulations < 0:
      raise errors.BadInput(f'simulations must be >= 0, got {self.simulations}')
    if self.seconds is not None and self.seconds <= 0:
      raise errors.BadInput(f'seconds must be > 0, got {self.seconds}')
    if self.depth is not None and self.depth < 1:
      raise errors.BadInput(f'depth must be >= 1, got {self.depth}')
    if self.batch_size < 1:
      raise errors.BadInput(f'batch_size must be >= 1, got {self.batch_size}')
    if not 0 <= self.dirichlet_fraction <= 1:
      raise errors.BadInput(f'dirichlet_fraction must be in [0, 1], got {self.dirichlet_fraction}')


def _mark_mates(node: 'Node', board: chess.Board) -> 'Node':
  """Gives `node`'s mating moves (of `board`) their exact value: a model can be blind to a mate in one."""
  node.mates_marked = True
  for i in evaluator_lib.mating_moves(board, node.moves):
    node.children[i] = Node(None, terminal=-1.0)
    node.first_q[i] = 1.0
  return node


class Node:
  """A board in the tree: its moves' priors and statistics (values from its side to move)."""

  __slots__ = (
    'moves',
    'priors',
    'base_priors',
    'first_q',
    'visits',
    'value_sum',
    'children',
    'value',
    'terminal',
    'excluded',
    'mates_marked',
    'proven',
  )

  def __init__(self, evaluation: evaluator_lib.Evaluation | None, *, terminal: float | None = None):
    self.terminal = terminal  # The exact value of a finished game (its moves are empty), else None.
    # A proven mate for the side to move: MATE - plies * MATE_STEP (it mates), its negative (it is mated;
    # -MATE: checkmated now), else None.
    self.proven: float | None = -MATE if terminal == -1.0 else None
    if evaluation is None:
      self.moves: tuple[chess.Move, ...] = ()
      self.value = float(terminal if terminal is not None else 0.0)
      self.priors = self.base_priors = self.first_q = np.zeros(0)
    else:
      self.moves = evaluation.moves
      self.value = evaluation.value  # The model's value of this board.
      self.priors = self.base_priors = evaluation.priors  # [M]
      # What an unvisited move is worth: the model's value of it, or this board's own value.
      self.first_q = (
        np.array(evaluation.move_values)
        if evaluation.move_values is not None
        else np.full(len(self.moves), evaluation.value)
      )  # [M]
    self.visits = np.zeros(len(self.moves))  # [M] (virtual visits included while a batch waits).
    self.value_sum = np.zeros(len(self.moves))  # [M] sum of backed-up values, this node's side to move.
    self.children: list[Any] = [None] * len(self.moves)  # Node, None (unexpanded) or _PENDING (in a batch).
    self.excluded: np.ndarray | None = None  # [M] bool: moves a root search may not choose (searchmoves).
    self.mates_marked = False  # Whether `_mark_mates` ran (when a simulation first walks through it).

  def proven_edges(self) -> np.ndarray:
    """[M] each move's proven value for the side to move (beyond +-1: a mate one ply further), NaN where unproven."""
    out = np.full(len(self.moves), np.nan)
    for i, child in enumerate(self.children):
      if isinstance(child, Node) and child.proven is not None:
        out[i] = -child.proven - math.copysign(MATE_STEP, -child.proven)
    return out

  def prove(self) -> bool:
    """Sets `proven` from the children's (a winning move, or every move losing); returns whether it changed."""
    edges = self.proven_edges()
    if np.any(edges > 1):
      proven = float(np.nanmax(edges))  # The fastest mate.
    elif len(edges) and not np.isnan(edges).any():
      proven = float(edges.max())  # Every move is mated: the longest defence.
    else:
      proven = None
    changed, self.proven = proven != self.proven, proven
    return changed

  def q(self) -> np.ndarray:
    """[M] the mean value of each move (the first-visit value where unvisited; a proven mate's value where proven)."""
    mean = np.where(self.visits > 0, self.value_sum / np.maximum(self.visits, 1), self.first_q)
    edges = self.proven_edges()
    return np.where(np.isnan(edges), mean, edges)

  def select(self, c_init: float, c_base: float) -> int:
    total = self.visits.sum()
    c = c_init + math.log((1 + total + c_base) / c_base)
    scores = self.q() + c * self.priors * math.sqrt(max(total, 1.0)) / (1 + self.visits)
    if self.excluded is not None:
      scores[self.excluded] = -np.inf
    return int(np.argmax(scores))


_PENDING = object()  # A leaf waiting for its evaluation in the current batch.


def _best_index(node: Node) -> int:
  """A proven mate (the fastest), else most visits, then the highest value, then the highest prior (among the
  moves not excluded); a proven loss is played only when every move is one (then the longest)."""
  q = node.q()
  proven = ~np.isnan(node.proven_edges())
  wins, losses = proven & (q > 1), proven & (q < -1)
  allowed = np.ones(len(q), bool) if node.excluded is None else ~node.excluded
  if (wins & allowed).any():
    return int(np.flatnonzero(wins & allowed)[np.argmax(q[wins & allowed])])
  order = np.lexsort((-node.base_priors, -q, -node.visits, (losses & allowed)))
  return int(order[allowed[order]][0])


class Mcts:
  """PUCT search over an `Evaluator`; keeps its tree between the moves of one game."""

  def __init__(
    self,
    evaluator: evaluator_lib.Evaluator,
    config: MctsConfig = MctsConfig(),
    clock: Callable[[], float] = time.perf_counter,
  ):
    self.evaluator = evaluator
    self.config = config
    self._clock = clock
    self._rng = np.random.default_rng(config.seed)
    self._root: Node | None = None
    self._root_board: chess.Board | None = None  # With its move stack.

  def warm_up(self, *, background: bool = False) -> None:
    """Compiles the model calls this search makes (before the first move; `background`: one now, the rest later)."""
    self.evaluator.warm_up(self.config.batch_size, background=background)

  def reset(self) -> None:
    """Forgets the tree (a new game)."""
    self._root, self._root_board = None, None

  @property
  def root(self) -> Node | None:
    return self._root

  def _reused_root(self, board: chess.Board) -> Node | None:
    """The subtree for `board` if it continues the last searched board's game, else None."""
    old, node = self._root_board, self._root
    if not self.config.reuse_tree or old is None or node is None:
      return None
    if old.root() != board.root() or old.chess960 != board.chess960:
      return None
    stack, played = old.move_stack, board.move_stack
    if len(played) < len(stack) or played[: len(stack)] != stack:
      return None
    for move in played[len(stack) :]:
      if node is None or move not in node.moves:
        return None
      child = node.children[node.moves.index(move)]
      node = child if isinstance(child, Node) else None
    if node is None or node.terminal is not None:
      return None
    return node

  def search(
    self, board: chess.Board, *, stop: Callable[[], bool] | None = None, root_moves: Sequence[chess.Move] | None = None
  ) -> SearchResult:
    """Searches `board` (left unchanged) within the configured budget, among `root_moves` if given."""
    config = self.config
    start = self._clock()
    evaluations_before = self.evaluator.boards_evaluated
    if not any(True for _ in board.legal_moves):
      self.reset()
      return SearchResult(
        None,
        (),
        np.zeros(0),
        np.zeros(0),
        np.zeros(0),
        float(evaluator_lib.terminal_value(board, at_root=True) or 0.0),
        0,
        0,
        0,
        (),
        0.0,
      )
    root = self._reused_root(board)
    if root is None:
      compiling = self.evaluator.compile_seconds
      root = Node(self.evaluator.evaluate([board])[0])
      start += self.evaluator.compile_seconds - compiling  # The root's compile is not the search's time.
    if config.dirichlet_fraction:
      noise = self._rng.dirichlet([config.dirichlet_alpha] * len(root.moves))
      root.priors = (1 - config.dirichlet_fraction) * root.base_priors + config.dirichlet_fraction * noise
    else:
      root.priors = root.base_priors
    excluded = np.array([m not in root_moves for m in root.moves]) if root_moves else None
    root.excluded = excluded if excluded is not None and not excluded.all() else None
    self._root, self._root_board = root, board.copy()
    work = board.copy()  # Pushed and popped along each simulation's path.
    done, depth = 0, 0
    deadline = None if config.seconds is None else start + config.seconds
    while done < config.simulations:
      if (stop is not None and stop()) or (config.depth is not None and depth >= config.depth):
        break
      size = min(config.batch_size, config.simulations - done)
      if deadline is not None:  # A batch no bigger than the time left evaluates (none: the model's move).
        size = self.evaluator.boards_within(deadline - self._clock(), size)
        if size < 1:
          break
      try:
        batch_done, batch_depth = self._run_batch(root, work, size, deadline)
      except background_compile.NotCompiled:  # A compile would outlast the time left: it plays what it has.
        break
      done += batch_done
      depth = max(depth, batch_depth)
    return self._result(
      root, work, done, self.evaluator.boards_evaluated - evaluations_before, depth, self._clock() - start
    )

  def _run_batch(self, root: Node, work: chess.Board, size: int, deadline: float | None) -> tuple[int, int]:
    """Gathers up to `size` leaves under virtual loss, evaluates them in one call, backs up. With a `deadline`
    (`clock`), the call compiles a shape only in the time left (else `background_compile.NotCompiled`)."""
    config = self.config
    leaves: list[tuple[list[tuple[Node, int]], chess.Board]] = []
    done, depth = 0, 0
    while done + len(leaves) < size:
      path: list[tuple[Node, int]] = []
      node = root
      leaf_value: float | None = None
      collided = False
      while True:
        if not node.mates_marked:
          _mark_mates(node, work)
        index = node.select(config.c_init, config.c_base)
        node.visits[index] += 1  # Virtual loss: a visit that lost, until backed up.
        node.value_sum[index] -= 1
        path.append((node, index))
        work.push(node.moves[index])
        child = node.children[index]
        if child is _PENDING:
          collided = True
          break
        if child is None:
          terminal = evaluator_lib.terminal_value(work)
          if terminal is not None:
            node.children[index] = Node(None, terminal=terminal)
            leaf_value = terminal
          else:
            node.children[index] = _PENDING
            leaves.append((path, work.copy(stack=False)))
          break
        assert isinstance(child, Node)
        if child.terminal is not None:
          leaf_value = child.terminal
          break
        node = child
      depth = max(depth, len(path))
      for _ in path:
        work.pop()
      if collided:  # The batch is as spread as it gets.
        self._undo_virtual_loss(path)
        break
      if leaf_value is not None:
        self._backup(path, leaf_value)
        done += 1
    try:
      left = None if deadline is None else deadline - self._clock()
      evaluations = self.evaluator.evaluate([b for _, b in leaves], compiled_only=left is not None, seconds_left=left)
    except background_compile.NotCompiled:
      for path, _ in leaves:  # The leaves unexpanded again.
        parent, index = path[-1]
        parent.children[index] = None
        self._undo_virtual_loss(path)
      raise
    for (path, _), evaluation in zip(leaves, evaluations):
      parent, index = path[-1]
      leaf = Node(evaluation)
      parent.children[index] = leaf
      self._backup(path, leaf.value)
    return done + len(leaves), depth

  @staticmethod
  def _undo_virtual_loss(path: list[tuple[Node, int]]) -> None:
    """Takes back the visits that lost which selecting `path` added (its leaf is not backed up)."""
    for node, index in path:
      node.visits[index] -= 1
      node.value_sum[index] += 1

  @staticmethod
  def _backup(path: list[tuple[Node, int]], value: float) -> None:
    """Backs up a leaf's `value` (its side to move) along `path`, replacing the virtual losses, and the
    mates it proves."""
    proving = True
    for node, index in reversed(path):
      value = -value  # The edge's value for the mover at `node`.
      node.value_sum[index] += 1 + value
      child = node.children[index]
      proving = proving and isinstance(child, Node) and child.proven is not None and node.prove()

  def _result(
    self, root: Node, board: chess.Board, simulations: int, evaluations: int, depth: int, seconds: float
  ) -> SearchResult:
    q = root.q()
    best = _best_index(root)
    pv, node = [root.moves[best]], root.children[best]
    while isinstance(node, Node) and node.moves and node.visits.sum():
      i = _best_index(node)
      pv.append(node.moves[i])
      node = node.children[i]
    return SearchResult(
      root.moves[best],
      root.moves,
      root.visits.copy(),
      q,
      root.base_priors,
      float(q[best]),
      simulations,
      evaluations,
      depth,
      tuple(pv),
      seconds,
    )
