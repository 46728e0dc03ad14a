"""Search over a model: MCTS (PUCT, batched, tree reuse) and alpha-beta, on a stub model and the shipped one."""

import time
import types

import chess
import numpy as np
import pytest

from searchless.play import agents
from searchless.play import background_compile
from searchless.play import policy as policy_lib
from searchless.play.search import alphabeta
from searchless.play.search import evaluator as evaluator_lib
from searchless.play.search import mcts
from searchless.play.search.result import MATE, MATE_STEP

# White mates in 2 only by 1.Kc7 (1...Ka7 2.Ra1#); 1.Rb8+ is a check that mates nothing.
MATE_IN_2 = 'k7/8/2K5/8/8/8/8/1R6 w - - 0 1'
# Mate in 1: Rd8#.
BACK_RANK = '6k1/5ppp/8/8/8/8/5PPP/3R2K1 w - - 0 1'


class StubPolicy:
  """An action-value 'model' that values every move at 0.5 except the ones it is told about."""

  kind = policy_lib.ACTION_VALUE

  def __init__(self, values: dict[str, float] | None = None):
    self.values = values or {}
    self.boards_seen = 0

  def warm_up(self, max_boards: int = 1, *, background: bool = False) -> None:
    del max_boards, background

  def analyse(self, board):
    return self.analyse_many([board])[0]

  def analyse_many(self, boards):
    self.boards_seen += len(boards)
    out = []
    for board in boards:
      ms = tuple(policy_lib.ordered_legal_moves(board))
      wp = np.array([self.values.get(m.uci(), 0.5) for m in ms])
      out.append(policy_lib.Analysis(board.fen(), ms, wp, np.zeros((len(ms), 1)), wp, float(wp.max())))
    return out


def mating_replies(board: chess.Board) -> bool:
  """Whether every reply to the side to move's opponent ... (board after our move): each reply allows a mate in one."""
  for reply in list(board.legal_moves):
    board.push(reply)
    mates = evaluator_lib.mating_moves(board, list(board.legal_moves))
    board.pop()
    if not mates:
      return False
  return bool(list(board.legal_moves))


def test_the_mate_in_2_position_has_one_key_and_the_decoy_is_no_mate():
  board = chess.Board(MATE_IN_2)
  keys = []
  for move in list(board.legal_moves):
    board.push(move)
    if mating_replies(board):
      keys.append(move.uci())
    board.pop()
  assert keys == ['c6c7']
  assert not evaluator_lib.mating_moves(board, list(board.legal_moves))


@pytest.fixture
def decoy():
  """The stub likes the check 1.Rb8+ (0.9): its raw policy misses the mate."""
  return StubPolicy({'b1b8': 0.9})


def test_mcts_finds_a_mate_in_2_the_raw_policy_misses(decoy):
  board = chess.Board(MATE_IN_2)
  assert decoy.analyse(board).best_move().uci() == 'b1b8'
  search = mcts.Mcts(evaluator_lib.Evaluator(decoy), mcts.MctsConfig(simulations=400, batch_size=8))
  result = search.search(board)
  assert result.move.uci() == 'c6c7'
  assert result.pv[:3] == tuple(chess.Move.from_uci(m) for m in ('c6c7', 'a8a7', 'b1a1'))
  assert result.win_probability > 0.9
  assert board.fen() == MATE_IN_2  # Left unchanged.


def test_alphabeta_proves_the_mate_in_2_at_depth_3_and_not_at_depth_2(decoy):
  board = chess.Board(MATE_IN_2)
  evaluator = evaluator_lib.Evaluator(decoy)
  shallow = alphabeta.AlphaBeta(evaluator, alphabeta.AlphaBetaConfig(depth=2)).search(board)
  assert shallow.move.uci() == 'b1b8' and shallow.mate_in() is None and shallow.depth == 2
  deep = alphabeta.AlphaBeta(evaluator, alphabeta.AlphaBetaConfig(depth=3)).search(board)
  assert deep.move.uci() == 'c6c7' and deep.mate_in() == 2
  assert deep.value == pytest.approx(MATE - 3 * MATE_STEP)
  assert [m.uci() for m in deep.pv] == ['c6c7', 'a8a7', 'b1a1']


def test_visit_counts_add_up_to_the_simulations_whatever_the_batch():
  board = chess.Board()
  for batch in (1, 5, 16):
    evaluator = evaluator_lib.Evaluator(StubPolicy({'e2e4': 0.6, 'e7e5': 0.55}))
    result = mcts.Mcts(evaluator, mcts.MctsConfig(simulations=100, batch_size=batch)).search(board)
    assert result.simulations == 100
    assert int(result.visits.sum()) == 100  # No virtual loss left behind.
    assert result.evaluations == evaluator.boards_evaluated == 101  # Each new board once, plus the root.
    root = None
    # Every node's visits equal the sum of its children's, plus one for its own evaluation.
    search = mcts.Mcts(evaluator, mcts.MctsConfig(simulations=60, batch_size=batch))
    search.search(board)
    root = search.root

    def check(node):
      for i, child in enumerate(node.children):
        if isinstance(child, mcts.Node) and child.terminal is None:
          assert node.visits[i] == child.visits.sum() + 1
          check(child)

    check(root)


def test_no_simulations_plays_the_models_move_and_more_find_the_mate_in_one():
  evaluator = evaluator_lib.Evaluator(StubPolicy({'g2g3': 0.7}))  # Blind to Rd8#.
  board = chess.Board(BACK_RANK)
  assert mcts.Mcts(evaluator, mcts.MctsConfig(simulations=0)).search(board).move.uci() == 'g2g3'
  result = mcts.Mcts(evaluator, mcts.MctsConfig(simulations=2)).search(board)
  assert result.move.uci() == 'd1d8' and result.value == MATE - MATE_STEP  # A proven mate in one.


def test_tree_reuse_keeps_the_subtree_of_the_moves_played():
  evaluator = evaluator_lib.Evaluator(StubPolicy({'e2e4': 0.6, 'e7e5': 0.6}))
  search = mcts.Mcts(evaluator, mcts.MctsConfig(simulations=200, batch_size=4))
  board = chess.Board()
  search.search(board)
  e4 = search.root.moves.index(chess.Move.from_uci('e2e4'))
  after_e4 = search.root.children[e4]
  reply = after_e4.moves[int(np.argmax(after_e4.visits))]
  expected = after_e4.children[after_e4.moves.index(reply)]
  kept_visits = expected.visits.sum()
  assert reply.uci() == 'e7e5' and kept_visits >= 1
  board.push(chess.Move.from_uci('e2e4'))
  board.push(reply)
  result = search.search(board)
  assert search.root is expected  # The same node object: statistics kept.
  assert result.visits.sum() == kept_visits + 200
  # A board that does not continue the game starts a new tree.
  other = chess.Board()
  other.push_san('d4')
  search.search(other)
  assert search.root is not expected and search.root.visits.sum() == 200
  # Without reuse every search starts afresh.
  fresh = mcts.Mcts(evaluator, mcts.MctsConfig(simulations=50, reuse_tree=False))
  fresh.search(chess.Board())
  first = fresh.root
  fresh.search(chess.Board())
  assert fresh.root is not first and fresh.root.visits.sum() == 50


def test_root_moves_restrict_the_choice():
  evaluator = evaluator_lib.Evaluator(StubPolicy({'e2e4': 0.7}))
  allowed = [chess.Move.from_uci('a2a3'), chess.Move.from_uci('h2h3')]
  result = mcts.Mcts(evaluator, mcts.MctsConfig(simulations=30)).search(chess.Board(), root_moves=allowed)
  assert result.move in allowed
  assert sum(result.visits[result.moves.index(m)] for m in allowed) == 30
  ab = alphabeta.AlphaBeta(evaluator, alphabeta.AlphaBetaConfig(depth=2)).search(chess.Board(), root_moves=allowed)
  assert ab.move in allowed


def test_time_limit_and_stop_end_a_search():
  ticks = iter(range(1000))
  evaluator = evaluator_lib.Evaluator(StubPolicy())
  search = mcts.Mcts(
    evaluator, mcts.MctsConfig(simulations=10**6, seconds=3.0, batch_size=4), clock=lambda: next(ticks)
  )
  result = search.search(chess.Board())
  assert 4 <= result.simulations <= 12  # One batch per tick, three ticks allowed.
  stops = iter([False, False, True])
  result = mcts.Mcts(evaluator, mcts.MctsConfig(simulations=10**6, batch_size=4)).search(
    chess.Board(), stop=lambda: next(stops)
  )
  assert result.simulations == 8
  ab = alphabeta.AlphaBeta(
    evaluator,
    alphabeta.AlphaBetaConfig(depth=10),
  ).search(chess.Board(), stop=lambda: True)
  assert ab.depth == 1 and ab.move is not None  # Depth 1 always completes.


class FakeClock:
  """Seconds that pass only when the stub model below runs."""

  def __init__(self):
    self.now = 0.0

  def __call__(self) -> float:
    return self.now


class TimedStubPolicy(StubPolicy):
  """The stub, taking `fixed` seconds per call plus `per_board` per board on `clock`."""

  def __init__(self, clock: FakeClock, fixed: float, per_board: float, values: dict[str, float] | None = None):
    super().__init__(values)
    self.clock, self.fixed, self.per_board = clock, fixed, per_board

  def analyse_many(self, boards):
    self.clock.now += self.fixed + self.per_board * len(boards)
    return super().analyse_many(boards)


@pytest.mark.parametrize('seconds', [0.02, 0.1, 0.37])
def test_timed_searches_size_their_model_calls_to_the_time_left_and_never_overrun(seconds):
  clock = FakeClock()
  evaluator = evaluator_lib.Evaluator(TimedStubPolicy(clock, 0.005, 0.002, {'g1f3': 0.7}), clock=clock)
  result = mcts.Mcts(evaluator, mcts.MctsConfig(simulations=10**6, seconds=seconds, batch_size=16), clock=clock).search(
    chess.Board()
  )
  assert result.seconds <= seconds and result.simulations > 0
  ab = alphabeta.AlphaBeta(evaluator, alphabeta.AlphaBetaConfig(depth=4, seconds=seconds), clock=clock)
  result = ab.search(chess.Board())
  assert result.seconds <= seconds and result.move is not None


def test_without_time_for_one_model_call_a_search_plays_the_models_move():
  clock = FakeClock()
  evaluator = evaluator_lib.Evaluator(TimedStubPolicy(clock, 0.01, 0.001, {'g1f3': 0.7}), clock=clock)
  search = mcts.Mcts(evaluator, mcts.MctsConfig(simulations=10**6, seconds=0.012, batch_size=16), clock=clock)
  result = search.search(chess.Board())  # The root's call takes 0.011 s: no time for a batch.
  assert (result.move.uci(), result.simulations, result.seconds) == ('g1f3', 0, pytest.approx(0.011))
  result = alphabeta.AlphaBeta(evaluator, alphabeta.AlphaBetaConfig(depth=3, seconds=0.012), clock=clock).search(
    chess.Board()
  )
  assert (result.move.uci(), result.depth, result.seconds) == ('g1f3', 1, pytest.approx(0.011))


class CompilingStubPolicy(TimedStubPolicy):
  """The timed stub behind compiled shapes (`predictor.shapes`): a call of n boards runs on shape (n,), and one not
  compiled yet first compiles for `compile` seconds on `clock`; its measured cost is as long in real time (one
  compile of another shape has run)."""

  def __init__(self, clock: FakeClock, compile: float):
    super().__init__(clock, 0.005, 0.002, {'g1f3': 0.7})
    self.compile = compile
    self.predictor = types.SimpleNamespace(shapes=background_compile.Shapes(lambda shape: time.sleep(compile)))
    self.predictor.shapes.compile([(0,)])

  def analyse_many(self, boards):
    shapes, shape = self.predictor.shapes, (len(boards),)
    with shapes.guard(shape):
      if shape not in shapes.ready:
        self.clock.now += self.compile
    shapes.mark(shape)
    return super().analyse_many(boards)


@pytest.mark.parametrize('algo', ['mcts', 'alphabeta'])
def test_a_timed_search_compiles_a_shape_when_its_time_left_exceeds_the_cost_and_not_its_roots(algo):
  """A leaf call of a shape not compiled compiles it (the search goes on) when the time left exceeds the measured
  cost of a compile, else ends the search; the root's compile is not the search's time."""
  for seconds, searched in [(1.0, True), (0.1, False)]:
    clock = FakeClock()
    policy = CompilingStubPolicy(clock, 0.2)
    evaluator = evaluator_lib.Evaluator(policy, clock=clock)
    if algo == 'mcts':
      search = mcts.Mcts(evaluator, mcts.MctsConfig(simulations=10**6, seconds=seconds, batch_size=4), clock=clock)
    else:
      search = alphabeta.AlphaBeta(evaluator, alphabeta.AlphaBetaConfig(depth=3, seconds=seconds), clock=clock)
    with background_compile.held():  # The worker compiles nothing meanwhile.
      result = search.search(chess.Board())
    root_call = 0.2 + 0.005 + 0.002  # The root's call compiled: (1,).
    assert result.seconds == pytest.approx(clock.now - root_call) and result.seconds <= seconds
    assert evaluator.compile_seconds >= 0.2 * (len(policy.predictor.shapes.ready) - 1)  # Every call that compiled.
    if algo == 'mcts':
      assert (result.simulations > 0) == searched, seconds
      assert ((4,) in policy.predictor.shapes.ready) == searched
    else:
      assert (result.depth >= 2) == searched, seconds
      assert ((20,) in policy.predictor.shapes.ready) == searched
    policy.predictor.shapes.close()


def test_a_depth_bounds_mcts_and_a_node_count_bounds_alphabeta():
  """MCTS stops after the batch that first reaches its depth (depth 1: one batch of root moves); alpha-beta visits
  at most its nodes, playing the deepest iteration it completed (depth 1, the model's move, at least)."""
  evaluator = evaluator_lib.Evaluator(StubPolicy({'g1f3': 0.7}))
  shallow = mcts.Mcts(evaluator, mcts.MctsConfig(simulations=256, depth=1, batch_size=16)).search(chess.Board())
  assert (shallow.simulations, shallow.depth, shallow.evaluations) == (16, 1, 17)  # The root, one batch.
  deeper = mcts.Mcts(evaluator, mcts.MctsConfig(simulations=256, depth=3, batch_size=4)).search(chess.Board())
  assert deeper.depth == 3 and deeper.simulations < 256
  for nodes, depth in [(1, 1), (21, 1), (22, 2)]:  # Depth 1: the root; depth 2: the root again and its 20 moves.
    result = alphabeta.AlphaBeta(evaluator, alphabeta.AlphaBetaConfig(depth=10, nodes=nodes)).search(chess.Board())
    assert (result.depth, result.simulations <= nodes) == (depth, True), nodes
  assert result.move.uci() == 'g1f3'
  with pytest.raises(ValueError, match='nodes must be >= 1'):
    alphabeta.AlphaBetaConfig(nodes=0)
  with pytest.raises(ValueError, match='depth must be >= 1'):
    mcts.MctsConfig(depth=0)


def test_finished_games_have_no_move_and_their_exact_value():
  evaluator = evaluator_lib.Evaluator(StubPolicy())
  mated = chess.Board('7k/6Q1/6K1/8/8/8/8/8 b - - 0 1')
  result = mcts.Mcts(evaluator).search(mated)
  assert result.move is None and result.value == -1.0
  assert alphabeta.AlphaBeta(evaluator).search(mated).mate_in() == 0
  stalemate = chess.Board('7k/5Q2/6K1/8/8/8/8/8 b - - 0 1')
  assert mcts.Mcts(evaluator).search(stalemate).value == 0.0


def test_sampling_follows_visits():
  evaluator = evaluator_lib.Evaluator(StubPolicy({'e2e4': 0.6}))
  result = mcts.Mcts(evaluator, mcts.MctsConfig(simulations=64)).search(chess.Board())
  rng = np.random.default_rng(0)
  drawn = [result.sample(1.0, rng) for _ in range(2000)]
  share = drawn.count(result.move) / len(drawn)
  assert share == pytest.approx(result.visits.max() / result.visits.sum(), abs=0.04)
  assert result.sample(0.0, rng) == result.move
  np.testing.assert_allclose(result.visit_distribution().sum(), 1.0)


def test_priors_are_a_softmax_of_win_probabilities():
  evaluation = evaluator_lib.Evaluator(StubPolicy({'e2e4': 0.6}), prior_temperature=0.1).evaluate([chess.Board()])[0]
  e4 = evaluation.moves.index(chess.Move.from_uci('e2e4'))
  others = np.delete(evaluation.priors, e4)
  assert evaluation.priors[e4] / others[0] == pytest.approx(np.exp(1.0))
  assert evaluation.value == pytest.approx(0.2) and evaluation.move_values[e4] == pytest.approx(0.2)


def test_spec_errors_name_the_option():
  with pytest.raises(ValueError, match=r"unknown option\(s\) \['depth'\] for algo=mcts"):
    agents.from_spec('search:pretrained,depth=3')
  with pytest.raises(ValueError, match='algo must be one of'):
    agents.from_spec('search:pretrained,algo=minimax')
  with pytest.raises(ValueError, match="sims must be an integer, got 'many'"):
    agents.from_spec('search:pretrained,sims=many')
  with pytest.raises(ValueError, match='search needs a path'):
    agents.from_spec('search:')
  with pytest.raises(ValueError, match=r'simulations must be >= 0'):
    mcts.MctsConfig(simulations=-1)


@pytest.mark.parametrize(
  'go, kind, expected',
  [
    ('nodes 100', 'mcts', {'simulations': 100, 'seconds': None, 'depth': None}),
    ('depth 3', 'mcts', {'simulations': 256, 'seconds': None, 'depth': 3}),  # SearchNodes, and the depth.
    ('depth 99', 'alphabeta', {'depth': 64, 'seconds': None, 'nodes': None}),
    ('nodes 1', 'alphabeta', {'depth': 2, 'seconds': None, 'nodes': 1}),  # SearchDepth, and the nodes.
    ('movetime 510', 'mcts', {'simulations': 10_000_000, 'seconds': 0.5, 'depth': None}),
    ('movetime 510 nodes 50', 'mcts', {'simulations': 50, 'seconds': 0.5, 'depth': None}),
    ('wtime 10010 btime 1000 movestogo 5', 'alphabeta', {'depth': 64, 'seconds': 2.0, 'nodes': None}),
    ('wtime 1010 btime 1000 winc 4000', 'mcts', {'simulations': 10_000_000, 'seconds': 0.5, 'depth': None}),
    ('infinite depth 2 nodes 5', 'alphabeta', {'depth': 64, 'seconds': None, 'nodes': None}),
    ('', 'alphabeta', {'depth': 2, 'seconds': None, 'nodes': None}),
  ],
)
def test_go_limits_become_the_search_budget(go, kind, expected):
  from searchless.play.uci import protocol
  from searchless.play.uci import search as uci_search

  request, errors = protocol.parse_go(go.split())
  assert not errors
  assert uci_search.budget(chess.Board(), request, kind=kind, nodes=256, depth=2, overhead_ms=10) == expected


def test_mcts_proves_mates_and_reports_them_as_mates(decoy):
  """The MCTS-solver: a mate in 2 and in 1 proven, reported as `score mate N` by UCI; a lost root plays the
  longest defence and reads as being mated."""
  from searchless.play.uci import search as uci_search

  found = {}
  for fen, simulations in ((MATE_IN_2, 400), (BACK_RANK, 16)):
    result = mcts.Mcts(evaluator_lib.Evaluator(decoy), mcts.MctsConfig(simulations=simulations, batch_size=4)).search(
      chess.Board(fen)
    )
    found[fen] = (result.move.uci(), result.mate_in(), result.value, uci_search._score(result.value, False))  # pylint: disable=protected-access
  assert found[MATE_IN_2] == ('c6c7', 2, pytest.approx(MATE - 3 * MATE_STEP), 'score mate 2 ')
  assert found[BACK_RANK] == ('d1d8', 1, pytest.approx(MATE - MATE_STEP), 'score mate 1 ')
  lost = chess.Board('k7/8/1K6/8/8/8/8/7R b - - 0 1')  # 1...Kb8 (the only move) 2.Rh8#.
  result = mcts.Mcts(evaluator_lib.Evaluator(StubPolicy()), mcts.MctsConfig(simulations=64, batch_size=4)).search(lost)
  assert (result.move.uci(), result.mate_in(), result.value) == ('a8b8', -1, pytest.approx(-(MATE - 2 * MATE_STEP)))
  assert result.win_probability == 0.0
