"""EPD test suites: parsing the real WAC, Bratko-Kopec and STS files, scoring, the CLI."""

import csv
import json
import os
import re
import subprocess
import sys

import chess
import pytest

from searchless.play import agents
from searchless.commands import epd as epd_command
from searchless.evaluation import epd

MATE_FEN = '6k1/5ppp/8/8/8/8/5PPP/R2R2K1 w - - 0 1'
# Four hand-made positions, one per scoring rule.
SUITE = (
  '\n'.join(
    [
      f'{MATE_FEN[:-4]} bm Rd8# Ra8#; id "mini.001";',  # bm: either mate.
      f'{chess.STARTING_FEN[:-4]} am f3; id "mini.002";',  # am only: anything but f3.
      '# a comment line',
      '',
      f'{chess.STARTING_FEN[:-4]} bm e4 d4; am d4; id "mini.003";',  # bm and am: only e4.
      f'{MATE_FEN[:-4]} bm Rd8#; id "sts.001"; c0 "Rd8#=10, Ra8#=9, Rd7=3";',  # STS-style points.
    ]
  )
  + '\n'
)


class ByFen:
  """A fake agent answering a fixed UCI move per FEN."""

  name = 'by-fen'

  def __init__(self, moves: dict[str, str]):
    self.moves = moves

  def play(self, board: chess.Board) -> chess.Move:
    return chess.Move.from_uci(self.moves[board.board_fen()])

  def close(self) -> None:
    pass


def _mini(tmp_path):
  path = tmp_path / 'mini.epd'
  path.write_text(SUITE)
  return path


def test_read_mini(tmp_path):
  positions = epd.read_epd(_mini(tmp_path))
  assert [(p.id, p.theme, p.line) for p in positions] == [
    ('mini.001', 'mini', 1),
    ('mini.002', 'mini', 2),
    ('mini.003', 'mini', 5),
    ('sts.001', 'sts', 6),
  ]
  assert positions[1].bm == () and positions[1].am == (chess.Move.from_uci('f2f3'),)
  assert positions[3].points == {
    chess.Move.from_uci('d1d8'): 10,
    chess.Move.from_uci('a1a8'): 9,
    chess.Move.from_uci('d1d7'): 3,
  }
  assert positions[3].max_points == 10 and positions[0].max_points is None
  assert [p.id for p in epd.read_epd(_mini(tmp_path), limit=2)] == ['mini.001', 'mini.002']


@pytest.mark.parametrize(
  'moves, solved, points',
  [
    (('a1a8', 'e2e4', 'e2e4', 'd1d8'), [True, True, True, True], 10),
    (('d1d8', 'f2f3', 'd2d4', 'a1a8'), [True, False, False, False], 9),
    (('d1d7', 'g1f3', 'c2c4', 'd1d7'), [False, True, False, False], 3),
    (('a1a2', 'd2d4', 'e2e4', 'h2h3'), [False, True, True, False], 0),
  ],
)
def test_scoring_rules(tmp_path, moves, solved, points):
  positions = epd.read_epd(_mini(tmp_path))
  # Positions 2 and 3 share a board: answer them in turn.
  answers = iter(moves)

  class InTurn:
    name = 'in-turn'

    def play(self, board):
      return chess.Move.from_uci(next(answers))

    def close(self):
      pass

  suite = epd.evaluate_positions(positions, InTurn(), name='mini', progress=False)
  assert [r.solved for r in suite.results] == solved
  assert [r.points for r in suite.results] == [None, None, None, points]
  total = suite.total
  assert (total.n, total.solved, total.points, total.max_points) == (4, sum(solved), points, 10)
  assert [t.name for t in suite.themes] == ['mini', 'sts']
  assert suite.themes[1] == epd.Score('sts', 1, int(solved[3]), points, 10)


def test_illegal_move_scores_nothing(tmp_path):
  positions = epd.read_epd(_mini(tmp_path))
  suite = epd.evaluate_positions(positions[3:], ByFen({positions[3].board().board_fen(): 'e1e8'}), progress=False)
  (result,) = suite.results
  assert (result.solved, result.points, result.san, result.move) == (False, 0, '', 'e1e8')


def test_score_lines():
  assert epd.Score('wac_clean', 299, 270, 0, 0).line() == 'wac_clean: 270/299 solved (0.9030)'
  assert (
    epd.Score('sts01_undermine', 100, 55, 612, 1000).line() == 'sts01_undermine: 612/1000 points, 55/100 best moves'
  )


@pytest.mark.parametrize(
  'line, message',
  [
    ('8/8/8 w - - bm e4; id "x";', 'expected 8 rows'),
    (f'{chess.STARTING_FEN[:-4]} bm Ke5; id "x";', 'illegal san'),
    (f'{chess.STARTING_FEN[:-4]} id "x"; c0 "e4=10, Ke5=3";', 'c0'),
    (
      f'{chess.STARTING_FEN[:-4]} id "x"; c0 "e4=10, Nf3=abc";',
      "c0 'e4=10, Nf3=abc': 'Nf3=abc' is not MOVE=POINTS (points a whole number)",
    ),
    (f'{chess.STARTING_FEN[:-4]} id "x";', 'no bm, am or c0'),
    ('8/8/8/8/8/8/8/8 w - - bm e4; id "x";', ''),  # No kings: from_epd or validity rejects it.
  ],
)
def test_malformed_line_names_file_and_line(tmp_path, line, message):
  path = tmp_path / 'bad.epd'
  path.write_text(SUITE.splitlines()[0] + '\n\n' + line + '\n')
  with pytest.raises(epd.EpdFormatError, match=re.escape(f'{path}:3: ') + '.*' + re.escape(message)):
    epd.read_epd(path)


def test_real_suites(shared_data):
  suites = {
    name: epd.read_epd(shared_data / 'epd' / f'{name}.epd')
    for name in ('wac_clean', 'bratko-kopec_clean', 'sts01_undermine')
  }
  assert {k: len(v) for k, v in suites.items()} == {'wac_clean': 299, 'bratko-kopec_clean': 24, 'sts01_undermine': 100}
  wac = suites['wac_clean']
  assert (wac[0].id, wac[0].bm, wac[0].am, wac[0].points) == ('WAC.001', (chess.Move.from_uci('g3g6'),), (), {})
  assert wac[104].id == 'WAC.105' and {m.uci() for m in wac[104].bm} == {'d6g3', 'h5h4'}
  assert {p.theme for p in wac} == {'WAC'}
  assert suites['bratko-kopec_clean'][0].id == 'BK.01' and suites['bratko-kopec_clean'][0].theme == 'BK'
  sts = suites['sts01_undermine']
  first = sts[0]
  assert first.id == 'STS(v1.0) Undermine.001' and first.theme == 'STS(v1.0) Undermine'
  assert first.fen == '1kr5/3n4/q3p2p/p2n2p1/PppB1P2/5BP1/1P2Q2P/3R2K1 w - - 0 1'
  assert first.bm == (chess.Move.from_uci('f4f5'),)
  assert first.points == {
    chess.Move.from_uci('f4f5'): 10,
    chess.Move.from_uci('d4e5'): 2,
    chess.Move.from_uci('d4f2'): 3,
    chess.Move.from_uci('f3g4'): 2,
  }
  assert {p.theme for p in sts} == {'STS(v1.0) Undermine'} and all(p.max_points == 10 for p in sts)
  # Every c0 (SAN) agrees with the file's own c9 (UCI) / c8 (points) columns.
  lines = (shared_data / 'epd' / 'sts01_undermine.epd').read_text().splitlines()
  for position in sts:
    _, operations = chess.Board.from_epd(lines[position.line - 1])
    expected = dict(zip(operations['c9'].split(), map(int, operations['c8'].split())))
    assert {m.uci(): v for m, v in position.points.items()} == expected, position.id


def _fail(capsys, argv) -> str:
  with pytest.raises(SystemExit) as exit_info:
    epd_command.main(argv)
  assert exit_info.value.code == 2
  err = capsys.readouterr().err.strip()
  assert err.startswith('error: ') and '\n' not in err, err
  return err


def test_cli_errors(tmp_path, capsys):
  out = str(tmp_path / 'out')
  mini = str(_mini(tmp_path))
  missing = tmp_path / 'missing.epd'
  assert str(missing) in _fail(
    capsys, ['--suite', mini, '--suite', str(missing), '--agent', 'stockfish:nodes=1', '--out', out]
  )
  bad = tmp_path / 'bad.epd'
  bad.write_text(SUITE + 'not an epd line\n')
  assert f'{bad}:7' in _fail(capsys, ['--suite', str(bad), '--agent', 'stockfish:nodes=1', '--out', out])
  assert 'bogus:x' in _fail(capsys, ['--suite', mini, '--agent', 'bogus:x', '--out', out])
  assert '/nonexistent/sf' in _fail(
    capsys, ['--suite', mini, '--agent', 'stockfish:nodes=1,path=/nonexistent/sf', '--out', out]
  )


WAC_20_SOLVED = 18  # Stockfish 15.1, nodes=20000, Threads=1, Hash=16.
STS_10_POINTS = [10, 0, 10, 10, 10, 10, 10, 10, 10, 10]  # Same engine and limit.


def _stockfish_suite(path, stockfish, num):
  agent = agents.from_spec(f'stockfish:nodes=20000,path={stockfish}')
  try:
    return agent.engine_name, epd.evaluate_suite(path, agent, num=num, progress=False)
  finally:
    agent.close()


@pytest.mark.engine
def test_stockfish_wac(shared_data, stockfish):
  (name, first), (_, second) = [_stockfish_suite(shared_data / 'epd' / 'wac_clean.epd', stockfish, 20) for _ in '12']
  assert first == second
  assert first.total.n == 20 and first.total.solved >= 15
  if name == 'Stockfish 15.1':
    assert first.total.solved == WAC_20_SOLVED


@pytest.mark.engine
def test_stockfish_sts(shared_data, stockfish):
  (name, first), (_, second) = [
    _stockfish_suite(shared_data / 'epd' / 'sts01_undermine.epd', stockfish, 10) for _ in '12'
  ]
  assert first == second
  total = first.total
  assert total.max_points == 100 and total.solved == sum(p == 10 for p in (r.points for r in first.results))
  if name == 'Stockfish 15.1':
    assert [r.points for r in first.results] == STS_10_POINTS
    assert (total.points, total.solved) == (90, 9)


@pytest.mark.engine
def test_cli(shared_data, stockfish, tmp_path):
  out = tmp_path / 'out'
  suites = [shared_data / 'epd' / 'wac_clean.epd', shared_data / 'epd' / 'sts01_undermine.epd']
  proc = subprocess.run(
    [
      sys.executable,
      '-m',
      'searchless.commands.epd',
      '--suite',
      str(suites[0]),
      '--suite',
      str(suites[1]),
      '--num',
      '5',
      '--agent',
      f'stockfish:nodes=5000,path={stockfish}',
      '--out',
      str(out),
      '--no_progress',
    ],
    cwd=tmp_path,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert proc.returncode == 0, proc.stderr
  lines = proc.stdout.strip().splitlines()
  wac = re.fullmatch(r'wac_clean: (\d+)/5 solved \((\d\.\d{4})\)', lines[-2])
  sts = re.fullmatch(r'sts01_undermine: (\d+)/50 points, (\d+)/5 best moves', lines[-1])
  assert wac and sts, proc.stdout
  summary = json.loads((out / 'summary.json').read_text())
  assert [s['name'] for s in summary['suites']] == ['wac_clean', 'sts01_undermine']
  assert summary['suites'][0]['solved'] == int(wac.group(1)) and wac.group(2) == f'{int(wac.group(1)) / 5:.4f}'
  assert (summary['suites'][1]['points'], summary['suites'][1]['solved']) == (int(sts.group(1)), int(sts.group(2)))
  assert summary['suites'][1]['themes'][0]['name'] == 'STS(v1.0) Undermine'
  with open(out / 'results.csv', newline='') as f:
    rows = list(csv.DictReader(f))
  assert [r['suite'] for r in rows] == ['wac_clean'] * 5 + ['sts01_undermine'] * 5
  assert sum(int(r['solved']) for r in rows[:5]) == int(wac.group(1))
  assert sum(int(r['points']) for r in rows[5:]) == int(sts.group(1))
  assert rows[0]['id'] == 'WAC.001' and rows[0]['bm'] == 'Qg6' and rows[5]['max_points'] == '10'


@pytest.mark.engine
def test_a_reader_that_goes_away_ends_the_command_quietly(shared_data, stockfish, tmp_path):
  """`searchless-epd ... | head -1`, the reader gone before the table is written: status 1 and no traceback."""
  read, write = os.pipe()
  os.close(read)
  proc = subprocess.run(
    [
      sys.executable,
      '-m',
      'searchless.commands.epd',
      '--suite',
      str(shared_data / 'epd' / 'wac_clean.epd'),
      '--num',
      '1',
      '--agent',
      f'stockfish:nodes=100,path={stockfish}',
      '--out',
      str(tmp_path / 'out'),
      '--no_progress',
    ],
    stdout=write,
    stderr=subprocess.PIPE,
    text=True,
    timeout=300,
  )
  os.close(write)
  assert (proc.returncode, proc.stderr) == (1, '')
  assert (tmp_path / 'out' / 'summary.json').exists()
