"""The UCI engine: the protocol class in process, then the real process through python-chess."""

import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import time

import chess
import chess.engine
import numpy as np
import psutil
import pytest

from searchless.commands import uci as uci_command
from searchless.play import player as player_lib
from searchless.play import policy as policy_lib
from searchless.play import uci
from searchless.core import values

from faults import hostile_uci_line
from helpers import uci_argv, uci_engine, write_checkpoint

AFTER_E4_E5 = 'rnbqkbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - 0 2'
KIWIPETE = 'r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1'
MATED = '7k/6Q1/6K1/8/8/8/8/8 b - - 0 1'  # Black is checkmated.
STALEMATE = '7k/5Q2/6K1/8/8/8/8/8 b - - 0 1'
OPTIONS = (
  'option name Policy type combo default action_value var action_value var state_value var behavioral_cloning',
  'option name Temperature type string default 0',
  'option name TemperatureFullMoves type spin default 5 min 0 max 1000',
  'option name Decisive type combo default rule var rule var stockfish var off',
  'option name RepetitionDraws type check default true',
  'option name Threads type spin default 1 min 1 max 1024',
  'option name Ponder type check default false',
  'option name MultiPV type spin default 1 min 1 max 500',
  'option name UCI_ShowWDL type check default false',
  'option name UCI_Chess960 type check default false',
  'option name Hash type spin default 16 min 1 max 33554432',
  'option name Move Overhead type spin default 10 min 0 max 5000',
  'option name SyzygyPath type string default <empty>',
  'option name Search type combo default none var none var mcts var alphabeta',
  'option name SearchNodes type spin default 256 min 1 max 10000000',
  'option name SearchDepth type spin default 2 min 1 max 64',
)
INFO = re.compile(r'info depth 1 seldepth 1 multipv 1 (?:score cp (-?\d+) )?nodes (\d+) nps (\d+) time (\d+) pv (\S+)')


# The protocol class, in process.


class Factory:
  """Loads each policy once for the whole module (warm-up compiles once), counting calls."""

  def __init__(self, path):
    self.path = str(path)
    self.cache = {}
    self.calls = []

  def __call__(self, policy: str, options: player_lib.PlayOptions) -> player_lib.Player:
    self.calls.append(policy)
    if policy not in self.cache:
      self.cache[policy] = player_lib.Player.load(self.path, policy=policy, compute_dtype='float32')
    player = self.cache[policy]
    player.options = options
    return player


@pytest.fixture(scope='module')
def shared_factory(model_checkpoint):
  return Factory(model_checkpoint)


@pytest.fixture
def factory(shared_factory):
  shared_factory.calls.clear()
  return shared_factory


@pytest.fixture(scope='module')
def reference_player(model_checkpoint):
  """An independent player with the default options: what the engine must play."""
  return player_lib.Player.load(str(model_checkpoint), compute_dtype='float32')


def make_engine(factory, **kwargs):
  lines = []
  kwargs.setdefault('checkpoint_name', 'ckpt')
  kwargs.setdefault('max_threads', 4)
  kwargs.setdefault('clock', lambda: 100.0)  # Frozen: time 0, nps = nodes * 1000.
  return uci.UciEngine(factory, lines.append, **kwargs), lines


def run(engine, *commands):
  for command in commands:
    assert engine.handle(command)
  assert engine.wait(30)


def expected_go_lines(player, board, move=None):
  move_, analysis = player.choose(board.copy())
  move = move or move_
  cp = values.win_probability_to_centipawns(float(analysis.win_probs[analysis.moves.index(move)]), clip=uci.CP_CLIP)
  n = len(analysis.moves)
  return [
    f'info depth 1 seldepth 1 multipv 1 score cp {cp} nodes {n} nps {n * 1000} time 0 pv {move.uci()}',
    f'bestmove {move.uci()}',
  ]


def test_uci_lists_id_and_options_without_loading(factory):
  engine, lines = make_engine(factory)
  run(engine, 'uci')
  assert lines == ['id name searchless (action_value, ckpt)', 'id author searchless', *OPTIONS, 'uciok']
  assert factory.calls == []  # Lazy: nothing loaded yet.


def test_isready_loads_once(factory):
  engine, lines = make_engine(factory)
  run(engine, 'isready', 'isready')
  assert lines == ['readyok', 'readyok']
  assert factory.calls == ['action_value']


def test_go_lines_and_bestmove_equal_player_play(factory, reference_player):
  engine, lines = make_engine(factory)
  run(engine, 'uci', 'isready', 'ucinewgame')
  lines.clear()
  for position, fen, moves in [
    ('startpos', chess.STARTING_FEN, ''),
    ('startpos moves e2e4 e7e5', chess.STARTING_FEN, 'e2e4 e7e5'),
    (f'fen {KIWIPETE}', KIWIPETE, ''),
    (f'fen {KIWIPETE} moves e1g1 a6e2', KIWIPETE, 'e1g1 a6e2'),
  ]:
    board = chess.Board(fen)
    for move in moves.split():
      board.push_uci(move)
    run(engine, f'position {position}')
    assert engine.board == board and engine.board.move_stack == board.move_stack
    run(engine, 'go wtime 60000 btime 60000 winc 1000 binc 1000 movestogo 40')
    assert lines == expected_go_lines(reference_player, board)
    assert lines[-1] == f'bestmove {reference_player.play(board)}'
    lines.clear()


def test_go_before_position_plays_from_startpos(factory, reference_player):
  engine, lines = make_engine(factory)
  run(engine, 'go movetime 100')
  assert lines == expected_go_lines(reference_player, chess.Board())


def test_go_limits_and_bad_arguments_still_answer(factory, reference_player):
  engine, lines = make_engine(factory)
  run(engine, 'go depth 3 nodes 10 mate 2 movetime 5')
  assert lines[-1] == f'bestmove {reference_player.play(chess.Board())}'
  lines.clear()
  run(engine, 'go depth x nodes -1 bogus movetime')
  assert lines[:4] == [
    "info string error: go depth expects a non-negative integer, got 'x'",
    "info string error: go nodes expects a non-negative integer, got '-1'",
    "info string error: unknown go argument 'bogus'",
    'info string error: go movetime expects a value',
  ]
  assert lines[-1] == f'bestmove {reference_player.play(chess.Board())}'


def test_searchmoves_restricts_the_choice(factory, reference_player):
  engine, lines = make_engine(factory)
  board = chess.Board(KIWIPETE)
  analysis = reference_player.analyse(board)
  allowed = [m for m, _ in analysis.ranked()[-3:]]  # The three worst moves.
  best_allowed = max(allowed, key=lambda m: analysis.scores[analysis.moves.index(m)])
  run(engine, f'position fen {KIWIPETE}', f'go searchmoves {" ".join(m.uci() for m in allowed)} h1h8 wtime 1000')
  assert lines == [
    "info string error: searchmoves: 'h1h8' is not a legal move",
    *expected_go_lines(reference_player, board, best_allowed),
  ]
  lines.clear()
  run(engine, 'go searchmoves e1h1')  # King takes rook: the castling move, as UCI GUIs may write it.
  assert lines[-1] == 'bestmove e1g1'
  lines.clear()
  run(engine, 'go searchmoves a1a8')  # Nothing legal: every move.
  assert lines[-1] == f'bestmove {reference_player.play(board)}'


@pytest.mark.parametrize('fen, outcome', [(MATED, 'checkmate'), (STALEMATE, 'stalemate')])
def test_no_legal_moves_answers_null_move(factory, fen, outcome):
  engine, lines = make_engine(factory)
  run(engine, f'position fen {fen}', 'go')
  assert lines == [f'info string no legal moves ({outcome})', 'bestmove 0000']


def test_go_infinite_waits_for_stop_and_reads_meanwhile(factory, reference_player):
  engine, lines = make_engine(factory)
  run(engine, 'isready')
  assert engine.handle('go infinite')
  deadline = time.monotonic() + 30
  while not lines[1:] and time.monotonic() < deadline:
    time.sleep(0.01)
  time.sleep(0.2)
  assert lines[1].startswith('info depth 1') and engine.searching
  assert engine.handle('isready') and lines[-1] == 'readyok'  # Answered while the search is pending.
  assert engine.handle('position startpos moves e2e4')  # Does not touch the pending search.
  assert not any(line.startswith('bestmove') for line in lines)
  assert engine.handle('stop')
  assert lines[-1] == f'bestmove {reference_player.play(chess.Board())}' and not engine.searching
  count = len(lines)
  run(engine, 'stop')  # Nothing pending: ignored.
  assert len(lines) == count


def test_go_ponder_waits_for_ponderhit_and_a_new_go_ends_a_pending_one(factory):
  engine, lines = make_engine(factory)
  run(engine, 'isready')
  assert engine.handle('go ponder')
  assert not engine.wait(0.2) and engine.searching
  assert engine.handle('ponderhit')
  assert lines[-1].startswith('bestmove') and not engine.searching
  lines.clear()
  assert engine.handle('go infinite') and engine.handle('go')  # The first is stopped: one bestmove each.
  assert engine.wait(30)
  assert sum(line.startswith('bestmove') for line in lines) == 2


def test_quit_ends_a_pending_search(factory):
  engine, lines = make_engine(factory)
  assert engine.handle('go infinite')
  assert engine.handle('quit') is False
  assert not engine.searching and lines[-1].startswith('bestmove ')


MALFORMED = [
  ('xyzzy', "unknown command 'xyzzy'"),
  ('foo bar', "unknown command 'foo bar'"),
  ('position', 'position needs startpos or fen'),
  ('position somewhere', "position needs startpos or fen, got 'somewhere'"),
  ('position startpos e2e4', "unexpected 'e2e4' after position startpos"),
  ('position fen not/a/fen w - - 0 1', "bad FEN 'not/a/fen w - - 0 1'"),
  (
    'position fen 8/8/8/8/8/8/8/K6k b - - 0 1 moves h1g2 a1b1 g2b1',
    "illegal move 'g2b1' in position 8/8/8/8/8/8/6k1/1K6 b",
  ),
  ('position fen 4k3/8/8/8/8/8/8/8 w - - 0 1', "illegal position '4k3/8/8/8/8/8/8/8 w - - 0 1': no white king"),
  ('position fen 4k3/8/8/8/8/8/8/K3K3 w - -', "illegal position '4k3/8/8/8/8/8/8/K3K3 w - -': too many kings"),
  ('position startpos moves e2e4 e7e5 e1e3', "illegal move 'e1e3' in position " + AFTER_E4_E5),
  ('position startpos moves e2e4 0000', "illegal move '0000'"),
  ('position startpos moves e2e4 zz', "illegal move 'zz'"),
  ('setoption', 'setoption expects: setoption name <id> [value <x>]'),
  ('setoption name Hashes value 16', "unknown option 'Hashes'"),
  ('setoption name Hash value 0', "Hash must be an integer in [1, 33554432], got '0'"),
  ('setoption name Move Overhead value -1', "Move Overhead must be an integer in [0, 5000], got '-1'"),
  ('setoption name MultiPV value 0', "MultiPV must be an integer in [1, 500], got '0'"),
  ('setoption name UCI_ShowWDL value 1', "UCI_ShowWDL must be true or false, got '1'"),
  ('setoption name UCI_Chess960 value yes', "UCI_Chess960 must be true or false, got 'yes'"),
  ('setoption name Temperature value hot', "Temperature must be a number >= 0, got 'hot'"),
  ('setoption name Temperature value -0.5', 'Temperature must be a number >= 0'),
  ('setoption name Temperature value nan', 'Temperature must be a number >= 0'),
  ('setoption name TemperatureFullMoves value -1', 'TemperatureFullMoves must be an integer in [0, 1000]'),
  ('setoption name Threads value 0', "Threads must be an integer in [1, 1024], got '0'"),
  ('setoption name Threads value 1025', 'Threads must be an integer in [1, 1024]'),
  ('setoption name Decisive value maybe', "Decisive must be one of rule, stockfish, off, got 'maybe'"),
  ('setoption name Policy value alphazero', 'Policy must be one of action_value, state_value, behavioral_cloning'),
  ('setoption name RepetitionDraws value yes', "RepetitionDraws must be true or false, got 'yes'"),
  ('debug maybe', "debug expects on or off, got 'maybe'"),
]


def test_malformed_input_is_reported_and_changes_nothing(factory):
  engine, lines = make_engine(factory)
  run(engine, 'position startpos moves d2d4')
  good = engine.board
  for line, error in MALFORMED:
    lines.clear()
    run(engine, line, 'isready')
    assert lines[0].startswith(f'info string error: {error}'), line
    assert lines[-1] == 'readyok', line
    if line.startswith('position'):  # A rejected position leaves none: go answers no move of an older board.
      assert engine.board is None, line
      lines.clear()
      run(engine, 'go depth 1')
      assert lines[0].startswith(
        f'info string error: no position to search: the last position command was rejected ({error}'
      ) and lines[1:] == ['bestmove 0000'], (line, lines)
      run(engine, 'position startpos moves d2d4')
    assert engine.board == good and engine.board.move_stack == good.move_stack, line
  lines.clear()
  run(engine, 'uci')
  assert lines[2:-1] == [
    'option name Policy type combo default action_value var action_value var state_value var behavioral_cloning',
    *OPTIONS[1:],
  ]


def test_unknown_leading_tokens_are_skipped(factory):
  engine, lines = make_engine(factory)
  run(engine, 'joho debug on', '', '   ', 'register later', 'register name x code y')
  assert lines == ["info string error: unknown command 'joho'"]
  assert engine._debug  # pylint: disable=protected-access


def test_options_change_the_player(factory):
  engine, lines = make_engine(factory)
  run(
    engine,
    'setoption name Temperature value 0.75',
    'setoption name TemperatureFullMoves value 12',
    'setoption name Decisive value off',
    'setoption name RepetitionDraws value false',
    'setoption name Ponder value true',
    'isready',
  )
  assert lines == ['readyok']
  options = factory.cache['action_value'].options
  assert (options.temperature, options.temperature_full_moves, options.decisive, options.repetition_draws) == (
    0.75,
    12,
    'off',
    False,
  )
  run(engine, 'setoption name Temperature value 0', 'setoption name Decisive value stockfish')
  assert factory.cache['action_value'].options.temperature == 0.0
  assert factory.cache['action_value'].options.decisive == 'stockfish'
  lines.clear()
  run(engine, 'uci')
  assert lines[2:8] == [
    OPTIONS[0],
    'option name Temperature type string default 0',
    'option name TemperatureFullMoves type spin default 12 min 0 max 1000',
    'option name Decisive type combo default stockfish var rule var stockfish var off',
    'option name RepetitionDraws type check default false',
    OPTIONS[5],
  ]


def test_temperature_samples(factory):
  engine, lines = make_engine(factory)
  run(engine, 'setoption name Temperature value 1000', 'isready')
  moves = set()
  for _ in range(20):
    run(engine, 'go')
    moves.add(lines[-1])
  assert len(moves) > 3  # Near uniform over 20 moves.
  run(engine, 'position fen 4k3/8/8/8/8/8/8/4K2R w K - 0 30', 'go')  # Past TemperatureFullMoves: argmax.
  argmax = factory.cache['action_value'].analyse(chess.Board('4k3/8/8/8/8/8/8/4K2R w K - 0 30')).best_move()
  assert lines[-1] == f'bestmove {argmax}'


def test_policy_reloads_and_keeps_the_old_one_when_it_does_not_fit(factory, compat):
  engine, lines = make_engine(factory, warm_up=False)
  run(engine, 'isready', 'setoption name Policy value state_value')
  assert lines[-1] == (
    f'info string error: cannot use Policy state_value: {factory.path} was trained for the'
    ' action_value policy; the state_value policy would read outputs it never learned (leave the'
    ' policy unset); keeping action_value'
  )
  # A published checkpoint records no policy: it reloads as a state-value policy.
  factory = Factory(compat / 'reference_local_checkpoint')
  engine, lines = make_engine(factory, warm_up=False)
  run(engine, 'isready', 'setoption name Policy value behavioral_cloning')
  assert lines[-1] == (
    f'info string error: cannot use Policy behavioral_cloning: {factory.path}: a behavioral_cloning policy does'
    ' not fit a model with 128 outputs; keeping action_value'
  )
  run(engine, 'setoption name Policy value state_value', 'uci', 'go')
  assert factory.calls == ['action_value', 'behavioral_cloning', 'state_value']
  assert 'id name searchless (state_value, ckpt)' in lines
  assert OPTIONS[0].replace('default action_value', 'default state_value') in lines
  sv = factory.cache['state_value']
  assert lines[-1] == f'bestmove {sv.play(chess.Board())}'
  assert INFO.fullmatch(lines[-2]).group(1) is not None  # State value: a score.


def test_policy_set_before_loading_falls_back_when_it_does_not_fit(factory):
  engine, lines = make_engine(factory, warm_up=False)
  run(engine, 'setoption name Policy value behavioral_cloning', 'isready')
  assert lines == [
    f'info string error: cannot use Policy behavioral_cloning: {factory.path} was trained for the'
    ' action_value policy; the behavioral_cloning policy would read outputs it never learned (leave the'
    ' policy unset); using action_value',
    'readyok',
  ]
  assert factory.calls == ['behavioral_cloning', 'action_value']


@pytest.fixture(scope='module')
def bc_checkpoint(tmp_path_factory):
  return write_checkpoint(tmp_path_factory.mktemp('bc'), 'behavioral_cloning')


def test_behavioral_cloning_sends_no_score(bc_checkpoint):
  bc = Factory(bc_checkpoint)
  engine, lines = make_engine(bc, policy='behavioral_cloning', warm_up=False)
  run(engine, 'position startpos moves g1f3', 'go')
  board = chess.Board()
  board.push_uci('g1f3')
  move = bc.cache['behavioral_cloning'].play(board)
  assert lines == [f'info depth 1 seldepth 1 multipv 1 nodes 20 nps 20000 time 0 pv {move}', f'bestmove {move}']


def test_threads_act_only_before_the_first_load(factory):
  calls = []

  def limiter(threads):
    calls.append(threads)
    return lambda: calls.append('restored')

  engine, lines = make_engine(factory, thread_limiter=limiter)
  run(engine, 'setoption name Threads value 3', 'isready', 'setoption name Threads value 2')
  assert calls == [3, 'restored']
  assert lines == [
    'readyok',
    'info string Threads 2 recorded, but it only acts before the model is first loaded (no-op now)',
  ]


def test_debug_adds_info_strings(factory):
  engine, lines = make_engine(factory)
  run(engine, 'debug on', 'go')
  assert lines[-3].startswith('info string action_value top moves: ')
  assert len(lines[-3].split()) == 5 + 2 * 5


def test_d_prints_the_board(factory):
  engine, lines = make_engine(factory)
  run(engine, 'position startpos moves e2e4 e7e5', 'd')
  assert lines[1] == ' +---+---+---+---+---+---+---+---+'
  assert lines[2] == ' | r | n | b | q | k | b | n | r | 8'
  assert lines[-3:] == [f'Fen: {AFTER_E4_E5}', 'Checkers: ', 'Moves: e2e4 e7e5']


def test_repetition_is_scored_as_a_draw(factory):
  engine, lines = make_engine(factory)
  shuffle = 'g1f3 g8f6 f3g1 f6g8 g1f3 g8f6 f3g1'
  run(engine, f'position startpos moves {shuffle}', 'go searchmoves f6g8')  # Allows a threefold claim.
  assert lines[0].startswith('info depth 1 seldepth 1 multipv 1 score cp 0 ')
  run(engine, 'setoption name RepetitionDraws value false', 'go searchmoves f6g8')
  assert not lines[-2].startswith('info depth 1 seldepth 1 multipv 1 score cp 0 ')


def test_main_rejects_a_missing_checkpoint(tmp_path, capsys):
  with pytest.raises(SystemExit):
    uci_command.main(['--checkpoint', str(tmp_path / 'missing')])
  assert re.match('error: .*does not exist', capsys.readouterr().err)


def test_a_checkpoint_that_does_not_fit_its_config_stops_the_engine_before_uciok(tmp_path):
  """The shipped graph model's config over the transformer's parameters: one line and status 2, no uciok, no move."""
  import shutil

  from searchless.model import loading

  shutil.copytree(loading.pretrained_dir('pretrained') / 'config', tmp_path / 'config')
  shutil.copytree(loading.pretrained_dir('pretrained-transformer') / 'params_ema', tmp_path / 'params_ema')
  done = subprocess.run(
    uci_argv(tmp_path),
    input='uci\nisready\nposition startpos\ngo movetime 100\nquit\n',
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert (done.returncode, done.stdout) == (2, '')
  [line] = done.stderr.strip().splitlines()
  assert line.startswith(f'error: could not load the model {tmp_path}: parameters at ')
  assert 'do not fit their config' in line


def test_checkpoint_policy_reads_the_config_only(model_checkpoint, bc_checkpoint, compat):
  assert uci.checkpoint_policy(str(model_checkpoint)) == 'action_value'
  assert uci.checkpoint_policy(str(bc_checkpoint)) == 'behavioral_cloning'
  assert uci.checkpoint_policy(str(compat / 'reference_local_checkpoint')) == 'action_value'  # Published: no config.


# The real process.


@pytest.fixture(scope='module')
def compilation_cache(tmp_path_factory):
  """Shared by the processes of the tiny model: only the first one compiles its batch shapes."""
  return str(tmp_path_factory.mktemp('jax_cache'))


@pytest.fixture(scope='module')
def process(model_checkpoint, compilation_cache):
  start = time.perf_counter()
  with uci_engine(model_checkpoint, '--compilation_cache', compilation_cache) as engine:
    engine.ping()
    print(f'\nsearchless-uci: readyok {time.perf_counter() - start:.2f} s after start')
    yield engine


def test_process_id_and_options(process, model_checkpoint):
  assert process.id == {'name': f'searchless (action_value, {model_checkpoint.name})', 'author': 'searchless'}
  assert set(process.options) == {
    'Policy',
    'Temperature',
    'TemperatureFullMoves',
    'Decisive',
    'RepetitionDraws',
    'Threads',
    'Ponder',
    'MultiPV',
    'UCI_ShowWDL',
    'UCI_Chess960',
    'Hash',
    'Move Overhead',
    'SyzygyPath',
    'Search',
    'SearchNodes',
    'SearchDepth',
  }
  assert process.options['Policy'].var == list(policy_lib.POLICIES)
  assert process.options['Threads'].max == 1024


def test_process_plays_what_the_player_plays(process, reference_player):
  board = chess.Board()
  for uci_move in ('e2e4', 'e7e5', 'g1f3'):
    board.push_uci(uci_move)
  kiwipete = chess.Board(KIWIPETE)
  for uci_move in ('e1g1', 'a6e2'):  # Sent as position fen ... moves e1g1 a6e2.
    kiwipete.push_uci(uci_move)
  latencies = []
  for position in (chess.Board(), board, chess.Board(KIWIPETE), kiwipete):
    start = time.perf_counter()
    result = process.play(position, chess.engine.Limit(time=0.1))
    latencies.append(time.perf_counter() - start)
    assert result.move == reference_player.play(position)
  print(f'\nsearchless-uci: play latency {", ".join(f"{1000 * s:.0f}" for s in latencies)} ms')


def test_process_analysis_has_a_score(process):
  info = process.analyse(chess.Board(KIWIPETE), chess.engine.Limit(depth=1))
  assert isinstance(info['score'].relative, chess.engine.Cp)
  assert abs(info['score'].relative.score()) <= uci.CP_CLIP
  assert info['pv'][0] in chess.Board(KIWIPETE).legal_moves
  assert info['nodes'] == chess.Board(KIWIPETE).legal_moves.count()
  with process.analysis(chess.Board()) as analysis:  # go infinite: bestmove only after stop.
    assert isinstance(analysis.get()['score'].relative, chess.engine.Cp)
    analysis.stop()
    assert analysis.wait().move == process.play(chess.Board(), chess.engine.Limit(time=0.05)).move


def test_process_options(process):
  process.configure({'Temperature': '1000'})
  moves = {process.play(chess.Board(), chess.engine.Limit(time=0.05)).move for _ in range(12)}
  assert len(moves) > 2
  process.configure({'Temperature': '0', 'Policy': 'state_value'})  # Not what it was trained as: error, kept.
  info = process.analyse(chess.Board(), chess.engine.Limit(depth=1))
  assert 'score' in info
  process.configure({'Policy': 'behavioral_cloning'})  # Does not fit either: info string error, action_value stays.
  assert process.play(chess.Board(), chess.engine.Limit(time=0.05)).move in chess.Board().legal_moves
  process.ping()


@pytest.mark.engine
def test_compat_checkpoint_plays_a_game_against_stockfish(compat, stockfish):
  path = compat / 'reference_local_checkpoint'
  start = time.perf_counter()
  with uci_engine(path, '--dtype', 'float32') as ours:
    ours.ping()
    seconds = time.perf_counter() - start
    assert ours.id['name'] == 'searchless (action_value, reference_local_checkpoint)'
    theirs = chess.engine.SimpleEngine.popen_uci(stockfish, timeout=30)
    try:
      theirs.configure({'Threads': 1, 'Hash': 16})
      board = chess.Board()
      latencies = []
      while not board.is_game_over(claim_draw=True) and len(board.move_stack) < 60:
        if board.turn == chess.WHITE:
          start = time.perf_counter()
          move = ours.play(board, chess.engine.Limit(time=0.1)).move
          latencies.append(time.perf_counter() - start)
        else:
          move = theirs.play(board, chess.engine.Limit(depth=1)).move
        assert move in board.legal_moves, (board.fen(), move)
        board.push(move)
    finally:
      theirs.quit()
  assert theirs.transport.get_returncode() == 0
  print(
    f'\ncompat searchless-uci: readyok {seconds:.2f} s; {len(latencies)} moves, latency median'
    f' {1000 * np.median(latencies):.0f} ms, max {1000 * max(latencies):.0f} ms;'
    f' {len(board.move_stack)} plies, {board.result(claim_draw=True)}'
  )
  assert board.is_game_over(claim_draw=True) or len(board.move_stack) == 60


def start_ours(model_checkpoint, compilation_cache, stderr=subprocess.DEVNULL, **popen) -> subprocess.Popen:
  """Our UCI engine on `model_checkpoint`, line-buffered text through pipes."""
  return subprocess.Popen(
    uci_argv(model_checkpoint, '--compilation_cache', compilation_cache),
    stdin=subprocess.PIPE,
    stdout=subprocess.PIPE,
    stderr=stderr,
    text=True,
    bufsize=1,
    **popen,
  )


def read_until(proc, prefix, lines, timeout=120.0):
  """Reads engine lines into `lines` until one starts with `prefix`; returns it."""
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline:
    line = proc.stdout.readline()
    assert line, f'engine closed stdout; got {lines}'
    lines.append(line.rstrip('\n'))
    if line.startswith(prefix):
      return lines[-1]
  raise AssertionError(f'no {prefix!r} within {timeout} s; got {lines}')


def test_raw_process_malformed_input_infinite_search_and_quit(model_checkpoint, compilation_cache):
  start = time.perf_counter()
  proc = start_ours(
    model_checkpoint,
    compilation_cache,
    stderr=subprocess.PIPE,
    encoding='utf-8',
    env={**os.environ, 'LANG': 'C.UTF-8', 'LC_ALL': 'C.UTF-8'},
  )
  try:
    lines = []
    proc.stdin.write('uci\n')
    proc.stdin.flush()
    read_until(proc, 'uciok', lines)
    proc.stdin.buffer.write(b'\xc3\x28 not utf-8\n')  # Strict UTF-8 stdin (LANG=C.UTF-8) used to end the process.
    proc.stdin.buffer.flush()
    proc.stdin.write(
      'hello world\nposition fen rubbish\nposition startpos moves e2e4 e2e4\n'
      'setoption name Temperature value x\ngo depth z\nisready\n'
    )
    proc.stdin.flush()
    read_until(proc, 'readyok', lines)
    print(f'\nsearchless-uci: readyok {time.perf_counter() - start:.2f} s after start (warm compilation cache)')
    if not any(line.startswith('bestmove ') for line in lines):  # The go still answers (maybe after readyok).
      read_until(proc, 'bestmove ', lines)
    errors = [line for line in lines if line.startswith('info string error: ')]
    assert len(errors) == 7
    expected = [
      "unknown command '\ufffd( not utf-8'",
      "unknown command 'hello world'",
      "bad FEN 'rubbish': ",
      "illegal move 'e2e4' in position rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1",
      "Temperature must be a number >= 0, got 'x'",
      "go depth expects a non-negative integer, got 'z'",
      "no position to search: the last position command was rejected (illegal move 'e2e4'",
    ]
    assert 'bestmove 0000' in lines
    for error, start in zip(errors, expected):
      assert error.startswith(f'info string error: {start}')
    lines.clear()
    proc.stdin.write('position startpos\ngo infinite\nisready\n')
    proc.stdin.flush()
    read_until(proc, 'readyok', lines)
    assert not any(line.startswith('bestmove') for line in lines)
    proc.stdin.write('stop\n')
    proc.stdin.flush()
    assert read_until(proc, 'bestmove', lines) in {f'bestmove {m}' for m in chess.Board().legal_moves}
    proc.stdin.write('go infinite\n')  # Quit with a search pending.
    proc.stdin.flush()
    start = time.perf_counter()
    proc.stdin.write('quit\n')
    proc.stdin.flush()
    assert proc.wait(timeout=10) == 0
    print(f'\nsearchless-uci: quit -> exit in {time.perf_counter() - start:.2f} s')
    assert 'Traceback' not in proc.stderr.read()
  finally:
    if proc.poll() is None:
      proc.kill()
      proc.wait()


def test_end_of_input_ends_the_engine(model_checkpoint):
  proc = subprocess.Popen(
    uci_argv(model_checkpoint), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
  )
  try:
    proc.stdin.write('uci\n')
    proc.stdin.flush()
    read_until(proc, 'uciok', [])
    proc.stdin.close()
    assert proc.wait(timeout=10) == 0
  finally:
    if proc.poll() is None:
      proc.kill()
      proc.wait()


MODULES_AFTER_UCI = textwrap.dedent("""
    import sys
    from searchless.commands import uci
    uci.main(sys.argv[1:])
    print('modules:', *sorted(sys.modules), file=sys.stderr)
""")
# What answering `uci` needs none of: training, data, annotation, evaluation, charts, the HTTP server.
NOT_FOR_UCI = (
  'apache_beam',
  'grain',
  'optax',
  'matplotlib',
  'pandas',
  'tensorflow',
  'torch',
  'scipy',
  'starlette',
  'searchless.training',
  'searchless.data',
  'searchless.evaluation',
  'searchless.pipelines',
  'searchless.report',
  'searchless.play.serve',
)


def test_the_engine_imports_nothing_that_answering_uci_does_not_need(model_checkpoint, compilation_cache):
  """The engine's start costs its imports: the model's (JAX, Haiku, Orbax), not training's or annotation's."""
  done = subprocess.run(
    [sys.executable, '-c', MODULES_AFTER_UCI, '--checkpoint', str(model_checkpoint)]
    + ['--compilation_cache', compilation_cache],
    input='uci\nquit\n',
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert (done.returncode, done.stdout.splitlines()[-1]) == (0, 'uciok'), done.stderr
  [line] = [line for line in done.stderr.splitlines() if line.startswith('modules: ')]
  modules = line.split()[1:]
  assert {'jax', 'haiku', 'searchless.play.uci'} <= set(modules)  # The model is loaded before uciok.
  assert [m for m in modules if any(m == n or m.startswith(f'{n}.') for n in NOT_FOR_UCI)] == []


CLIENT = textwrap.dedent("""
    import subprocess, sys
    engine = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    engine.stdin.write('uci\\n')
    engine.stdin.flush()
    while not engine.stdout.readline().startswith('uciok'):
      pass
    print(engine.pid, flush=True)
    sys.stdin.readline()  # Until killed.
""")


def test_killed_client_ends_the_engine(model_checkpoint):
  client = subprocess.Popen(
    [sys.executable, '-c', CLIENT, *uci_argv(model_checkpoint)],
    stdin=subprocess.PIPE,
    stdout=subprocess.PIPE,
    text=True,
  )
  try:
    engine = psutil.Process(int(client.stdout.readline()))
    os.kill(client.pid, signal.SIGKILL)
    client.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
      try:
        if engine.status() == psutil.STATUS_ZOMBIE:
          break
      except psutil.NoSuchProcess:
        break
      time.sleep(0.05)
    else:
      engine.kill()
      pytest.fail('the engine outlived its killed client by 10 s')
  finally:
    if client.poll() is None:
      client.kill()
      client.wait()


@pytest.mark.timeout(180)
def test_fuzz_1200_hostile_lines_then_the_engine_still_answers_isready(factory):
  engine, lines = make_engine(factory, warm_up=False)
  rng = random.Random(7)
  sent = 0
  while sent < 1200:
    line = hostile_uci_line(rng)
    assert engine.handle(line + '\n'), line
    sent += 1
  assert engine.handle('stop')
  assert engine.wait(60)
  lines.clear()
  run(engine, 'isready')
  assert lines[-1] == 'readyok'
  run(engine, 'position startpos', 'go depth 1')
  assert lines[-1].split()[0] == 'bestmove' and chess.Move.from_uci(lines[-1].split()[1]) in chess.Board().legal_moves


# lichess-bot, GUIs and match runners: python-chess and raw UCI, as they drive engines.

LICHESS_BOT_OPTIONS = {
  'Threads': 4,
  'Hash': 256,
  'Move Overhead': 100,
  'SyzygyPath': './syzygy/',
  'UCI_ShowWDL': True,
}  # lichess-bot's config.yml.default uci_options (SyzygyPath uncommented).
CHESS960_CASTLING = '1r2k2r/8/8/8/8/8/8/1R2K2R w HBhb - 0 1'  # Rooks on b and h: castling is king-takes-rook.


def test_lichess_bot_options_play_multipv_and_wdl(process, reference_player):
  process.configure(LICHESS_BOT_OPTIONS)  # python-chess refuses an option the engine does not advertise.
  board = chess.Board(KIWIPETE)
  result = process.play(
    board, chess.engine.Limit(white_clock=60, black_clock=60, white_inc=1, black_inc=1), info=chess.engine.INFO_ALL
  )
  move, analysis = reference_player.choose(board.copy())
  assert result.move == move
  infos = process.analyse(board, chess.engine.Limit(time=0.1), multipv=3)
  assert [info['multipv'] for info in infos] == [1, 2, 3]
  ranked = [m for m, _ in analysis.ranked()]
  assert [info['pv'][0] for info in infos] == ranked[:3]
  for info in infos:
    win_prob = float(analysis.win_probs[analysis.moves.index(info['pv'][0])])
    assert abs(info['score'].relative.score() - values.win_probability_to_centipawns(win_prob, clip=uci.CP_CLIP)) <= 1
    wdl = info['wdl'].relative
    assert wdl.wins + wdl.draws + wdl.losses == 1000
    assert abs(wdl.expectation() - win_prob) <= 0.002  # win + draw / 2: the move's expected win probability.
  every = process.analyse(board, chess.engine.Limit(depth=1), multipv=500)
  assert sorted(info['pv'][0].uci() for info in every) == sorted(m.uci() for m in board.legal_moves)
  process.configure({'UCI_ShowWDL': False})
  assert 'wdl' not in process.analyse(board, chess.engine.Limit(depth=1))


def test_chess960_castling_goes_in_and_out_as_king_takes_rook(process):
  board = chess.Board(CHESS960_CASTLING, chess960=True)
  castles = {m for m in board.legal_moves if board.is_castling(m)}
  assert {m.uci() for m in castles} == {'e1h1', 'e1b1'}
  infos = process.analyse(board, chess.engine.Limit(depth=1), multipv=500)  # python-chess sets UCI_Chess960.
  assert {info['pv'][0] for info in infos} == set(board.legal_moves)
  board.push(chess.Move.from_uci('e1h1'))  # Sent back as position fen ... moves e1h1.
  assert process.play(board, chess.engine.Limit(time=0.1)).move in board.legal_moves
  # The model reads the position as standard chess would write it: KQkq rights, castling as the king's move.
  start = chess.Board(CHESS960_CASTLING, chess960=True)
  assert policy_lib.model_fen(start) == '1r2k2r/8/8/8/8/8/8/1R2K2R w KQkq - 0 1'
  assert sorted(policy_lib.model_move(start, m) for m in castles) == ['e1c1', 'e1g1']


@pytest.mark.engine
def test_a_chess960_game_against_stockfish(process, stockfish):
  theirs = chess.engine.SimpleEngine.popen_uci(stockfish, timeout=30)
  try:
    theirs.configure({'Threads': 1, 'Hash': 16})
    board = chess.Board.from_chess960_pos(random.Random(960).randrange(960))
    while not board.is_game_over(claim_draw=True) and len(board.move_stack) < 80:
      engine, limit = (process, chess.engine.Limit(time=0.05)) if board.turn else (theirs, chess.engine.Limit(depth=1))
      move = engine.play(board, limit).move
      assert move in board.legal_moves, (board.fen(), move)
      board.push(move)
  finally:
    theirs.quit()
  assert len(board.move_stack) >= 20


def test_a_rejected_position_never_gets_a_move_of_the_board_before(model_checkpoint, compilation_cache):
  proc = start_ours(model_checkpoint, compilation_cache)
  try:
    lines = []
    proc.stdin.write('uci\nisready\nposition startpos moves e2e4\ngo depth 1\n')
    assert read_until(proc, 'bestmove', lines) != 'bestmove 0000'
    proc.stdin.write('position fen rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkqX - 0 1\ngo depth 1\n')
    lines.clear()
    assert read_until(proc, 'bestmove', lines) == 'bestmove 0000'
    assert lines[-2].startswith('info string error: no position to search: the last position command was rejected')
    proc.stdin.write('ucinewgame\ngo depth 1\n')  # A new game starts from the start position.
    assert read_until(proc, 'bestmove', lines).split()[1] in {m.uci() for m in chess.Board().legal_moves}
    proc.stdin.write('quit\n')
    assert proc.wait(30) == 0
  finally:
    if proc.poll() is None:
      proc.kill()


@pytest.mark.engine
def test_a_cutechess_style_match(model_checkpoint, compilation_cache, stockfish):
  """Two games as a match runner plays them over raw UCI: ucinewgame, isready, position startpos moves ...,
  go with both clocks; colours alternate; every bestmove must be legal and the clock respected."""
  players = {
    'ours': start_ours(model_checkpoint, compilation_cache),
    'stockfish': subprocess.Popen([stockfish], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1),
  }
  try:
    for proc in players.values():
      proc.stdin.write(
        'uci\nsetoption name Hash value 16\nsetoption name Threads value 1\n'
        'setoption name Move Overhead value 50\nisready\n'
      )
      read_until(proc, 'readyok', [])
    results = []
    for game in range(2):
      white, black = ('ours', 'stockfish') if game == 0 else ('stockfish', 'ours')
      clocks = {chess.WHITE: 10_000, chess.BLACK: 10_000}  # ms: 10 s + 0.1 s per move.
      board = chess.Board()
      for proc in players.values():
        proc.stdin.write('ucinewgame\nisready\n')
        read_until(proc, 'readyok', [])
      while not board.is_game_over(claim_draw=True) and len(board.move_stack) < 60:
        name = white if board.turn else black
        proc = players[name]
        moves = ' '.join(m.uci() for m in board.move_stack)
        extra = '' if name == 'ours' else ' depth 1'
        start = time.perf_counter()
        proc.stdin.write(
          f'position startpos{" moves " + moves if moves else ""}\n'
          f'go wtime {clocks[chess.WHITE]} btime {clocks[chess.BLACK]} winc 100 binc 100{extra}\n'
        )
        reply = read_until(proc, 'bestmove', [])
        clocks[board.turn] += 100 - int(1000 * (time.perf_counter() - start))
        assert clocks[board.turn] > 0, f'{name} lost on time'
        move = chess.Move.from_uci(reply.split()[1])
        assert move in board.legal_moves, (name, board.fen(), reply)
        board.push(move)
      results.append(board.result(claim_draw=True))
    assert len(results) == 2
  finally:
    for proc in players.values():
      if proc.poll() is None:
        proc.stdin.write('quit\n')
        try:
          proc.wait(10)
        except subprocess.TimeoutExpired:
          proc.kill()


# Search: MCTS and alpha-beta over the policy, within the go's limits.

MATE_IN_2 = 'k7/8/2K5/8/8/8/8/1R6 w - - 0 1'  # 1.Kc7 Ka7 2.Ra1#.


def test_search_mcts_go_nodes_plays_the_search_agents_move(factory, reference_player):
  from searchless.play.search import agent as search_agent

  engine, lines = make_engine(factory)
  run(engine, 'setoption name Search value mcts', 'position startpos moves e2e4', 'go nodes 20')
  board = chess.Board()
  board.push_san('e4')
  expected = search_agent.agent_for(reference_player.policy, 'mcts', simulations=20).search(board)
  info, best = lines[-2], lines[-1]
  assert best == f'bestmove {expected.move.uci()}'
  assert info.startswith(f'info depth {expected.depth} seldepth {expected.depth} multipv 1 score cp ')
  assert ' nodes 20 nps 20000 time 0 pv ' + ' '.join(m.uci() for m in expected.pv) in info
  lines.clear()
  run(engine, 'setoption name MultiPV value 3', 'go')  # No limit: SearchNodes (256).
  assert [line.split(' multipv ')[1][0] for line in lines[:-1]] == ['1', '2', '3']
  assert all(' nodes 256 ' in line for line in lines[:-1])


def test_search_alphabeta_go_depth_proves_a_mate(factory):
  engine, lines = make_engine(factory)
  run(engine, 'setoption name Search value alphabeta', f'position fen {MATE_IN_2}', 'go depth 3')
  assert lines[-1] == 'bestmove c6c7'
  assert lines[-2].startswith('info depth 3 seldepth 3 multipv 1 score mate 2 nodes ')
  assert lines[-2].endswith(' pv c6c7 a8a7 b1a1')
  lines.clear()
  run(engine, 'setoption name UCI_ShowWDL value true', 'go depth 3')
  assert ' score mate 2 wdl 1000 0 0 nodes ' in lines[-2]


def test_search_infinite_runs_until_stop_and_bad_search_options_are_reported(factory):
  engine, lines = make_engine(factory)
  run(engine, 'setoption name Search value mcts', 'isready')
  assert engine.handle('go infinite')
  time.sleep(1.0)
  assert not engine.wait(0.1) and engine.searching
  assert engine.handle('stop')
  assert lines[-1].startswith('bestmove ') and not engine.searching
  nodes = int(lines[-2].split(' nodes ')[1].split()[0])
  assert nodes > 0
  for command, error in [
    ('setoption name Search value deep', 'Search must be one of none, mcts, alphabeta'),
    ('setoption name SearchNodes value 0', 'SearchNodes must be an integer in [1, 10000000]'),
    ('setoption name SearchDepth value 65', 'SearchDepth must be an integer in [1, 64]'),
  ]:
    run(engine, command)
    assert lines[-1] == f"info string error: {error}, got '{command.split()[-1]}'"


def test_process_searches_with_python_chess_limits(process):
  options = process.options
  assert options['Search'].var == ['none', 'mcts', 'alphabeta'] and options['Search'].default == 'none'
  try:
    process.configure({'Search': 'mcts'})
    board = chess.Board()
    infos = process.analyse(board, chess.engine.Limit(nodes=32), multipv=2)
    assert [i['nodes'] for i in infos] == [32, 32] and len({i['pv'][0] for i in infos}) == 2
    start = time.perf_counter()
    result = process.play(board, chess.engine.Limit(time=0.3))
    assert result.move in board.legal_moves and time.perf_counter() - start < 3
    process.configure({'Search': 'alphabeta'})
    result = process.play(chess.Board(MATE_IN_2), chess.engine.Limit(depth=3), info=chess.engine.INFO_SCORE)
    assert result.move.uci() == 'c6c7' and result.info['score'].white() == chess.engine.Mate(2)
  finally:
    process.configure({'Search': 'none'})


@pytest.mark.parametrize(
  'value, message',
  [
    ('0', 'expected 1 to 1024 (the Threads option), got 0'),
    ('-5', 'expected 1 to 1024 (the Threads option), got -5'),
    ('two', "expected an integer, got 'two'"),
  ],
)
def test_threads_out_of_the_option_range_are_refused_on_the_command_line(value, message, capsys):
  from searchless.commands import uci as uci_command

  with pytest.raises(SystemExit) as exit_info:
    uci_command.main(['--checkpoint', 'pretrained', '--threads', value])
  assert exit_info.value.code == 2
  assert capsys.readouterr().err.strip().splitlines()[-1] == f'error: argument --threads: {message}'


def test_go_depth_bounds_mcts_and_go_nodes_bounds_alphabeta(process):
  """`go depth 1` ends MCTS after one batch of root moves (not SearchNodes' 256 simulations); `go nodes 1` ends
  alpha-beta after the root (not SearchDepth's 2 plies)."""
  try:
    process.configure({'Search': 'mcts'})
    info = process.analyse(chess.Board(), chess.engine.Limit(depth=1))
    assert info['depth'] == 1 and 1 <= info['nodes'] <= 16
    process.configure({'Search': 'alphabeta'})
    info = process.analyse(chess.Board(), chess.engine.Limit(nodes=1))
    assert (info['depth'], info['nodes']) == (1, 1)
    info = process.analyse(chess.Board(), chess.engine.Limit(nodes=22))  # The root, then the root and its 20 moves.
    assert (info['depth'], info['nodes']) == (2, 22)
  finally:
    process.configure({'Search': 'none'})


# A go's time beyond its limit that this test allows. The README's bound (Move Overhead + 30 ms) is measured on idle
# cores by `benchmarks/search_clock.py`; here, beside the other tests on 2 cores, one model call can take several
# times its idle time (a 229 ms overrun of `movetime 200` was seen). A search that does not read the clock still
# fails: 256 simulations (the default budget) take over a second.
ALLOWED_OVERRUN_MS = 600


@pytest.mark.parametrize('search', ['mcts', 'alphabeta'])
def test_a_search_keeps_every_go_limit_down_to_a_100_ms_clock(search):
  """The shipped model searching in a real process: each go's time from `go` to `bestmove`, less its limit (a
  movetime, or the clock's share: 100 ms / 30 moves), stays within the allowance."""
  proc = subprocess.Popen(
    uci_argv('pretrained', '--search', search),
    stdin=subprocess.PIPE,
    stdout=subprocess.PIPE,
    stderr=subprocess.DEVNULL,
    text=True,
    bufsize=1,
  )

  def send(line):
    proc.stdin.write(line + '\n')
    proc.stdin.flush()

  def until(prefix):
    return next(line for line in proc.stdout if line.startswith(prefix))

  try:
    send('uci')
    until('uciok')
    send('isready')
    until('readyok')
    moves, overruns = [], {}
    for limit, seconds in [
      ('wtime 100 btime 100', 0.1 / 30),
      ('movetime 50', 0.05),
      ('movetime 200', 0.2),
      ('wtime 500 btime 500 winc 100 binc 100 nodes 100000 depth 64', 0.5 / 30 + 0.075),
    ] * 3:
      send('position startpos' + (' moves ' + ' '.join(moves) if moves else ''))
      start = time.perf_counter()
      send(f'go {limit}')
      moves.append(until('bestmove').split()[1])
      overruns[limit] = max(overruns.get(limit, 0), (time.perf_counter() - start - seconds) * 1000)
    send('quit')
    assert proc.wait(timeout=60) == 0
  finally:
    proc.kill()
  assert max(overruns.values()) <= ALLOWED_OVERRUN_MS, overruns
