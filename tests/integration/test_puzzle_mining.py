"""Puzzle mining: known tactics found, the Lichess CSV round trip, determinism, splits, errors."""

import chess
import pytest

from searchless.play import agents
from searchless.data import splits as splits_lib
from searchless.data import pgn
from searchless.evaluation import puzzles as puzzle_eval
from searchless.commands import mine_puzzles
from searchless.engines import launch
from searchless.evaluation import mined_puzzles
from searchless.evaluation import puzzle_mining
from searchless.data import puzzles as puzzles_lib

# White to move after 3...Nf6?? has the only mate, Qxf7#.
SCHOLAR = """[Event "scholar"]
[Site "{site}"]
[Result "1-0"]

1. e4 e5 2. Bc4 Nc6 3. Qh5 Nf6 4. Qxf7# 1-0
"""
SCHOLAR_FEN = 'r1bqkbnr/pppp1ppp/2n5/4p2Q/2B1P3/8/PPPP1PPP/RNB1K1NR b KQkq - 3 3'  # Before 3...Nf6.
# Black's queen leaves d8's guard (...Qc3??): Rd8+ Rxd8 Rxd8# is the only win (Black is a queen up).
BACK_RANK_FEN = 'r5k1/2q2ppp/8/8/8/8/3R1PPP/3R2K1 b - - 0 1'
BACK_RANK = f"""[Event "back rank"]
[Site "https://lichess.org/backrank"]
[SetUp "1"]
[FEN "{BACK_RANK_FEN}"]
[Result "1-0"]

1... Qc3 2. Rd8+ Rxd8 3. Rxd8# 1-0
"""


def scholar(site: str = 'https://lichess.org/scholar1') -> str:
  return SCHOLAR.format(site=site)


def _mine(games, stockfish: str, **options) -> list[mined_puzzles.MinedPuzzle]:
  """The puzzles `puzzle_mining.mine` finds in `games` with `options`, no progress bar."""
  options = puzzle_mining.MiningOptions(engine_path=stockfish, progress=False, **options)
  return puzzle_mining.mine(games, options)[0]


def board_after(fen: str, *moves: str) -> chess.Board:
  board = chess.Board(fen)
  for uci in moves:
    board.push_uci(uci)
  return board


@pytest.fixture
def tactics(tmp_path):
  path = tmp_path / 'tactics.pgn'
  path.write_text(scholar() + '\n' + BACK_RANK)
  return path


@pytest.fixture(scope='module')
def mined(tmp_path_factory, stockfish) -> list[mined_puzzles.MinedPuzzle]:
  path = tmp_path_factory.mktemp('mined') / 'tactics.pgn'
  path.write_text(scholar() + '\n' + BACK_RANK)
  return _mine([str(path)], stockfish, split='all')


def test_default_test_fraction_is_the_annotation_pipelines():
  from searchless.pipelines import annotate as annotate_pipeline

  assert mine_puzzles._parser().get_default('test_fraction') == annotate_pipeline._parser().get_default('test_fraction')


def test_games_of_a_split_are_those_the_pipeline_puts_there(tmp_path):
  # Lichess URLs key games by Site, the others by a hash of their text (as the pipeline does).
  texts = [scholar(f'https://lichess.org/g{i:03d}') for i in range(30)]
  texts += [scholar(f'local {i}') for i in range(10)]
  path = tmp_path / 'games.pgn'
  path.write_text('\n'.join(texts))
  keys = [g.key for g in map(pgn.parse_game, pgn.iter_raw_games(str(path)))]
  assert len(set(keys)) == 40 and sum(k.startswith('sha1:') for k in keys) == 10
  for split in ('test', 'train'):
    stats = puzzle_mining.MiningStats()
    selected = [g.key for g in puzzle_mining._select_games([str(path)], split, 0.5, stats)]
    assert selected == [k for k in keys if splits_lib.split_of(k, 0.5) == split]
    assert 0 < len(selected) < 40
    assert stats.games_selected + stats.games_other_split == stats.games_read == 40
  stats = puzzle_mining.MiningStats()
  assert len(list(puzzle_mining._select_games([str(path)], 'all', 0.5, stats))) == 40


def test_candidates_skip_game_over_forced_and_repeated_boards():
  game = puzzle_mining._SelectedGame(
    'k', 'site', chess.STARTING_FEN, tuple(chess.Move.from_uci(m) for m in 'e2e4 e7e5 d1h5 b8c6 f1c4 g8f6 h5f7'.split())
  )
  stats = puzzle_mining.MiningStats()
  positions = puzzle_mining._positions([game, game], stats)
  assert [p.setup.uci() for p in positions] == 'e2e4 e7e5 d1h5 b8c6 f1c4 g8f6'.split()
  assert positions[-1].game_url == 'site#6' and positions[-1].fen == SCHOLAR_FEN
  assert (stats.positions_terminal, stats.positions_duplicate) == (2, 6)


@pytest.mark.engine
def test_mines_exactly_the_known_tactics(mined):
  assert [(p.fen, p.moves) for p in mined] == [
    (SCHOLAR_FEN, ('g8f6', 'h5f7')),
    (BACK_RANK_FEN, ('c7c3', 'd2d8', 'a8d8', 'd1d8')),  # Extended to the second solver move.
    (board_after(BACK_RANK_FEN, 'c7c3', 'd2d8').fen(), ('a8d8', 'd1d8')),
  ]
  scholar_puzzle, back_rank, _ = mined
  assert scholar_puzzle.themes == ('mate', 'mateIn1', 'mined', 'oneMove', 'onlyMove')
  assert back_rank.themes == ('mate', 'mateIn2', 'mined', 'onlyMove', 'short')
  assert scholar_puzzle.game_url == 'https://lichess.org/scholar1#6'
  assert back_rank.game_url == 'https://lichess.org/backrank#1'
  for p in mined:
    assert p.rating == mined_puzzles.rating_of_depth(p.depth) and 1 <= p.depth <= 13
    assert p.best_win_prob == 1.0 and p.best_win_prob - p.second_win_prob >= 0.3
    assert p.puzzle_id == mined_puzzles.puzzle_id(p.fen, p.moves)


@pytest.mark.engine
def test_one_solver_move_at_most(tactics, stockfish):
  mined = _mine(str(tactics), stockfish, split='all', max_solver_moves=1)
  assert [p.moves for p in mined] == [('g8f6', 'h5f7'), ('c7c3', 'd2d8'), ('a8d8', 'd1d8')]
  assert mined[1].themes == ('mined', 'oneMove', 'onlyMove')  # Rd8+ alone does not mate.
  assert [p.moves for p in _mine(str(tactics), stockfish, split='all', max_puzzles=1)] == [('g8f6', 'h5f7')]


@pytest.mark.engine
def test_min_swing_keeps_only_setup_moves_that_are_mistakes(tactics, stockfish):
  # Before 2...Rxd8 (forced) White already mates: no swing. The other two setup moves blunder.
  mined = _mine(str(tactics), stockfish, split='all', min_swing=0.3)
  assert [p.fen for p in mined] == [SCHOLAR_FEN, BACK_RANK_FEN]


@pytest.mark.engine
def test_csv_round_trips_through_the_puzzle_reader(mined, tmp_path):
  path = tmp_path / 'out' / 'puzzles.csv'
  mined_puzzles.write_csv(mined, path)
  assert path.read_text().splitlines()[0] == ','.join(puzzles_lib.LICHESS_COLUMNS)
  read = list(puzzles_lib.read_puzzles(str(path)))
  assert [(p.puzzle_id, p.fen, p.moves, p.rating, p.themes) for p in read] == [
    (p.puzzle_id, p.fen, p.moves, p.rating, p.themes) for p in mined
  ]
  assert read[0].start_fen == board_after(SCHOLAR_FEN, 'g8f6').fen()
  assert read[1].start_fen == board_after(BACK_RANK_FEN, 'c7c3').fen()
  assert read[1].solver_moves == ('d2d8', 'd1d8')
  assert read[0].row['GameUrl'] == 'https://lichess.org/scholar1#6'


@pytest.mark.engine
def test_stockfish_solves_the_mined_puzzles(mined, tmp_path):
  path = tmp_path / 'puzzles.csv'
  mined_puzzles.write_csv(mined, path)
  agent = agents.from_spec('stockfish:nodes=20000')
  try:
    results = [puzzle_eval.solve(p, agent) for p in puzzles_lib.read_puzzles(str(path))]
  finally:
    agent.close()
  assert [r.solved for r in results] == [True, True, True]


@pytest.mark.engine
def test_output_is_deterministic(tactics, stockfish, tmp_path):
  outputs = []
  for run, workers in enumerate((1, 1, 2)):
    puzzles = _mine([str(tactics)], stockfish, split='all', workers=workers)
    path = tmp_path / f'run{run}.csv'
    mined_puzzles.write_csv(puzzles, path)
    outputs.append(path.read_bytes())
  assert outputs[0] == outputs[1] == outputs[2]
  assert outputs[0].count(b'\n') == 4


@pytest.mark.engine
def test_only_games_of_the_chosen_split_give_puzzles(tmp_path, stockfish):
  # The same game under many keys: puzzles are de-duplicated, so the first game of the split gives it.
  sites = [f'https://lichess.org/s{i:03d}' for i in range(12)]
  splits = [splits_lib.split_of(site, 0.5) for site in sites]
  assert 'test' in splits and 'train' in splits
  path = tmp_path / 'games.pgn'
  path.write_text('\n'.join(scholar(site) for site in sites))
  for split in ('test', 'train'):
    mined = _mine(str(path), stockfish, split=split, test_fraction=0.5)
    assert [p.game_url for p in mined] == [sites[splits.index(split)] + '#6']
  assert _mine(str(path), stockfish, test_fraction=0.0) == []


@pytest.mark.engine
def test_cli_reports_and_writes(tactics, stockfish, tmp_path, capsys):
  out = tmp_path / 'p.csv'
  mine_puzzles.main(
    ['--games', str(tactics), '--out', str(out), '--split', 'all', '--engine_path', stockfish, '--no_progress']
  )
  stdout = capsys.readouterr().out
  assert 'positions: 8 scanned' in stdout
  assert stdout.splitlines()[-1] == f'puzzles: 3 -> {out}'
  assert len(list(puzzles_lib.read_puzzles(str(out)))) == 3


@pytest.mark.parametrize(
  'argv, message',
  [
    (['--games', '/no/such.pgn'], "--games '/no/such.pgn' matches no file"),
    (['--engine_path', '/no/stockfish'], "--engine_path '/no/stockfish' is not an executable"),
    (['--limit', 'nodes=0'], 'bad engine limit'),
    (['--test_fraction', '1.5'], 'test_fraction must be in [0, 1]'),
    (['--max_solver_moves', '0'], 'max_solver_moves must be >= 1'),
    (['--min_swing', '-0.1'], 'min_swing must be in [0, 1]'),
  ],
)
def test_cli_errors(argv, message, tactics, tmp_path, capsys):
  args = ['--games', str(tactics), '--out', str(tmp_path / 'p.csv'), '--no_progress']
  with pytest.raises(SystemExit) as exit_info:
    mine_puzzles.main(args + argv)
  assert exit_info.value.code == 2
  err = capsys.readouterr().err.strip()
  assert err.startswith('error: ') and message in err and '\n' not in err
  assert not (tmp_path / 'p.csv').exists()


def test_cli_error_without_stockfish(tactics, tmp_path, capsys, monkeypatch):
  monkeypatch.setattr(launch, 'find_stockfish', lambda: None)
  with pytest.raises(SystemExit) as exit_info:
    mine_puzzles.main(['--games', str(tactics), '--out', str(tmp_path / 'p.csv')])
  assert exit_info.value.code == 2
  assert capsys.readouterr().err.startswith('error: Stockfish not found: ')
