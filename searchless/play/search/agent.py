"""`SearchAgent`: a checkpoint played with search (MCTS or alpha-beta), and its agent spec.

``search:CHECKPOINT[,algo=mcts|alphabeta][,sims=N][,depth=D][,time=S][,...]``
names one for puzzles, EPD suites, tournaments and self-play
(`searchless.play.agents.from_spec`):

* ``algo``: ``mcts`` (default; PUCT as AlphaZero, `mcts`) or ``alphabeta``
  (KnightCap, `alphabeta`);
* budget: ``sims=N`` simulations per move (MCTS, default 256), ``depth=D``
  plies (alpha-beta, default 2), ``time=S`` seconds per move (either; with
  sims or depth, whichever ends first);
* MCTS constants: ``batch=B`` leaves per model call (16), ``c=C`` (c_init,
  1.25), ``reuse=0|1`` tree reuse (1), ``noise=F`` root Dirichlet fraction (0);
* the model: ``policy=P``, ``dtype=D`` as for ``checkpoint:``; ``prior_temperature=T``
  (0.1) turns move values into priors; ``value=CHECKPOINT`` a value model for
  the leaves of a behavioral-cloning checkpoint;
* play: ``temperature=T`` samples moves proportionally to visits^(1/T) for the
  first ``temperature_full_moves`` (5) full moves, ``seed=N``; ``name=NAME``.

>>> agent = from_options('pretrained-transformer', {'sims': '8', 'batch': '1'})
>>> board = chess.Board()
>>> agent.name, agent.play(board) in board.legal_moves, int(agent.last.visits.sum())
('search(mcts, 8 sims)', True, 8)
>>> agent.close()
"""

from collections.abc import Callable, Sequence
import contextlib

import chess
import numpy as np

from searchless.play import background_compile
from searchless.play import policy as policy_lib
from searchless.play.search import alphabeta
from searchless.play.search import evaluator as evaluator_lib
from searchless.play.search import mcts
from searchless.play.search.result import SearchResult
from searchless.plumbing import errors

ALGORITHMS = ('mcts', 'alphabeta')

Searcher = mcts.Mcts | alphabeta.AlphaBeta


class SearchAgent:
  """Plays the move a search finds; satisfies the tournament `Agent` protocol."""

  def __init__(
    self,
    searcher: Searcher,
    *,
    name: str,
    temperature: float = 0.0,
    temperature_full_moves: int | None = 5,
    seed: int | None = None,
    owned: Sequence[policy_lib.Policy] = (),
  ):
    self.searcher = searcher
    self._owned = tuple(owned)  # Policies this agent loaded: `close` stops their background compiling.
    self.name = name
    self.temperature = temperature
    self.temperature_full_moves = temperature_full_moves
    self.rng = np.random.default_rng(seed)  # Move sampling.
    self.last: SearchResult | None = None  # The last search's result (for info lines and self-play).

  @property
  def evaluator(self) -> evaluator_lib.Evaluator:
    return self.searcher.evaluator

  def search(
    self, board: chess.Board, *, stop: Callable[[], bool] | None = None, root_moves: Sequence[chess.Move] | None = None
  ) -> SearchResult:
    """The search's result for `board` (left unchanged), choosing among `root_moves` when given. A search on a
    time budget holds the background compiles of the process (`background_compile.held`): they would share the cores and
    the interpreter's lock with the model calls it has timed."""
    timed = self.searcher.config.seconds is not None
    with background_compile.held() if timed else contextlib.nullcontext():
      self.last = self.searcher.search(board, stop=stop, root_moves=root_moves)
    return self.last

  def play(self, board: chess.Board) -> chess.Move:
    result = self.search(board)
    sampling = self.temperature and (
      self.temperature_full_moves is None or board.fullmove_number <= self.temperature_full_moves
    )
    move = result.sample(self.temperature, self.rng) if sampling else result.move
    if move is None:
      raise ValueError(f'no legal moves in {board.fen()}')
    return move

  def new_game(self) -> None:
    self.searcher.reset()

  def close(self) -> None:
    self.searcher.reset()
    for policy in self._owned:
      close = getattr(policy, 'close', None)
      if close is not None:
        close()


def _number(params: dict[str, str], key: str, kind: type, spec: str):
  text = params.pop(key)
  try:
    return kind(text)
  except ValueError:
    raise errors.BadInput(
      f'bad agent {spec!r}: {key} must be a{"n integer" if kind is int else " number"}, got {text!r}'
    ) from None


def from_options(checkpoint: str, params: dict[str, str], *, spec: str = '', name: str | None = None) -> SearchAgent:
  """The agent of ``search:CHECKPOINT,key=value,...`` (see the module docstring); `params` is consumed."""
  from searchless.play import player as player_lib  # Loading needs JAX; the spec parser does not.

  spec = spec or f'search:{checkpoint}'
  params = dict(params)
  algo = params.pop('algo', 'mcts')
  if algo not in ALGORITHMS:
    raise errors.BadInput(f'bad agent {spec!r}: algo must be one of {ALGORITHMS}, got {algo!r}')
  per_algo: dict[str, dict[str, type]] = {
    'mcts': {'sims': int, 'batch': int, 'c': float, 'reuse': int, 'noise': float},
    'alphabeta': {'depth': int},
  }
  keys = per_algo[algo]
  common: dict[str, type] = {
    'time': float,
    'prior_temperature': float,
    'temperature': float,
    'temperature_full_moves': int,
    'seed': int,
  }
  strings = {'policy', 'dtype', 'value'}
  unknown = set(params) - set(keys) - set(common) - strings
  if unknown:
    raise errors.BadInput(
      f'bad agent {spec!r}: unknown option(s) {sorted(unknown)} for algo={algo}; expected '
      f'{", ".join(sorted([*keys, *common, *strings]))}'
    )
  got = {k: _number(params, k, kind, spec) for k, kind in {**keys, **common}.items() if k in params}
  seconds = got.get('time')
  timed = [f'{seconds:g} s'] if seconds is not None else []
  if algo == 'mcts':
    sims = got.get('sims', mcts.MctsConfig.simulations if seconds is None else None)
    fields = {'batch': 'batch_size', 'c': 'c_init', 'noise': 'dirichlet_fraction', 'seed': 'seed'}
    config: mcts.MctsConfig | alphabeta.AlphaBetaConfig = mcts.MctsConfig(
      simulations=10**9 if sims is None else sims,
      seconds=seconds,
      reuse_tree=bool(got.get('reuse', 1)),
      **{field: got[key] for key, field in fields.items() if key in got},
    )
    budget = ', '.join(([] if sims is None else [f'{sims} sims']) + timed)
  else:
    depth = got.get('depth', alphabeta.AlphaBetaConfig.depth if seconds is None else None)
    config = alphabeta.AlphaBetaConfig(depth=alphabeta.MAX_DEPTH if depth is None else depth, seconds=seconds)
    budget = ', '.join(([] if depth is None else [f'depth {depth}']) + timed)
  dtype = params.pop('dtype', 'auto')
  policy = player_lib.load_policy(checkpoint, policy=params.pop('policy', None), compute_dtype=dtype)
  value_path = params.pop('value', None)
  value_policy = player_lib.load_policy(value_path, compute_dtype=dtype) if value_path else None
  evaluator = evaluator_lib.Evaluator(
    policy,
    prior_temperature=got.get('prior_temperature', evaluator_lib.DEFAULT_PRIOR_TEMPERATURE),
    value_policy=value_policy,
  )
  searcher: Searcher = (
    mcts.Mcts(evaluator, config) if isinstance(config, mcts.MctsConfig) else alphabeta.AlphaBeta(evaluator, config)
  )
  searcher.warm_up(background=True)  # One batch shape now, the others on a worker thread: ready as soon as the policy.
  return SearchAgent(
    searcher,
    name=name or f'search({algo}, {budget})',
    temperature=got.get('temperature', 0.0),
    temperature_full_moves=got.get('temperature_full_moves', 5),
    seed=got.get('seed'),
    owned=[p for p in (policy, value_policy) if p is not None],
  )


def agent_for(policy: policy_lib.Policy, algo: str = 'mcts', **config) -> SearchAgent:
  """A search agent over an already loaded policy (``algo`` and its config's fields as keywords)."""
  evaluator = evaluator_lib.Evaluator(policy)
  if algo == 'mcts':
    return SearchAgent(mcts.Mcts(evaluator, mcts.MctsConfig(**config)), name='search(mcts)')
  if algo == 'alphabeta':
    return SearchAgent(alphabeta.AlphaBeta(evaluator, alphabeta.AlphaBetaConfig(**config)), name='search(alphabeta)')
  raise errors.BadInput(f'algo must be one of {ALGORITHMS}, got {algo!r}')
