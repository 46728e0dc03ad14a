"""Agent specs and the engine agents, with real engine processes."""

import json
import subprocess
import sys
import time

import chess
import pytest

from searchless.play import agents
from searchless.engines import launch


def test_parse_spec():
  assert agents.parse_spec('stockfish:nodes=1000,elo=1350,name=sf') == (
    'stockfish',
    '',
    {'nodes': '1000', 'elo': '1350', 'name': 'sf'},
  )
  assert agents.parse_spec('uci:/usr/games/toga2,time=0.1,option.Hash=8') == (
    'uci',
    '/usr/games/toga2',
    {'time': '0.1', 'option.Hash': '8'},
  )
  assert agents.parse_spec('checkpoint:runs/demo/train') == ('checkpoint', 'runs/demo/train', {})


@pytest.mark.parametrize(
  'spec, message',
  [
    ('lc0:x', "bad agent 'lc0:x': expected one of"),
    ('stockfish', "bad agent 'stockfish': expected one of"),
    ('stockfish:elo=1350', 'give exactly one limit'),
    ('stockfish:time=0.1,depth=3', 'give exactly one limit'),
    ('stockfish:time=-1', "bad engine limit 'time=-1'"),
    ('stockfish:time=0.1,colour=red', "unknown option\\(s\\) \\['colour'\\]"),
    ('stockfish:time=0.1,fast', "'fast' is not key=value"),
    ('checkpoint:', 'checkpoint needs a path'),
    ('uci:/usr/games/stockfish,time=0.1,Hash=8', 'engine options are option.NAME=VALUE'),
    ('uci:/usr/games/stockfish,clock=60+x', "bad clock '60\\+x': expected BASE\\+INC"),
    ('uci:/usr/games/stockfish,clock=0', "bad clock '0'"),
    ('uci:/usr/games/stockfish,clock=60,time=1', 'or clock=BASE\\+INC'),
    ('uci:/usr/games/stockfish,time=1,handshake=0', 'handshake must be a positive number of seconds'),
    ('stockfish:clock=60+1', 'give exactly one limit of time=S, depth=N, nodes=N$'),
  ],
)
def test_bad_specs_say_what_is_wrong(spec, message):
  with pytest.raises(ValueError, match=message):
    agents.from_spec(spec)


def test_missing_binaries_and_checkpoints():
  with pytest.raises(launch.EngineNotFound, match="cannot start UCI engine '/nonexistent/engine'"):
    agents.from_spec('uci:/nonexistent/engine,time=0.1')
  with pytest.raises(FileNotFoundError, match='checkpoint path /nonexistent/ckpt does not exist'):
    agents.from_spec('checkpoint:/nonexistent/ckpt')
  with pytest.raises(ValueError, match="unknown option\\(s\\) \\['temprature'\\]"):
    agents.from_spec('checkpoint:/nonexistent/ckpt,temprature=1')


@pytest.mark.engine
def test_stockfish_agents_play_legal_moves_and_leave_the_board_alone(stockfish):
  board = chess.Board('r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3')
  before = board.copy()
  for spec in (
    'stockfish:nodes=2000',
    'stockfish:nodes=2000,elo=1350,name=weak',
    f'uci:{stockfish},depth=4',
    'stockfish-all-moves:nodes=500',
  ):
    agent = agents.from_spec(spec)
    try:
      move = agent.play(board)
      assert move in board.legal_moves and board == before and board.move_stack == before.move_stack
    finally:
      agent.close()
  weak = agents.from_spec('stockfish:nodes=100,elo=1350,name=weak')
  assert weak.name == 'weak' and weak.elo == 1350
  weak.close()


@pytest.mark.engine
def test_stockfish_finds_mate_and_the_oracle_values_every_move(stockfish):
  mate_in_one = chess.Board('6k1/5ppp/8/8/8/8/1n3PPP/R5K1 w - - 0 1')
  for spec in ('stockfish:depth=3', 'stockfish-all-moves:nodes=300'):
    agent = agents.from_spec(spec)
    try:
      assert agent.play(mate_in_one) == chess.Move.from_uci('a1a8')
    finally:
      agent.close()


@pytest.mark.engine
def test_uci_elo_out_of_range_is_refused(stockfish):
  with pytest.raises(ValueError, match="expected value for option 'UCI_Elo' to be at least [0-9]+, got: 500"):
    agents.from_spec('stockfish:nodes=100,elo=500')


@pytest.mark.engine
def test_engine_options_are_passed(stockfish):
  agent = agents.from_spec(f'uci:{stockfish},nodes=100,option.Hash=7,name=sf7')
  try:
    assert agent.name == 'sf7' and agent._engine.protocol.config['Hash'] == 7  # What python-chess sent.
  finally:
    agent.close()


def test_checkpoint_agent_with_options(model_checkpoint):
  agent = agents.from_spec(f'checkpoint:{model_checkpoint},temperature=0.5,seed=3,decisive=off,name=net')
  assert agent.name == 'net' and agent.options.temperature == 0.5 and agent.options.decisive == 'off'
  assert agent.play(chess.Board()) in chess.Board().legal_moves
  agent.close()


@pytest.mark.engine
def test_a_new_game_is_detected_from_the_move_stack(stockfish):
  agent = agents.from_spec('stockfish:nodes=200')
  try:
    board = chess.Board()
    agent.play(board)
    first = agent._game
    board.push_uci('e2e4')
    board.push_uci('e7e5')
    agent.play(board)  # The same game, continued.
    assert agent._game is first
    agent.play(chess.Board())  # Back to the start: a new game (python-chess sends ucinewgame).
    assert agent._game is not first
  finally:
    agent.close()


@pytest.mark.engine
def test_an_engine_on_a_clock_spends_its_own_time_and_loses_when_it_overruns(stockfish):
  agent = agents.from_spec(f'uci:{stockfish},clock=3+0.1,name=sf')

  def timed_play(board: chess.Board) -> tuple[chess.Move, float]:
    start = time.monotonic()
    move = agent.play(board)
    return move, time.monotonic() - start

  try:
    assert agent.name == 'sf' and agent.limit == agents.Clock(3.0, 0.1)
    board = chess.Board()
    move, took = timed_play(board)
    assert 3.1 - took <= agent._clock_left < 3.1  # The clock, less the time taken, plus the increment.
    board.push(move)
    board.push_uci('e7e5' if board.is_legal(chess.Move.from_uci('e7e5')) else 'g8f6')
    left = agent._clock_left
    _, took = timed_play(board)
    assert left + 0.1 - took <= agent._clock_left < left + 0.1  # The same game: the clock runs on.
    _, took = timed_play(chess.Board())
    assert 3.1 - took <= agent._clock_left < 3.1  # A new game: a full clock again.
  finally:
    agent.close()
  hurried = agents.from_spec(f'uci:{stockfish},clock=0.001')  # 1 ms for the game: no engine answers in time.
  try:
    with pytest.raises(agents.TimeForfeit, match=r'lost on time \(\d+\.\d{3} s over\)'):
      hurried.play(chess.Board())
  finally:
    hurried.close()


SEARCH_SPECS = (
  'search:pretrained,sims=16',
  'search:pretrained,time=0.2',
  'search:pretrained,time=1',
  'search:pretrained,algo=alphabeta,depth=3',
  'search:pretrained,algo=alphabeta,time=0.5',
  'search:pretrained-transformer,time=0.5',
)
BUILD_SIX = """
import sys, time
from searchless.play import agents
slowest = 0.0
for _ in range(int(sys.argv[1])):
  built = []
  for spec in sys.argv[2:]:
    start = time.perf_counter()
    built.append(agents.from_spec(spec))
    slowest = max(slowest, time.perf_counter() - start)
  for agent in built:  # Their workers stop after the shape each is compiling: the next agents compile the rest.
    agent.close()
print(f'slowest build {slowest:.2f} s')
"""


@pytest.mark.slow
def test_search_agents_built_side_by_side_in_one_process_compile_without_a_race():
  """Six search agents of the two shipped models, built one after the other while the earlier ones compile in the
  background, in one process: no compile fails, nothing is logged (traces of two threads at once used to mix: a
  `ValueError: Incompatible shapes` or `KeyError: Var(...)` logged, a build of seconds taking a minute). Whether
  traces and compiles take turns is asserted in tests/unit/test_background_compile.py, whose two tests of it fail
  without `background_compile.tracing`; this run (three rounds of it too) passes even then, so one round."""
  start = time.perf_counter()
  done = subprocess.run(
    [sys.executable, '-c', BUILD_SIX, '1', *SEARCH_SPECS], capture_output=True, text=True, timeout=1200
  )
  print(f'{done.stdout.strip()}, {time.perf_counter() - start:.1f} s in all')
  assert (done.returncode, done.stderr) == (0, '')


TIMED_PLAY = """
import json, sys, time
import chess
from searchless.play import agents
agent = agents.from_spec(sys.argv[1])
shapes, searcher = agent.evaluator.policy.predictor.shapes, agent.searcher
compile_shape, search, compiles, searches = shapes._run, searcher.search, [], []

def timed_compile(shape):
  compiles.append(time.perf_counter())
  compile_shape(shape)

def timed_search(*args, **kwargs):
  start = time.perf_counter()
  try:
    return search(*args, **kwargs)
  finally:
    searches.append((start, time.perf_counter()))

shapes._run, searcher.search = timed_compile, timed_search  # The worker's next shapes (it started with the agent).
board = chess.Board()
for _ in range(int(sys.argv[2])):
  board.push(agent.play(board))
waited = time.perf_counter()
while not compiles and time.perf_counter() - waited < 300:  # The worker goes on once the game is over.
  time.sleep(0.1)
agent.close()
print(json.dumps({'compiles': compiles, 'searches': searches}))
"""
ALLOWED_OVERRUN_S = 1.0  # One model call on 2 loaded cores can take several times its time, a stall more.
CLAIMED_BEFORE_S = 0.1  # A compile claimed just before a search began may call the model a moment after.


@pytest.mark.slow
@pytest.mark.parametrize(
  'spec, seconds, moves', [('search:pretrained,time=0.3', 0.3, 20), ('search:pretrained,time=1', 1.0, 8)]
)
def test_a_timed_search_agent_holds_background_compiles_and_keeps_its_time(spec, seconds, moves):
  """An agent plays at once after `from_spec`, its batch shapes still compiling: no compile starts while it searches
  (one shares the cores and the interpreter's lock with the model calls it times), and each search keeps its time."""
  done = subprocess.run(
    [sys.executable, '-c', TIMED_PLAY, spec, str(moves)], capture_output=True, text=True, timeout=900
  )
  assert done.returncode == 0, done.stderr
  timing = json.loads(done.stdout.strip().splitlines()[-1])
  searches, compiles = timing['searches'], timing['compiles']
  assert len(searches) == moves and compiles  # The worker had shapes left when the agent played.
  assert [t for t in compiles if any(start + CLAIMED_BEFORE_S < t < end for start, end in searches)] == []
  assert max(end - start for start, end in searches) <= seconds + ALLOWED_OVERRUN_S


@pytest.fixture(scope='module')
def mixed(tmp_path_factory):
  """A checkpoint whose config does not fit its parameters: the transformer's config beside the graph model's."""
  import shutil

  from searchless.model import loading

  folder = tmp_path_factory.mktemp('mixed')
  shutil.copytree(loading.pretrained_dir('pretrained-transformer') / 'config', folder / 'config')
  shutil.copytree(loading.pretrained_dir('pretrained') / 'params_ema', folder / 'params_ema')
  return folder


def test_a_config_that_does_not_fit_its_parameters_is_one_line_naming_the_checkpoint(mixed):
  from searchless import Player
  from searchless.play import player as player_lib

  want = (
    f"parameters at {mixed / 'params_ema'} do not fit their config: ['embed']['embeddings'] is missing there, "
    "(1968, 192) in the config's transformer model"
  )
  for load in (
    Player.load,
    player_lib.load_policy,
    lambda path: agents.from_spec(f'checkpoint:{path}'),
    lambda path: agents.from_spec(f'search:{path},sims=8'),
  ):
    with pytest.raises(ValueError) as error:
      load(str(mixed))
    assert str(error.value) == want


def test_a_policy_that_does_not_fit_a_model_names_the_checkpoint(compat):
  checkpoint = compat / 'reference_local_checkpoint'  # Published layout: no config, an action-value model.
  with pytest.raises(ValueError) as error:
    agents.from_spec(f'checkpoint:{checkpoint},policy=behavioral_cloning')
  assert str(error.value) == f'{checkpoint}: a behavioral_cloning policy does not fit a model with 128 outputs'
