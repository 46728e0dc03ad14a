"""Puzzle evaluation: the Lichess solving rule, rating bands, the CLI, and real agents."""

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time

import chess
import pytest

from searchless.play import agents
from searchless.commands import puzzles as puzzles_command
from searchless.evaluation import puzzles as puzzle_eval
from searchless.data import puzzles as puzzles_lib

HEADER = 'PuzzleId,FEN,Moves,Rating,RatingDeviation,Popularity,NbPlays,Themes,GameUrl,OpeningTags\n'
# Black's setup move b7b6; then Rd8# (listed) and Ra8# (not listed) both mate.
MATE_FEN = '6k1/1p3ppp/8/8/8/8/5PPP/R2R2K1 b - - 0 1'
START_FEN = chess.STARTING_FEN
ROWS = [
  f'mate1,{MATE_FEN},b7b6 d1d8,600,80,90,100,mate mateIn1 short,,',
  f'open2,{START_FEN},e2e4 e7e5 g1f3 b8c6,1400,80,90,100,opening,,',
  f'edge1,{START_FEN},d2d4 d7d5,1399,80,90,100,opening,,',
  f'edge2,{START_FEN},c2c4 e7e5,1599,80,90,100,opening,,',
  f'edge3,{START_FEN},g1f3 g8f6,1600,80,90,100,opening,,',
]
LAST_LINE = re.compile(r'^accuracy: (\d\.\d{4}) \((\d+)/(\d+)\)$')


class Scripted:
  """A fake agent playing fixed UCI moves in turn; it records the boards it was given."""

  name = 'scripted'

  def __init__(self, *moves: str, vandal: bool = False):
    self.moves = list(moves)
    self.boards: list[chess.Board] = []
    self.vandal = vandal
    self.closed = False

  def play(self, board: chess.Board) -> chess.Move:
    self.boards.append(board.copy())
    move = chess.Move.from_uci(self.moves.pop(0))
    if self.vandal:  # Misbehaves: changes the board it was given.
      board.clear()
    return move

  def close(self) -> None:
    self.closed = True


@pytest.fixture
def puzzle_csv(tmp_path):
  path = tmp_path / 'puzzles.csv'
  path.write_text(HEADER + '\n'.join(ROWS) + '\n')
  return path


@pytest.fixture
def puzzles(puzzle_csv) -> dict[str, puzzles_lib.Puzzle]:
  return {p.puzzle_id: p for p in puzzles_lib.read_puzzles(str(puzzle_csv))}


def test_listed_mate_solves(puzzles):
  result = puzzle_eval.solve(puzzles['mate1'], Scripted('d1d8'))
  assert result == puzzle_eval.PuzzleResult('mate1', 600, True, ('d1d8',), None, ('mate', 'mateIn1', 'short'))


def test_other_mate_solves(puzzles):
  result = puzzle_eval.solve(puzzles['mate1'], Scripted('a1a8'))  # Not the listed move, but mate.
  assert result.solved and result.first_wrong is None and result.moves_played == ('a1a8',)


def test_wrong_move_fails(puzzles):
  result = puzzle_eval.solve(puzzles['mate1'], Scripted('d1d7'))
  assert not result.solved and result.first_wrong == 1 and result.moves_played == ('d1d7',)


def test_illegal_move_fails(puzzles):
  result = puzzle_eval.solve(puzzles['mate1'], Scripted('e1e8'))  # No piece on e1.
  assert not result.solved and result.first_wrong == 1 and result.moves_played == ('e1e8',)


def test_second_solver_move_wrong(puzzles):
  agent = Scripted('e7e5', 'd7d6')
  result = puzzle_eval.solve(puzzles['open2'], agent)
  assert result == puzzle_eval.PuzzleResult('open2', 1400, False, ('e7e5', 'd7d6'), 3, ('opening',))
  # Fresh boards with the move history: before Moves[1] and before Moves[3].
  assert [[m.uci() for m in b.move_stack] for b in agent.boards] == [['e2e4'], ['e2e4', 'e7e5', 'g1f3']]


def test_all_solver_moves_right(puzzles):
  result = puzzle_eval.solve(puzzles['open2'], Scripted('e7e5', 'b8c6', vandal=True))
  assert result.solved and result.first_wrong is None and result.moves_played == ('e7e5', 'b8c6')


def test_chessbench_layout_keeps_history():
  row = {'PuzzleId': 'cb', 'Rating': '1500', 'PGN': '1. e4 e5 2. Nf3', 'Moves': 'b8c6 f1b5', 'FEN': ''}
  puzzle = puzzles_lib.parse_row(puzzles_lib.CHESSBENCH, row)
  agent = Scripted('f1b5')
  assert puzzle_eval.solve(puzzle, agent).solved
  assert len(agent.boards[0].move_stack) == 4  # e4 e5 Nf3 Nc6.


def test_evaluate_and_bands(puzzles):
  order = ['mate1', 'open2', 'edge1', 'edge2', 'edge3']
  agent = Scripted('a1a8', 'e7e5', 'b8c6', 'd7d5', 'e7e6', 'g8f6')
  results = puzzle_eval.evaluate([puzzles[k] for k in order], agent, progress=False)
  assert [r.solved for r in results] == [True, True, True, False, True]
  assert puzzle_eval.accuracy(results) == 0.8
  bands = puzzle_eval.accuracy_by_band(results, width=200)
  assert bands == [
    puzzle_eval.Band(600, 800, 1, 1, 1.0),
    puzzle_eval.Band(1200, 1400, 1, 1, 1.0),  # 1399.
    puzzle_eval.Band(1400, 1600, 2, 1, 0.5),  # 1400 and 1599.
    puzzle_eval.Band(1600, 1800, 1, 1, 1.0),  # 1600.
  ]
  assert puzzle_eval.accuracy_by_band(results, width=500)[1] == puzzle_eval.Band(1000, 1500, 2, 2, 1.0)


def test_plot_bands(tmp_path):
  path = tmp_path / 'bands.png'
  puzzle_eval.plot_bands(
    [puzzle_eval.Band(1400, 1600, 3, 2, 2 / 3), puzzle_eval.Band(1600, 1800, 1, 0, 0.0)], path, 'demo'
  )
  assert path.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


def _fail(capsys, argv) -> str:
  with pytest.raises(SystemExit) as exit_info:
    puzzles_command.main(argv)
  assert exit_info.value.code == 2
  err = capsys.readouterr().err.strip()
  assert err.startswith('error: ') and '\n' not in err, err
  return err


def test_cli_errors(tmp_path, puzzle_csv, capsys):
  out = str(tmp_path / 'out')
  missing = tmp_path / 'missing.csv'
  assert str(missing) in _fail(capsys, ['--puzzles', str(missing), '--agent', 'stockfish:nodes=10', '--out', out])
  err = _fail(capsys, ['--puzzles', str(puzzle_csv), '--agent', 'nonsense:1', '--out', out])
  assert 'nonsense:1' in err
  bad = tmp_path / 'bad.csv'
  bad.write_text(HEADER + ROWS[0] + '\n' + f'x,{START_FEN},e2e5 e7e5,1500,1,1,1,,,\n')
  assert f'{bad}:3' in _fail(capsys, ['--puzzles', str(bad), '--agent', 'stockfish:nodes=10', '--out', out])
  err = _fail(
    capsys, ['--puzzles', str(puzzle_csv), '--agent', 'stockfish:nodes=10,path=/nonexistent/stockfish', '--out', out]
  )
  assert '/nonexistent/stockfish' in err
  err = _fail(capsys, ['--puzzles', str(puzzle_csv), '--agent', f'checkpoint:{tmp_path / "nomodel"}', '--out', out])
  assert 'nomodel' in err


FIRST_30_SOLVED = 28  # Stockfish 15.1, nodes=2000, Threads=1, Hash=16 (misses 000VW and 000mr).


@pytest.mark.engine
def test_stockfish_real_puzzles_deterministic(shared_data, stockfish):
  puzzles = list(puzzles_lib.read_puzzles(str(shared_data / 'puzzles' / 'lichess_puzzles_dev.csv'), limit=30))
  counts, engine_name = [], ''
  for _ in range(2):
    agent = agents.from_spec(f'stockfish:nodes=2000,path={stockfish}')
    try:
      engine_name = agent.engine_name
      results = puzzle_eval.evaluate(puzzles, agent, progress=False)
    finally:
      agent.close()
    counts.append(sum(r.solved for r in results))
  assert counts[0] == counts[1]
  assert counts[0] / 30 > 0.8
  if engine_name == 'Stockfish 15.1':
    assert counts[0] == FIRST_30_SOLVED


_COMMAND = [sys.executable, '-m', 'searchless.commands.puzzles', '--no_progress']


def _run_cli(args, cwd) -> subprocess.CompletedProcess:
  return subprocess.run([*_COMMAND, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def _dev_args(shared_data, num: int, agent: str, out) -> list[str]:
  """The CLI's arguments to solve the first `num` dev puzzles with `agent`, writing to `out`."""
  dev = shared_data / 'puzzles' / 'lichess_puzzles_dev.csv'
  return ['--puzzles', str(dev), '--num', str(num), '--agent', agent, '--out', str(out)]


def _check_outputs(out, stdout: str, n: int) -> dict:
  match = LAST_LINE.match(stdout.strip().splitlines()[-1])
  assert match, stdout
  summary = json.loads((out / 'summary.json').read_text())
  with open(out / 'results.csv', newline='') as f:
    rows = list(csv.DictReader(f))
  assert len(rows) == summary['n'] == int(match.group(3)) == n
  solved = sum(int(r['solved']) for r in rows)
  assert solved == summary['solved'] == int(match.group(2))
  assert match.group(1) == f'{solved / n:.4f}' and summary['accuracy'] == pytest.approx(solved / n)
  assert sum(b['n'] for b in summary['bands']) == n and sum(b['solved'] for b in summary['bands']) == solved
  assert (out / 'accuracy_by_rating.png').read_bytes()[:4] == b'\x89PNG'
  return summary


def _cli_on_dev_puzzles(shared_data, tmp_path, num: int, agent: str) -> dict:
  """The CLI on the first `num` dev puzzles with `agent` (into tmp_path / 'out'): its summary, outputs checked."""
  out = tmp_path / 'out'
  proc = _run_cli(_dev_args(shared_data, num, agent, out), tmp_path)
  assert proc.returncode == 0, proc.stderr
  summary = _check_outputs(out, proc.stdout, num)
  assert summary['agent_spec'] == agent
  return summary


@pytest.mark.engine
def test_cli_stockfish(shared_data, stockfish, tmp_path):
  summary = _cli_on_dev_puzzles(shared_data, tmp_path, 30, f'stockfish:nodes=2000,path={stockfish}')
  assert summary['agent'].startswith('stockfish')
  assert summary['solved'] / 30 > 0.8


@pytest.mark.engine
def test_a_stopped_run_resumes_after_its_journalled_puzzles_and_ends_as_an_uninterrupted_one(
  shared_data, stockfish, tmp_path
):
  out, csv_path = tmp_path / 'sf', shared_data / 'puzzles' / 'lichess_puzzles_dev.csv'
  args = _dev_args(shared_data, 30, f'stockfish:nodes=2000,path={stockfish}', out)
  first = subprocess.Popen([*_COMMAND, *args], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  journal = out / puzzle_eval.JOURNAL
  deadline = time.time() + 120
  while not (journal.exists() and len(journal.read_text().splitlines()) >= 6) and time.time() < deadline:
    time.sleep(0.05)
  first.send_signal(signal.SIGTERM)
  assert first.wait(timeout=60) != 0 and not (out / 'results.csv').exists()
  kept = len(journal.read_text().splitlines()) - 1  # The key line, then one line per puzzle done.
  assert 5 <= kept < 30
  proc = _run_cli(args, tmp_path)
  assert proc.returncode == 0, proc.stderr
  assert f'resuming after the {kept} puzzles an interrupted run solved or failed' in proc.stderr
  summary = _check_outputs(out, proc.stdout, 30)
  with open(out / 'results.csv', newline='') as f:
    ids = [row['PuzzleId'] for row in csv.DictReader(f)]
  assert ids == [p.puzzle_id for p in puzzles_lib.read_puzzles(str(csv_path), limit=30)]
  assert not journal.exists()  # Finished: a rerun measures again.
  if summary['agent'] == 'Stockfish 15.1':
    assert summary['solved'] == FIRST_30_SOLVED


def test_a_journal_of_another_agent_or_other_puzzles_is_not_resumed(puzzle_csv, tmp_path, capsys):
  chosen = list(puzzles_lib.read_puzzles(str(puzzle_csv)))
  out = tmp_path / 'out'
  out.mkdir()
  by_name = lambda p, moves: json.dumps(
    puzzle_eval.PuzzleResult(p.puzzle_id, p.rating, True, tuple(moves), None, p.themes)._asdict()
  )
  by_position = lambda p, moves: json.dumps([p.puzzle_id, p.rating, True, moves, None, list(p.themes)])  # s17's form.
  for agent, line, resumed in (
    ('checkpoint:pretrained', by_name, True),
    ('checkpoint:pretrained,name=another', by_name, False),
    ('checkpoint:pretrained', by_position, False),
  ):
    key = puzzle_eval.journal_key('checkpoint:pretrained', str(puzzle_csv))
    (out / puzzle_eval.JOURNAL).write_text(
      '\n'.join([json.dumps(key), line(chosen[0], ['a1a2']), line(chosen[1], ['b1b2']), '["cut']) + '\n'
    )
    summary = puzzle_eval.run(puzzles=str(puzzle_csv), agent=agent, out=out, progress=False)
    with open(out / 'results.csv', newline='') as f:
      rows = list(csv.DictReader(f))
    assert len(rows) == summary['n'] == len(chosen)
    assert ([r['played'] for r in rows[:2]] == ['a1a2', 'b1b2']) == resumed
    assert ('resuming after the 2 puzzles' in capsys.readouterr().err) == resumed


def test_a_journal_key_changes_when_the_models_parameters_are_written_again(model_checkpoint):
  from searchless.model import loading

  spec = f'search:{model_checkpoint},algo=alphabeta,depth=1'
  before = puzzle_eval.journal_key(spec, 'dev.csv')
  params = loading.resolve(str(model_checkpoint))
  assert before['model'] == f'{params}@{os.path.getmtime(params)}' and before['agent'] == spec
  os.utime(params, (1e9, 1e9))
  assert puzzle_eval.journal_key(spec, 'dev.csv')['model'] == f'{params}@1000000000.0'
  assert puzzle_eval.journal_key('stockfish:nodes=1', 'dev.csv') == {
    'agent': 'stockfish:nodes=1',
    'puzzles': os.path.abspath('dev.csv'),
    'model': '',
  }


def test_cli_checkpoint(shared_data, model_checkpoint, tmp_path):
  _cli_on_dev_puzzles(shared_data, tmp_path, 5, f'checkpoint:{model_checkpoint}')
  with open(tmp_path / 'out' / 'results.csv', newline='') as f:
    for row in csv.DictReader(f):
      assert row['played'] and len(row['played'].split()) <= len(row['expected'].split())


@pytest.mark.parametrize('num', [0, -3])
def test_num_below_one_is_refused_naming_the_flag(tmp_path, num):
  from searchless.evaluation import epd as epd_eval
  from searchless.evaluation import puzzles as puzzle_eval

  message = f'^--num must be >= 1 \\(or left out: all\\), got {num}$'
  with pytest.raises(ValueError, match=message):
    puzzle_eval.run(puzzles='unused.csv', agent='random', out=tmp_path / 'p', num=num)
  with pytest.raises(ValueError, match=message):
    epd_eval.run(suites=['unused.epd'], agent='random', out=tmp_path / 'e', num=num)
