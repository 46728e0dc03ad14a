import os
import signal
import stat
import sys
import threading
import time

import chess
import chess.engine
import pytest

from helpers import FAKE_ENGINES, alive

from searchless.engines import annotator as engine

from searchless.engines import launch

pytestmark = pytest.mark.engine

START = chess.STARTING_FEN
MATE_IN_ONE = '6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1'  # Ra8#.


def config(path, **kwargs):
  kwargs.setdefault('limit', launch.SearchLimit.parse('depth=3'))
  return engine.EngineConfig(path=path, **kwargs)


def test_every_legal_move_is_valued(stockfish):
  with engine.BoardAnnotator(config(stockfish)) as annotator:
    assert annotator.engine_id['name'].startswith('Stockfish')
    for fen in (START, MATE_IN_ONE, 'r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1', '8/P7/8/8/8/8/8/k1K5 w - - 0 1'):
      a = annotator.annotate(fen)
      board = chess.Board(fen)
      assert [m for m, _ in a.action_values] == [m.uci() for m in board.legal_moves]
      assert all(0.0 <= v <= 1.0 for _, v in a.action_values)
      assert 0.0 <= a.state_value <= 1.0
      assert a.best_move == max(a.action_values, key=lambda mv: mv[1])[0] or dict(a.action_values)[a.best_move] == max(
        v for _, v in a.action_values
      )


def test_mate_in_one_gets_one_and_is_the_best_move(stockfish):
  with engine.BoardAnnotator(config(stockfish)) as annotator:
    a = annotator.annotate(MATE_IN_ONE)
  values = dict(a.action_values)
  assert values['a1a8'] == 1.0
  assert a.best_move == 'a1a8'
  assert a.state_value == 1.0
  assert values['a1a2'] < 1.0


def test_values_are_from_the_movers_view(stockfish):
  # Black to move can capture a hanging queen: good for black, bad otherwise.
  fen = 'rnb1kbnr/pppp1ppp/8/4p3/4P2q/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3'  # White to move, Nxh4 wins the queen.
  with engine.BoardAnnotator(config(stockfish)) as annotator:
    a = annotator.annotate(fen)
  assert dict(a.action_values)['f3h4'] > 0.9
  assert a.best_move == 'f3h4'


def test_terminal_boards_need_no_engine():
  annotator = engine.BoardAnnotator(config('/nonexistent/engine'))
  mated = annotator.annotate('R5k1/5ppp/8/8/8/8/5PPP/6K1 b - - 1 1')
  assert (mated.action_values, mated.state_value, mated.best_move) == ((), 0.0, None)
  stalemate = annotator.annotate('7k/5Q2/6K1/8/8/8/8/8 b - - 0 1')
  assert (stalemate.action_values, stalemate.state_value, stalemate.best_move) == ((), 0.5, None)
  annotator.close()


def test_invalid_positions_fail_without_reaching_the_engine():
  annotator = engine.BoardAnnotator(config('/nonexistent/engine'))
  with pytest.raises(engine.BoardFailed, match='invalid position'):
    annotator.annotate('6k1/5ppp/8/8/8/8/5PPP/r5K1 b - - 0 1')  # The side not to move is in check.
  annotator.close()


def test_missing_engine_is_a_clear_error():
  annotator = engine.BoardAnnotator(config('/nonexistent/engine'))
  with pytest.raises(launch.EngineNotFound, match="'/nonexistent/engine' not found.*apt-get install stockfish"):
    annotator.annotate(START)
  annotator.close()


def test_a_program_that_is_no_uci_engine_started_synchronously_is_named_killed_and_reaped(tmp_path):
  import subprocess

  cat = _script(tmp_path, 'cat-engine', 'exec cat')
  code = (
    'from searchless.engines import launch\n'
    'try:\n  launch.open_engine(%r)\nexcept launch.EngineUnresponsive as e:\n  print(e)\n' % cat
  )
  start = time.monotonic()
  done = subprocess.run(
    [sys.executable, '-c', code],
    capture_output=True,
    text=True,
    timeout=60,
    env={**os.environ, 'PYTHONPATH': os.pathsep.join(sys.path)},
  )
  assert time.monotonic() - start < launch.HANDSHAKE_SECONDS + 10
  assert done.stdout == f'\'{cat}\' is not a UCI engine: no "uciok" within {launch.HANDSHAKE_SECONDS:g} s\n'
  assert done.stderr == ''  # No asyncio warning about a loop closed before the program was reaped.


def test_a_real_engine_started_synchronously_answers(stockfish):
  engine_ = launch.open_engine(stockfish)
  try:
    assert engine_.play(chess.Board(), chess.engine.Limit(nodes=100)).move in chess.Board().legal_moves
  finally:
    launch.close_engine(engine_)


def test_multipv_mode_covers_every_move(stockfish):
  cfg = config(stockfish, mode='multipv', state_value='best_move', limit=launch.SearchLimit.parse('nodes=5000'))
  with engine.BoardAnnotator(cfg) as annotator:
    for fen in (START, MATE_IN_ONE):
      a = annotator.annotate(fen)
      assert sorted(m for m, _ in a.action_values) == sorted(m.uci() for m in chess.Board(fen).legal_moves)
      assert a.state_value == max(v for _, v in a.action_values)
    assert dict(annotator.annotate(MATE_IN_ONE).action_values)['a1a8'] == 1.0


def test_board_mode_is_one_search_giving_the_value_and_best_move(stockfish):
  cfg = config(stockfish, mode='board', limit=launch.SearchLimit.parse('nodes=5000'))
  with engine.BoardAnnotator(cfg) as annotator:
    mate = annotator.annotate(MATE_IN_ONE)
    assert (mate.action_values, mate.state_value, mate.best_move) == ((), 1.0, 'a1a8')
    start = annotator.annotate(START)
    assert start.action_values == () and 0.5 < start.state_value < 0.6
    assert chess.Move.from_uci(start.best_move) in chess.Board().legal_moves
    assert annotator.annotate(start.fen) == start  # A fresh engine state per board: the same answer again.
    checkmated = annotator.annotate('rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3')
    assert (checkmated.action_values, checkmated.state_value, checkmated.best_move) == ((), 0.0, None)


def test_limits_parse_and_reject():
  assert launch.SearchLimit.parse('time=0.05') == launch.SearchLimit('time', 0.05)
  assert str(launch.SearchLimit.parse('depth=12')) == 'depth=12'
  for bad in ('time=-1', 'depth=1.5', 'nodes=', 'movetime=50'):
    with pytest.raises(ValueError, match='bad engine limit'):
      launch.SearchLimit.parse(bad)


def _kill_soon(annotator, sig, delay):
  def killer():
    time.sleep(delay)
    os.kill(annotator.pid, sig)

  thread = threading.Thread(target=killer)
  thread.start()
  return thread


def test_engine_killed_mid_board_is_restarted_and_the_board_retried(stockfish):
  cfg = config(stockfish, limit=launch.SearchLimit.parse('time=0.05'))
  with engine.BoardAnnotator(cfg) as annotator:
    first_pid = annotator.pid
    thread = _kill_soon(annotator, signal.SIGKILL, 0.3)  # 20 moves x 50 ms: dies mid-board.
    a = annotator.annotate(START)
    thread.join()
    assert annotator.restarts == 1
    assert annotator.pid != first_pid
    assert len(a.action_values) == 20
    with pytest.raises(ProcessLookupError):
      os.kill(first_pid, 0)


def test_hung_engine_hits_the_deadline(stockfish):
  cfg = config(stockfish, limit=launch.SearchLimit.parse('nodes=2000'), deadline=1.0)
  with engine.BoardAnnotator(cfg) as annotator:
    os.kill(annotator.pid, signal.SIGSTOP)  # A real hang: the process stops answering.
    start = time.monotonic()
    a = annotator.annotate(START)
    assert 1.0 <= time.monotonic() - start < 10
    assert annotator.restarts == 1 and len(a.action_values) == 20


@pytest.mark.parametrize(
  'mode, message, attempts',
  [
    # A node- or depth-limited search answers the same every time: not retried, and the reason names the limit.
    (
      'noscore',
      'bad engine answer: the engine gave no score \\(a depth-limited search gives the same answer every '
      'time: raise --limit depth=3\\)',
      1,
    ),
    ('banana', "bad engine answer: unknown score kind in 'info depth 1 score banana 17 nodes -3'", 2),
    ('badmove', "bad engine answer: engine answered 'bestmove z9z9' to searchmoves", 2),
  ],
)
def test_garbage_answers_fail_the_board_after_bounded_retries(tmp_path, mode, message, attempts):
  wrapper = tmp_path / 'garbage-engine'
  script = str(FAKE_ENGINES / 'garbage_uci.py')
  wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {script} {mode}\n')
  wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
  with engine.BoardAnnotator(config(str(wrapper), max_attempts=2, deadline=1.0)) as annotator:
    assert annotator.engine_id['name'] == 'GarbageEngine 1.0'
    with pytest.raises(engine.BoardFailed, match=f'{message}.*after {attempts} attempts') as failure:
      annotator.annotate(START)
    assert failure.value.attempts == attempts
    assert annotator.restarts == (0 if attempts == 1 else 2)


def test_multipv_at_a_small_node_limit_searches_the_moves_it_left_unscored_on_their_own(stockfish, lichess_999):
  """At nodes=1000 MultiPV cannot reach every line of a board with many moves; no board is lost for it."""
  fens = _real_boards(lichess_999, 30)
  cfg = config(stockfish, mode='multipv', state_value='best_move', limit=launch.SearchLimit.parse('nodes=1000'))
  with engine.BoardAnnotator(cfg) as annotator:
    labels = [annotator.annotate(fen) for fen in fens]
    assert annotator.restarts == 0
  for fen, label in zip(fens, labels):
    assert sorted(m for m, _ in label.action_values) == sorted(m.uci() for m in chess.Board(fen).legal_moves)


def _engine_script(tmp_path, name):
  wrapper = tmp_path / name
  wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE_ENGINES / name}.py "$@"\n')
  wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
  return str(wrapper)


def _analyse_multipv(path, fen, limit):
  """python-chess' own MultiPV analysis of `fen` from a fresh engine state: {move: win probability}."""
  from searchless.core import values

  board = chess.Board(fen)
  with chess.engine.SimpleEngine.popen_uci(path) as sf:
    sf.configure({'Threads': 1, 'Hash': 16} if 'Hash' in sf.options else {})
    infos = sf.analyse(
      board,
      limit,
      multipv=board.legal_moves.count(),
      game=object(),
      info=chess.engine.INFO_SCORE | chess.engine.INFO_PV,
    )
  return {info['pv'][0].uci(): values.score_to_win_probability(info['score'].relative) for info in infos}


def test_multipv_lines_are_read_as_python_chess_reads_them(tmp_path):
  """Bounds, a mate, a line changing its first move, an iteration stopped part-way: the last word per line."""
  path = _engine_script(tmp_path, 'multipv_script')
  cfg = config(path, mode='multipv', state_value='best_move', limit=launch.SearchLimit.parse('nodes=100'))
  with engine.BoardAnnotator(cfg) as annotator:
    a = annotator.annotate(START)
  expected = _analyse_multipv(path, START, chess.engine.Limit(nodes=100))
  assert dict(a.action_values) == expected
  assert [m for m, _ in a.action_values] == [m.uci() for m in chess.Board().legal_moves]
  # The depth-2 ranking wins: d2d4 mates, e2e4 and g1f3 keep their bound scores, and line 5 (a2a4 at
  # depth 2) takes the score of the line with no PV.
  from searchless.core import values

  assert (a.best_move, a.state_value) == ('d2d4', 1.0)
  assert dict(a.action_values)['g1f3'] == values.score_to_win_probability(chess.engine.Cp(31))
  assert dict(a.action_values)['e2e4'] == values.score_to_win_probability(chess.engine.Cp(35))
  assert dict(a.action_values)['a2a4'] == values.score_to_win_probability(chess.engine.Cp(-7))


def test_multipv_labels_match_python_chess_analyse_on_real_boards(stockfish, lichess_999):
  """The annotator's own MultiPV reader gives python-chess' analyse() values, bit for bit, at the recipe's limit."""
  fens = _real_boards(lichess_999, 9)
  cfg = config(stockfish, mode='multipv', state_value='best_move', limit=launch.SearchLimit.parse('nodes=20000'))
  with engine.BoardAnnotator(cfg) as annotator:
    ours = [dict(annotator.annotate(fen).action_values) for fen in fens]
  assert ours == [_analyse_multipv(stockfish, fen, chess.engine.Limit(nodes=20000)) for fen in fens]


@pytest.mark.parametrize(
  'mode, message',
  [
    (
      'noscore',
      'the engine gave no score \\(a depth-limited search gives the same answer every time: raise --limit '
      'depth=3\\) \\(after 1 attempts\\)',
    ),
    ('banana', "unknown score kind in 'info depth 1 score banana 17 nodes -3' \\(after 2 attempts\\)"),
  ],
)
def test_multipv_answers_without_scored_lines_fail_the_board(tmp_path, mode, message):
  """The moves a MultiPV search left unscored are searched on their own; an engine that scores none fails the board."""
  wrapper = tmp_path / 'garbage-engine'
  wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE_ENGINES / "garbage_uci.py"} {mode}\n')
  wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
  cfg = config(str(wrapper), mode='multipv', state_value='best_move', max_attempts=2, deadline=1.0)
  with engine.BoardAnnotator(cfg) as annotator:
    with pytest.raises(engine.BoardFailed, match=message):
      annotator.annotate(START)


def _real_boards(path, count):
  from searchless.data import pgn

  fens = []
  for raw in pgn.iter_raw_games(str(path)):
    fens += pgn.parse_game(raw).fens[10 : 10 + count // 3]
    if len(fens) >= count:
      return fens[:count]
  return fens


@pytest.mark.parametrize('mode, limit', [('per_move', 'nodes=2000'), ('multipv', 'nodes=20000')])
def test_labels_do_not_depend_on_the_boards_searched_before(stockfish, lichess_999, mode, limit):
  """Each board starts from a fresh engine state (ucinewgame): any order gives the same labels."""
  fens = _real_boards(lichess_999, 12)
  cfg = config(stockfish, mode=mode, limit=launch.SearchLimit.parse(limit))
  with engine.BoardAnnotator(cfg) as annotator:
    forward = [annotator.annotate(fen) for fen in fens]
  with engine.BoardAnnotator(cfg) as annotator:
    backward = [annotator.annotate(fen) for fen in reversed(fens)][::-1]
  assert forward == backward
  with engine.BoardAnnotator(cfg) as annotator:  # A board alone, after an unrelated search.
    annotator.annotate(START)
    assert annotator.annotate(fens[5]) == forward[5]


def _script(tmp_path, name, body):
  path = tmp_path / name
  path.write_text(f'#!/bin/sh\n{body}\n')
  path.chmod(path.stat().st_mode | stat.S_IEXEC)
  return str(path)


@pytest.mark.parametrize(
  'body, message',
  [
    ('exec cat', 'is not a UCI engine: no "uciok" within 1 s'),  # Echoes "uci" back, forever.
    ('while true; do echo garbage; sleep 0.01; done', 'is not a UCI engine: no "uciok" within 1 s'),
    ('exit 0', 'is not a UCI engine: it exited during the "uci" handshake'),
  ],
)
def test_a_program_that_is_no_uci_engine_is_named_and_killed(tmp_path, body, message):
  import psutil

  path = _script(tmp_path, 'not-an-engine', body)
  before = {p.pid for p in psutil.Process().children(recursive=True)}
  start = time.monotonic()
  with pytest.raises(launch.EngineUnresponsive, match=f"^'{path}' {message}"):
    engine.BoardAnnotator(config(path, deadline=1.0)).start()
  assert time.monotonic() - start < 5
  time.sleep(0.2)
  left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before and alive(p)]
  assert left == []  # The hanging child was killed.


def test_an_engine_failing_every_board_stops_the_job_naming_it(tmp_path):
  wrapper = _script(tmp_path, 'mute-engine', f'exec {sys.executable} {FAKE_ENGINES / "garbage_uci.py"} noscore')
  boards = ['8/8/8/8/8/8/8/K1k5 w - - 0 1', START, '8/8/8/8/8/8/8/K2k4 w - - 0 1']
  with engine.BoardAnnotator(config(wrapper, max_attempts=1, deadline=1.0, max_failures_in_a_row=3)) as annotator:
    for fen in boards[:2]:
      with pytest.raises(engine.BoardFailed):
        annotator.annotate(fen)
    with pytest.raises(
      engine.EngineBroken,
      match=f"^engine '{wrapper}': 3 boards in a row failed after 1 attempts "
      'each \\(the last: bad engine answer: the engine gave no score \\(a depth-limited search '
      'gives the same answer every time: raise --limit depth=3\\)\\); stopping$',
    ):
      annotator.annotate(boards[2])


def test_an_engine_killed_during_its_handshake_is_started_again(stockfish, tmp_path, monkeypatch):
  """A signal during the handshake (the OOM killer, a reboot's first signals) is a fault of the moment: the engine
  starts again, `max_attempts` times in all; a program that exits by itself is no engine, refused at once."""
  killed = tmp_path / 'killed'
  wrapper = tmp_path / 'engine'  # Killed by SIGKILL the first `n` times it starts, Stockfish after.
  wrapper.write_text(
    f'#!/bin/sh\necho x >> {killed}\n[ "$(wc -l < {killed})" -le "$KILLS" ] && kill -9 $$\nexec {stockfish}\n'
  )
  wrapper.chmod(0o755)
  monkeypatch.setenv('KILLS', '2')
  with engine.BoardAnnotator(config(str(wrapper), max_attempts=3)) as annotator:
    assert annotator.engine_id['name'].startswith('Stockfish') and annotator.restarts == 2
    assert annotator.annotate(START).best_move is not None
  killed.unlink()
  with pytest.raises(launch.EngineKilled, match='was killed during the "uci" handshake'):
    engine.BoardAnnotator(config(str(wrapper), max_attempts=2)).start()
  with pytest.raises(launch.EngineUnresponsive, match='is not a UCI engine: it exited') as refused:
    engine.BoardAnnotator(config('/bin/false', max_attempts=3)).start()
  assert not isinstance(refused.value, launch.EngineKilled)
