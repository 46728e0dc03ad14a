"""The puzzle evaluation set: reading both CSV layouts, and the train-overlap pipeline."""

import csv
import json
import pathlib
import re

import chess
import pytest

from searchless.commands import puzzles_data as command
from searchless.core import bags
from searchless.data import puzzle_set as pipeline
from searchless.data import puzzles
from searchless.data import splits

HEADER = 'PuzzleId,FEN,Moves,Rating,RatingDeviation,Popularity,NbPlays,Themes,GameUrl,OpeningTags'


@pytest.fixture(scope='module')
def dev(shared_data) -> pathlib.Path:
  return shared_data / 'puzzles' / 'lichess_puzzles_dev.csv'


@pytest.fixture(scope='module')
def dev_rows(dev) -> list[dict]:
  with open(dev, newline='') as f:
    return list(csv.DictReader(f))


def _start_fen(fen: str, first_move: str) -> str:
  board = chess.Board(fen)
  board.push_uci(first_move)
  return board.fen()


def test_reads_the_real_dev_puzzles(dev, dev_rows):
  got = list(puzzles.read_puzzles(str(dev)))
  assert len(got) == len(dev_rows) == 1500
  first = got[0]
  assert (first.puzzle_id, first.rating) == ('00008', 1940)
  assert first.themes == ('crushing', 'hangingPiece', 'long', 'middlegame')
  assert first.fen == 'r6k/pp2r2p/4Rp1Q/3p4/8/1N1P2R1/PqP2bPP/7K b - - 0 24'
  # After the opponent's Bxg3 (f2g3) it is White's turn: the solver plays e6e7, b3c1, h6c1.
  assert first.start_fen == 'r6k/pp2r2p/4Rp1Q/3p4/8/1N1P2b1/PqP3PP/7K w - - 0 25'
  assert first.solver_moves == ('e6e7', 'b3c1', 'h6c1')
  assert first.opponent_moves == ('f2g3', 'b2b1', 'b1c1')
  assert first.start_board().turn == chess.WHITE
  # Every puzzle's start board, computed here with python-chess alone.
  assert [p.start_fen for p in got] == [_start_fen(r['FEN'], r['Moves'].split()[0]) for r in dev_rows]
  assert [p.lichess_row() for p in got] == dev_rows


def test_limit(dev):
  assert [p.puzzle_id for p in puzzles.read_puzzles(str(dev), limit=3)] == ['00008', '0000D', '0008Q']
  assert list(puzzles.read_puzzles(str(dev), limit=0)) == []


# The ChessBench puzzles.csv layout: PuzzleId,Rating,PGN,Solution,FEN,Moves; the board is the PGN's end.
CHESSBENCH_CSV = (
  'PuzzleId,Rating,PGN,Solution,FEN,Moves\n'
  'cb1,650,"1. e4 e5 2. Bc4 Nc6\n3. Qh5",Nf6 Qxf7#,,g8f6 h5f7\n'
  'cb2,1210,1. d4 d5 2. c4 e6 3. Nc3 Nf6 4. Bg5 Nbd7 5. cxd5 exd5,Nxd5 Bxd1 Bb4+,,c3d5 f6d5 g5d8 f8b4\n'
)


def test_reads_the_chessbench_layout_from_the_pgn(tmp_path):
  path = tmp_path / 'puzzles.csv'
  path.write_text(CHESSBENCH_CSV)
  first, second = puzzles.read_puzzles(str(path))
  board = chess.Board()
  for san in ('e4', 'e5', 'Bc4', 'Nc6', 'Qh5'):
    board.push_san(san)
  assert (first.puzzle_id, first.rating, first.themes) == ('cb1', 650, ())
  assert first.fen == board.fen()
  board.push_san('Nf6')
  assert first.start_fen == board.fen()
  assert first.solver_moves == ('h5f7',)
  board.push_uci('h5f7')
  assert board.is_checkmate()
  assert second.solver_moves == ('f6d5', 'f8b4') and second.opponent_moves == ('c3d5', 'g5d8')
  assert second.lichess_row() == {
    'PuzzleId': 'cb2',
    'FEN': second.fen,
    'Moves': 'c3d5 f6d5 g5d8 f8b4',
    'Rating': '1210',
    'RatingDeviation': '',
    'Popularity': '',
    'NbPlays': '',
    'Themes': '',
    'GameUrl': '',
    'OpeningTags': '',
  }


GOOD = (
  '00008,r6k/pp2r2p/4Rp1Q/3p4/8/1N1P2R1/PqP2bPP/7K b - - 0 24,f2g3 e6e7 b2b1 b3c1 b1c1 h6c1,1940,75,94,6608,crushing,u,'
)


@pytest.mark.parametrize(
  'header, bad, message',
  [
    (HEADER, 'x,not a fen,e2e4 e7e5,1500,1,1,1,t,u,', 'part of fen'),
    (HEADER, 'x,8/8/8/8/8/8/8/8 w - - 0 1,e2e4 e7e5,1500,1,1,1,t,u,', 'invalid position'),
    (
      HEADER,
      'x,r6k/pp2r2p/4Rp1Q/3p4/8/1N1P2R1/PqP2bPP/7K b - - 0 24,f2g3 e6e8,1500,1,1,1,t,u,',
      r"illegal move Moves\[1\]='e6e8'",
    ),
    (
      HEADER,
      'x,r6k/pp2r2p/4Rp1Q/3p4/8/1N1P2R1/PqP2bPP/7K b - - 0 24,f2g3 zz,1500,1,1,1,t,u,',
      r"illegal move Moves\[1\]='zz'",
    ),
    (
      HEADER,
      'x,r6k/pp2r2p/4Rp1Q/3p4/8/1N1P2R1/PqP2bPP/7K b - - 0 24,f2g3,1500,1,1,1,t,u,',
      'at least one solution move',
    ),
    (HEADER, 'x,r6k/pp2r2p/4Rp1Q/3p4/8/1N1P2R1/PqP2bPP/7K b - - 0 24,f2g3 e6e7,high,1,1,1,t,u,', "bad Rating 'high'"),
    (HEADER, 'x,r6k/pp2r2p/4Rp1Q/3p4/8/1N1P2R1/PqP2bPP/7K b - - 0 24,f2g3 e6e7', '3 fields, the header has 10'),
    ('PuzzleId,Rating,PGN,Moves', 'x,1500,1. e4 Ke7 Ke2,e2e3 e7e6', 'bad PGN'),
  ],
)
def test_a_bad_row_names_the_file_and_line(tmp_path, header, bad, message):
  path = tmp_path / 'bad.csv'
  good = GOOD if header == HEADER else 'y,1500,1. e4,e7e5 g1f3'
  path.write_text(f'{header}\n{good}\n{bad}\n{good}\n')
  reading = puzzles.read_puzzles(str(path))
  assert next(reading).puzzle_id in ('00008', 'y')
  with pytest.raises(puzzles.PuzzleFormatError, match=rf'^{re.escape(str(path))}:3: .*{message}'):
    next(reading)


def test_a_header_without_a_needed_column_is_named(tmp_path):
  path = tmp_path / 'nomoves.csv'
  path.write_text('PuzzleId,FEN,Rating\nx,8/8/8/8/8/8/8/K1k5 w - - 0 1,1500\n')
  with pytest.raises(puzzles.PuzzleFormatError, match=rf"^{re.escape(str(path))}:1: missing column\(s\) \['Moves'\]"):
    list(puzzles.read_puzzles(str(path)))


def test_line_numbers_count_multiline_fields_and_blank_lines(tmp_path):
  path = tmp_path / 'cb.csv'
  path.write_text(CHESSBENCH_CSV + '\ncb3,900,1. e4,,,e7e5 e1e3\n')
  with pytest.raises(puzzles.PuzzleFormatError, match=rf"^{re.escape(str(path))}:6: illegal move Moves\[1\]='e1e3'"):
    list(puzzles.read_puzzles(str(path)))
  assert len(list(puzzles.read_puzzles(str(path), limit=2))) == 2


# The pipeline: overlap of the puzzle start boards with a training set.
N, OVERLAP = 40, (3, 17, 31)  # Of the first N dev puzzles, these indices' start boards go into train.


def _with_clocks(fen: str, halfmove: int, fullmove: int) -> str:
  return ' '.join(fen.split()[:4] + [str(halfmove), str(fullmove)])


@pytest.fixture
def train(tmp_path, dev_rows) -> tuple[pathlib.Path, set[str]]:
  rows = dev_rows[:N]
  starts = [_start_fen(r['FEN'], r['Moves'].split()[0]) for r in rows]
  assert len({splits.dedup_key(f, 'position') for f in starts}) == N  # So overlap = len(OVERLAP) exactly.
  inside = [_with_clocks(starts[i], 7, 99) for i in OVERLAP]  # Clocks differ: still the same board.
  others = [r['FEN'] for r in rows] + [chess.STARTING_FEN]  # Boards before Moves[0]: not start boards.
  directory = tmp_path / 'train'
  directory.mkdir()
  assert (
    bags.write_records(
      str(directory / 'state_value_data.bag'), 'state_value', [(f, 0.5) for f in others[:20] + inside + others[20:]]
    )
    == N + 4
  )
  return directory, {rows[i]['PuzzleId'] for i in OVERLAP}


def _ids(path: pathlib.Path) -> list[str]:
  with open(path, newline='') as f:
    return [row['PuzzleId'] for row in csv.DictReader(f)]


def test_pipeline_reports_the_overlap(tmp_path, dev, dev_rows, train):
  directory, _ = train
  out = tmp_path / 'eval' / 'puzzles.csv'
  summary = pipeline.run(str(dev), str(out), train_dir=str(directory), limit=N, progress=False)
  assert summary.puzzles_read == summary.puzzles_kept == N
  assert summary.start_boards_in_train == len(OVERLAP)
  assert summary.start_boards_in_train_percent == pytest.approx(100 * len(OVERLAP) / N)
  assert summary.removed == 0
  assert summary.train == {
    'spec': str(directory / 'state_value_data.bag'),
    'kind': 'state_value',
    'records': N + 4,
    'boards': N + 4,
  }
  assert json.loads((tmp_path / 'eval' / 'puzzles.csv.json').read_text()) == summary.to_dict()
  with open(out, newline='') as f:
    assert list(csv.DictReader(f)) == dev_rows[:N]


def test_pipeline_removes_the_overlap(tmp_path, dev, dev_rows, train, capsys):
  directory, overlapping = train
  out = tmp_path / 'kept.csv'
  command.main(
    [
      '--puzzles',
      str(dev),
      '--out',
      str(out),
      '--train_dir',
      str(directory),
      '--num',
      str(N),
      '--remove_train_overlap',
      '--no_progress',
    ]
  )
  assert _ids(out) == [r['PuzzleId'] for r in dev_rows[:N] if r['PuzzleId'] not in overlapping]
  summary = json.loads((tmp_path / 'kept.csv.json').read_text())
  assert (summary['puzzles_read'], summary['puzzles_kept'], summary['removed']) == (N, N - 3, 3)
  printed = capsys.readouterr().out
  assert f'{N} read, {N - 3} kept' in printed and '3 (7.50%), removed 3' in printed


def test_action_value_boards_count_once_and_the_kind_comes_from_the_name(tmp_path, dev, dev_rows):
  rows = dev_rows[:N]
  start = _start_fen(rows[5]['FEN'], rows[5]['Moves'].split()[0])
  moves = [m.uci() for m in chess.Board(start).legal_moves]
  items = [(start, m, 0.5) for m in moves] + [(chess.STARTING_FEN, 'e2e4', 0.5), (start, moves[0], 0.5)]
  bags.write_records(str(tmp_path / 'action_value-00000-of-00001_data.bag'), 'action_value', items)
  summary = pipeline.run(
    str(dev),
    str(tmp_path / 'o.csv'),
    limit=N,
    progress=False,
    train_dir=str(tmp_path / 'action_value-*_data.bag'),
    remove_train_overlap=True,
  )
  assert summary.train['kind'] == 'action_value'
  assert (summary.train['records'], summary.train['boards']) == (len(items), 3)
  assert (summary.start_boards_in_train, summary.removed, summary.puzzles_kept) == (1, 1, N - 1)
  assert rows[5]['PuzzleId'] not in _ids(tmp_path / 'o.csv')


def test_train_spec_errors(tmp_path):
  bags.write_records(str(tmp_path / 'boards.bag'), 'state_value', [(chess.STARTING_FEN, 0.5)])
  with pytest.raises(ValueError, match='pass --train_kind'):
    pipeline.train_spec(str(tmp_path / 'boards.bag'))
  assert pipeline.train_spec(str(tmp_path / 'boards.bag'), 'state_value') == (
    str(tmp_path / 'boards.bag'),
    'state_value',
  )
  with pytest.raises(FileNotFoundError, match='no state_value/behavioral_cloning/action_value records'):
    pipeline.train_spec(str(tmp_path))
  with pytest.raises(ValueError, match='needs --train_dir'):
    pipeline.run('p.csv', str(tmp_path / 'o.csv'), remove_train_overlap=True)


def test_the_command_fails_with_one_line(tmp_path, capsys):
  (tmp_path / 'p.csv').write_text('PuzzleId,FEN,Moves,Rating\n')
  with pytest.raises(SystemExit) as exit:
    command.main(['--puzzles', str(tmp_path / 'p.csv'), '--out', str(tmp_path / 'o.csv'), '--remove_train_overlap'])
  assert exit.value.code == 2
  assert capsys.readouterr().err == 'error: --remove_train_overlap needs --train_dir\n'


def test_without_a_training_set_the_set_is_copied(tmp_path, dev, dev_rows):
  summary = pipeline.run(str(dev), str(tmp_path / 'all.csv'), progress=False)
  assert (summary.puzzles_read, summary.puzzles_kept, summary.train, summary.start_boards_in_train) == (
    1500,
    1500,
    None,
    None,
  )
  assert _ids(tmp_path / 'all.csv') == [r['PuzzleId'] for r in dev_rows]


def test_compressed_input_and_output_with_a_bom_and_crlf(tmp_path, dev, dev_rows):
  import gzip

  path = tmp_path / 'puzzles.csv.gz'
  path.write_bytes(gzip.compress(b'\xef\xbb\xbf' + dev.read_bytes().replace(b'\n', b'\r\n')))
  assert [p.lichess_row() for p in puzzles.read_puzzles(str(path), limit=5)] == dev_rows[:5]
  pipeline.run(str(path), str(tmp_path / 'out.csv.gz'), limit=5, progress=False)
  assert gzip.decompress((tmp_path / 'out.csv.gz').read_bytes()).decode() == ''.join(
    line + '\n' for line in dev.read_text().splitlines()[:6]
  )


def test_bytes_that_are_not_utf8_are_named_by_line(tmp_path):
  path = tmp_path / 'latin1.csv'
  path.write_bytes(f'{HEADER}\n{GOOD}\n'.encode() + GOOD.replace('crushing', 'cr\xe9').encode('latin-1') + b'\n')
  with pytest.raises(puzzles.PuzzleFormatError, match=rf'^{re.escape(str(path))}:3: not UTF-8 text'):
    list(puzzles.read_puzzles(str(path)))
