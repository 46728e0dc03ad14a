"""Opening sets (searchless.evaluation.openings): readers, writers, Stockfish-made openings and the CLI."""

import csv
import dataclasses

import chess
import chess.engine
import pytest

from searchless.commands import openings as openings_command
from searchless.evaluation import openings

AMAR_FEN = 'rnbqkbnr/pppppppp/8/8/8/7N/PPPPPPPP/RNBQKB1R b KQkq - 1 1'  # After 1. Nh3 (g1h3).


# --- Readers -----------------------------------------------------------------------------------------


def test_reads_the_real_lichess_tsv(shared_data):
  path = shared_data / 'openings' / 'a.tsv'
  with open(path, newline='') as f:
    rows = list(csv.reader(f, delimiter='\t'))
  assert len(rows) == 818 and rows[0] == ['eco', 'name', 'pgn']  # Header + 817 openings.
  got = openings.read_openings(path)
  # One row is a finished game ('Barnes Opening: Fool's Mate', 1. f3 e5 2. g4 Qh4#): left out.
  assert len(got) == 816
  assert "Fool's Mate" not in ' '.join(o.name for o in got)
  assert got[0] == openings.Opening('Amar Opening', AMAR_FEN, ('g1h3',), 'A00')
  assert got[0].title == 'A00 Amar Opening'
  paris = got[1]  # 1. Nh3 d5 2. g3 e5 3. f4
  assert paris.name == 'Amar Opening: Paris Gambit'
  assert paris.moves == ('g1h3', 'd7d5', 'g2g3', 'e7e5', 'f2f4')
  # No en passant capture is legal after f4, so python-chess' FEN has '-', not 'f3'.
  assert paris.fen == 'rnbqkbnr/ppp2ppp/8/3pp3/5P2/6PN/PPPPP2P/RNBQKB1R b KQkq - 0 3'
  assert paris.board().move_stack == [chess.Move.from_uci(m) for m in paris.moves]


def test_reads_all_five_real_tsv_files(shared_data):
  counts = {p.stem: len(openings.read_openings(p)) for p in sorted((shared_data / 'openings').glob('*.tsv'))}
  assert counts == {'a': 816, 'b': 769, 'c': 1249, 'd': 614, 'e': 357}  # 3807 rows, 2 of them mates.


def test_reads_a_hand_written_pgn(tmp_path):
  path = tmp_path / 'set.pgn'
  path.write_text(
    '[Event "?"]\n[ECO "C20"]\n[Opening "King\'s Pawn Game"]\n\n1. e4 e5 *\n\n'
    '[Event "endgame"]\n[SetUp "1"]\n[FEN "4k3/8/8/8/8/8/4P3/4K3 w - - 0 1"]\n\n1. e4 Kd7 *\n\n'
    '1. d4 d5 *\n'
  )
  a, b, c = openings.read_openings(path)
  assert a == openings.Opening(
    "King's Pawn Game", 'rnbqkbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - 0 2', ('e2e4', 'e7e5'), 'C20'
  )
  # From a FEN start: only the end position is kept.
  assert b == openings.Opening('endgame', '8/3k4/8/8/4P3/8/8/4K3 w - - 1 2', (), '')
  assert b.board().fen() == b.fen and b.board().move_stack == []
  assert c.name == 'set.pgn #3' and c.moves == ('d2d4', 'd7d5')


def test_reads_a_hand_written_epd(tmp_path):
  path = tmp_path / 'set.epd'
  path.write_text(
    '# two positions\n'
    'rnbqkbnr/pppppppp/8/8/8/7N/PPPPPPPP/RNBQKB1R b KQkq - id "Amar"; eco "A00";\n'
    '\n'
    '4k3/8/8/8/8/8/4P3/4K3 w - -\n'
  )
  amar, endgame = openings.read_openings(path)
  assert amar == openings.Opening('Amar', 'rnbqkbnr/pppppppp/8/8/8/7N/PPPPPPPP/RNBQKB1R b KQkq - 0 1', (), 'A00')
  assert endgame == openings.Opening('set.epd:4', '4k3/8/8/8/8/8/4P3/4K3 w - - 0 1', (), '')


@pytest.mark.parametrize(
  'name, text, where',
  [
    ('bad.tsv', 'eco\tname\tpgn\nA00\tAmar\t1. Nh3\nA00\tBroken\t1. Nh3 Ke7\n', ':3:'),
    ('bad.tsv', 'eco\tname\tpgn\nA00\tAmar\t1. Nh3\nA00\tno pgn column\n', ':3:'),
    ('bad.tsv', 'name\tpgn\nAmar\t1. Nh3\n', ':1:'),
    ('bad.epd', '4k3/8/8/8/8/8/4P3/4K3 w - -\nnot a position at all\n', ':2:'),
    ('bad.epd', '4k3/8/8/8/8/8/4P3/4K3 w - -\n\n4k3/8/8/8/8/8/8/4K2K w - -\n', ':3:'),  # Two white kings.
    ('bad.pgn', '[Event "a"]\n\n1. e4 *\n\n[Event "b"]\n\n1. e4 e4 *\n', ':5:'),
  ],
)
def test_malformed_lines_name_file_and_line(tmp_path, name, text, where):
  path = tmp_path / name
  path.write_text(text)
  with pytest.raises(ValueError, match=f'{path}{where}'):
    openings.read_openings(path)


CHESS960 = (
  '[Event "960"]\n[Variant "Chess960"]\n[FEN "bqnbrkrn/pppppppp/8/8/8/8/PPPPPPPP/BQNBRKRN w GEge - 0 1"]\n\n'
  '1. g4 O-O *\n'
)


@pytest.mark.parametrize(
  'text, message',
  [
    ('[Event "a"]\n\n1. e4 *\n\n' + CHESS960, r':5: a Chess960 game: openings are standard chess'),
    (
      '[Event "a"]\n[FEN "4k3/8/8/8/8/8/8/K3K3 w - - 0 1"]\n\n*\n',
      r':1: the start position is not legal chess \(too many kings\)',
    ),
    ('[Event "a"]\n\n1. e4 Ke7 *\n', r":1: bad game: illegal san: 'Ke7'"),
  ],
)
def test_a_pgn_game_that_is_no_standard_opening_is_an_error_naming_its_line_and_logs_nothing(
  tmp_path, caplog, text, message
):
  path = tmp_path / 'set.pgn'
  path.write_text(text)
  with pytest.raises(ValueError, match=f'{path}{message}'):
    openings.read_openings(path)
  assert not caplog.records  # python-chess's own log line of a parse error is not shown.


def test_reader_errors(tmp_path):
  with pytest.raises(ValueError, match='unknown openings format'):
    openings.read_openings(tmp_path / 'set.csv')
  with pytest.raises(FileNotFoundError):
    openings.read_openings(tmp_path / 'missing.epd')
  (tmp_path / 'empty.epd').write_text('\n')
  with pytest.raises(ValueError, match='no openings'):
    openings.read_openings(tmp_path / 'empty.epd')


def test_write_and_read_back(tmp_path):
  made = [
    openings.opening_from_san('1. e4 c5 2. Nf3', name='Sicilian "Open"', eco='B27'),
    openings.Opening('endgame', '8/3k4/8/8/4P3/8/8/4K3 w - - 1 2'),
  ]
  assert openings.write_openings(made, tmp_path / 'x.pgn') == 2
  assert openings.read_openings(tmp_path / 'x.pgn') == made
  assert openings.write_openings(made, tmp_path / 'x.epd') == 2
  back = openings.read_openings(tmp_path / 'x.epd')  # EPD keeps positions, names and ECO, not moves or clocks.
  assert [(o.name, o.eco, o.moves) for o in back] == [('Sicilian "Open"', 'B27', ()), ('endgame', '', ())]
  assert [chess.Board(o.fen).epd() for o in back] == [chess.Board(o.fen).epd() for o in made]
  with pytest.raises(ValueError, match='.epd or .pgn'):
    openings.write_openings(made, tmp_path / 'x.tsv')


def test_sample_is_seeded_and_keeps_order():
  items = [openings.Opening(str(i), chess.STARTING_FEN) for i in range(50)]
  a = openings.sample_openings(items, 10, seed=3)
  assert a == openings.sample_openings(items, 10, seed=3) != openings.sample_openings(items, 10, seed=4)
  assert len(a) == 10 and [int(o.name) for o in a] == sorted(int(o.name) for o in a)
  assert openings.sample_openings(items, 99) == items


# --- Made with Stockfish -----------------------------------------------------------------------------


@pytest.mark.engine
def test_make_openings_is_deterministic_balanced_and_unique(stockfish):
  options = openings.MakeOptions(plies=6, seed=7, engine_path=stockfish, limit='nodes=1000', max_eval_cp=60)
  made = openings.make_openings(6, options)
  assert made == openings.make_openings(6, options)
  assert openings.make_openings(3, options) == made[:3]
  assert made != openings.make_openings(6, dataclasses.replace(options, seed=8))
  assert len({chess.Board(o.fen).epd() for o in made}) == 6
  with chess.engine.SimpleEngine.popen_uci(stockfish) as engine:
    engine.configure({'Threads': 1, 'Hash': 16})
    for opening in made:
      board = opening.board()
      assert len(opening.moves) == 6 and board.fen() == opening.fen and not board.is_game_over()
      assert opening.name == chess.Board().variation_san(board.move_stack)
      # The final evaluation is a fresh search at the same node limit: reproducible exactly.
      score = engine.analyse(board, chess.engine.Limit(nodes=1000), game=object())['score'].white()
      assert not score.is_mate() and abs(score.score()) <= 60, (opening, score)


@pytest.mark.engine
def test_make_openings_gives_up_with_a_clear_error(stockfish):
  with pytest.raises(ValueError, match='only 0 of 2 balanced openings after 3 lines'):
    openings.make_openings(
      2,
      openings.MakeOptions(
        plies=2, engine_path=stockfish, limit='nodes=200', max_eval_cp=0, window_cp=0, max_attempts=3
      ),
    )


# --- CLI -----------------------------------------------------------------------------------------------


@pytest.mark.engine
def test_cli_makes_openings(tmp_path, stockfish, capsys):
  out = tmp_path / 'made.epd'
  openings_command.main(['--out', str(out), '--num', '3', '--seed', '1', '--limit', 'nodes=500', '--engine', stockfish])
  assert capsys.readouterr().out == f'wrote 3 openings to {out}\n'
  made = openings.read_openings(out)
  assert len(made) == 3 and all(o.name.startswith('1. ') for o in made)


def test_cli_samples_an_existing_set(tmp_path, shared_data, capsys):
  out = tmp_path / 'sample.pgn'
  openings_command.main(
    ['--from', str(shared_data / 'openings' / 'a.tsv'), '--sample', '5', '--seed', '2', '--out', str(out)]
  )
  assert capsys.readouterr().out == f'wrote 5 openings to {out}\n'
  everything = openings.read_openings(shared_data / 'openings' / 'a.tsv')
  assert openings.read_openings(out) == openings.sample_openings(everything, 5, seed=2)


@pytest.mark.parametrize(
  'argv, message',
  [
    (['--out', 'x.epd'], 'give --num N'),
    (['--out', 'x.txt', '--num', '2'], '--out must end in .epd or .pgn'),
    (['--out', 'x.epd', '--num', '2', '--from', 'y.epd'], 'not both'),
    (['--out', 'x.epd', '--from', 'missing.epd'], 'openings file not found: missing.epd'),
    (['--out', 'x.epd', '--num', '2', '--limit', 'nodes=-1'], 'bad engine limit'),
  ],
)
def test_cli_errors_are_one_line(tmp_path, monkeypatch, capsys, argv, message):
  monkeypatch.chdir(tmp_path)
  with pytest.raises(SystemExit) as exit_info:
    openings_command.main(argv)
  assert exit_info.value.code == 2
  err = capsys.readouterr().err
  assert err.startswith('error: ') and message in err and err.count('\n') == 1
