"""Self-play game generation (searchless.data.selfplay, searchless.pipelines.selfplay) and the bundled sample games."""

import collections
import io
import random

import chess
import chess.engine
import chess.pgn
import pytest

import helpers

from searchless.data import pgn
from searchless.data import selfplay
from searchless.engines import launch
from searchless.pipelines import selfplay as selfplay_pipeline

SAMPLE_GAMES = helpers.SAMPLE_GAMES
SAMPLE_PLAYER = 'Stockfish 15.1 (nodes=10000, multipv=4, temperature=50cp)'


def _pgn(game: chess.pgn.Game) -> str:
  return game.accept(chess.pgn.StringExporter())


def _read_all(text: str) -> list[chess.pgn.Game]:
  stream, games = io.StringIO(text), []
  while (game := chess.pgn.read_game(stream)) is not None:
    games.append(game)
  return games


# --- Pure functions (no engine) ---------------------------------------------------------------


def test_random_opening_is_seeded_legal_and_not_over():
  for seed in range(50):
    moves = selfplay.random_opening(random.Random(seed), 8)
    assert moves == selfplay.random_opening(random.Random(seed), 8)
    assert len(moves) == 8
    board = chess.Board()
    for move in moves:
      assert board.is_legal(move)
      board.push(move)
    assert board.outcome(claim_draw=True) is None
  assert selfplay.random_opening(random.Random(0), 0) == []
  assert len({tuple(selfplay.random_opening(random.Random(s), 4)) for s in range(20)}) == 20


def test_random_opening_redraws_when_the_game_ends():
  # Fool's mate ends the game in 4 plies: an opening must never be a finished game.
  for seed in range(300):
    board = chess.Board()
    for move in selfplay.random_opening(random.Random(seed), 4):
      board.push(move)
    assert not board.is_game_over(claim_draw=True)
  with pytest.raises(ValueError):
    selfplay.random_opening(random.Random(0), -1)


def _info(uci: str, cp: int | None = None, mate: int | None = None) -> dict:
  score = chess.engine.Mate(mate) if mate is not None else chess.engine.Cp(cp)
  return {'pv': [chess.Move.from_uci(uci)], 'score': chess.engine.PovScore(score, chess.WHITE)}


def test_sample_move_softmax():
  infos = [_info('e2e4', 30), _info('d2d4', 20), _info('g1f3', -400)]
  rng = random.Random(0)
  assert selfplay.sample_move(infos, chess.WHITE, rng, 0) == chess.Move.from_uci('e2e4')
  counts = collections.Counter(
    selfplay.sample_move(infos, chess.WHITE, random.Random(s), 50).uci() for s in range(2000)
  )
  # Weights 1 : exp(-0.2) = 0.82 : exp(-8.6) ~ 0.0002, so g1f3 is practically never played.
  assert set(counts) == {'e2e4', 'd2d4'}
  assert 0.5 < counts['e2e4'] / counts['d2d4'] < 1.5
  # Scores are the mover's: for Black, White's +30 is the worst move.
  assert selfplay.sample_move(infos, chess.BLACK, rng, 0) == chess.Move.from_uci('g1f3')
  # A mate beats any centipawn score; a faster mate beats a slower one.
  mates = [_info('a2a3', 900), _info('h2h4', mate=3), _info('b2b3', mate=1)]
  assert selfplay.sample_move(mates, chess.WHITE, rng, 0) == chess.Move.from_uci('b2b3')
  with pytest.raises(chess.engine.EngineError):
    selfplay.sample_move([{}], chess.WHITE, rng, 50)


def test_adjudication_and_argument_checks():
  assert selfplay.Adjudication() == selfplay.Adjudication(max_plies=160, win_threshold_cp=800, win_plies=6)
  with pytest.raises(ValueError):
    selfplay.Adjudication(max_plies=0)
  with pytest.raises(ValueError):
    next(selfplay.play_games('/nonexistent', 1, seed=0, opening_plies=(5, 4)))
  with pytest.raises(ValueError):
    next(selfplay.play_games('/nonexistent', 1, seed=0, multipv=0))
  with pytest.raises(SystemExit):
    selfplay_pipeline._parser().parse_args(['--out', 'x.pgn', '--opening_plies', '8,4'])
  args = selfplay_pipeline._parser().parse_args(['--out', 'x.pgn', '--opening_plies', '2,6'])
  assert args.opening_plies == (2, 6)


# --- With the engine --------------------------------------------------------------------------

_SHORT = dict(limit=chess.engine.Limit(nodes=1000), max_plies=24, opening_plies=(4, 6))


@pytest.mark.engine
def test_same_seed_same_games(stockfish):
  first = [_pgn(g) for g in selfplay.play_games(stockfish, 2, seed=7, **_SHORT)]
  second = [_pgn(g) for g in selfplay.play_games(stockfish, 2, seed=7, **_SHORT)]
  assert first == second
  assert first[0] != first[1]
  # Game i does not depend on how many games are played, nor on the games before it.
  assert [_pgn(g) for g in selfplay.play_games(stockfish, 1, seed=7, **_SHORT)] == first[:1]
  other = [_pgn(g) for g in selfplay.play_games(stockfish, 2, seed=8, **_SHORT)]
  assert other[0] != first[0] and other[1] != first[1]


@pytest.mark.engine
def test_game_headers_and_rules(stockfish):
  games = list(selfplay.play_games(stockfish, 2, seed=3, **_SHORT))
  assert [g.headers['Site'] for g in games] == ['searchless:selfplay:3:0', 'searchless:selfplay:3:1']
  assert [g.headers['Round'] for g in games] == ['1', '2']
  for game in games:
    h = game.headers
    assert h['Event'] == 'searchless self-play'
    assert h['Date'] == '????.??.??'
    assert h['White'] == h['Black']
    assert h['White'].startswith('Stockfish') and h['White'].endswith('(nodes=1000, multipv=4, temperature=50cp)')
    moves = list(game.mainline_moves())
    assert h['PlyCount'] == str(len(moves))
    assert len(moves) <= 24
    opening = h['Opening'].split()
    opening_moves = [m for m in opening if not m.endswith('.')]
    assert 4 <= len(opening_moves) <= 6
    assert chess.Board().variation_san(moves[: len(opening_moves)]) == h['Opening']
    _check_result(game)


@pytest.mark.engine
def test_max_plies_draw(stockfish):
  # win_plies beyond max_plies: only the rules or the ply limit can end these games.
  games = list(
    selfplay.play_games(
      stockfish, 2, seed=0, limit=chess.engine.Limit(nodes=500), opening_plies=(4, 4), max_plies=10, win_plies=1000
    )
  )
  for game in games:
    board = game.end().board()
    if game.headers['Termination'] == 'adjudication':
      assert board.ply() == 10
      assert game.headers['Result'] == '1/2-1/2'
      assert game.end().comment == 'draw adjudicated after 10 plies'
    _check_result(game)


@pytest.mark.engine
def test_pipeline_writes_parsable_pgn(stockfish, tmp_path):
  out = tmp_path / 'sub' / 'games.pgn'
  summary = selfplay.run(str(out), num_games=2, seed=5, nodes=500, max_plies=16, engine_path=stockfish, progress=False)
  assert summary.games == 2 and summary.output == str(out)
  raws = list(pgn.iter_raw_games(str(out)))
  assert len(raws) == 2
  parsed = [pgn.parse_game(raw) for raw in raws]
  assert all(isinstance(g, pgn.Game) for g in parsed)
  assert sum(len(g.fens) - 1 for g in parsed) == summary.plies
  assert sum(summary.results.values()) == 2
  # Same as the library with the same settings.
  expected = [
    _pgn(g) for g in selfplay.play_games(stockfish, 2, seed=5, limit=chess.engine.Limit(nodes=500), max_plies=16)
  ]
  assert [_pgn(g) for g in _read_all(out.read_text())] == expected


def test_pipeline_without_engine_exits(tmp_path, capsys):
  with pytest.raises(launch.EngineNotFound, match='not found or not executable'):
    selfplay.run(str(tmp_path / 'x.pgn'), engine_path=str(tmp_path / 'no-engine'))
  with pytest.raises(SystemExit) as exit:
    selfplay_pipeline.main(['--out', str(tmp_path / 'x.pgn'), '--engine_path', str(tmp_path / 'no-engine')])
  assert exit.value.code == 2
  err = capsys.readouterr().err
  assert err.startswith('error: engine binary') and 'not found or not executable' in err and err.count('\n') == 1
  assert not (tmp_path / 'x.pgn').exists()


# --- The bundled sample games -----------------------------------------------------------------


def _check_result(game: chess.pgn.Game) -> None:
  """The result matches the final board when the rules ended the game; else it was adjudicated."""
  board = game.end().board()
  outcome = board.outcome(claim_draw=True)
  termination = game.headers['Termination']
  if termination == 'normal':
    assert outcome is not None
    assert game.headers['Result'] == outcome.result()
    assert game.end().comment == outcome.termination.name.lower().replace('_', ' ')
  else:
    assert termination == 'adjudication'
    assert outcome is None  # Adjudicated before the rules ended it.
    comment = game.end().comment
    assert comment.startswith(('White wins by adjudication', 'Black wins by adjudication', 'draw adjudicated after'))
    expected = {'W': '1-0', 'B': '0-1', 'd': '1/2-1/2'}[comment[0]]
    assert game.headers['Result'] == expected


@pytest.fixture(scope='module')
def sample_text() -> str:
  assert SAMPLE_GAMES.is_file(), f'{SAMPLE_GAMES} is missing: see searchless/samples/README.md to regenerate it'
  return SAMPLE_GAMES.read_text(encoding='utf-8')


def test_sample_games_parse_with_the_pipeline_reader(sample_text):
  parsed = [pgn.parse_game(raw) for raw in pgn.iter_raw_games(str(SAMPLE_GAMES))]
  skips = [p for p in parsed if isinstance(p, pgn.Skip)]
  assert skips == []
  assert len(parsed) == 50
  assert sum(len(g.fens) for g in parsed) == 5679  # Board states, final ones included.
  assert len({g.key for g in parsed}) == 50


def test_sample_games_headers(sample_text):
  games = _read_all(sample_text)
  assert len(games) == 50
  assert [g.headers['Site'] for g in games] == [f'searchless:selfplay:0:{i}' for i in range(50)]
  assert [g.headers['Round'] for g in games] == [str(i + 1) for i in range(50)]
  assert collections.Counter(g.headers['Result'] for g in games) == {'1-0': 20, '0-1': 18, '1/2-1/2': 12}
  assert sum(int(g.headers['PlyCount']) for g in games) == 5629
  for game in games:
    assert game.headers['Event'] == 'searchless self-play'
    assert game.headers['White'] == game.headers['Black'] == SAMPLE_PLAYER


def test_sample_games_legal_and_results_consistent(sample_text):
  terminations = collections.Counter()
  for game in _read_all(sample_text):
    assert game.errors == []
    board = chess.Board()
    moves = list(game.mainline_moves())
    for move in moves:
      assert board.is_legal(move)
      board.push(move)
    assert board.ply() == int(game.headers['PlyCount'])
    assert board.ply() <= 160
    opening = [m for m in game.headers['Opening'].split() if not m.endswith('.')]
    assert 4 <= len(opening) <= 8
    assert chess.Board().variation_san(moves[: len(opening)]) == game.headers['Opening']
    _check_result(game)
    terminations[game.end().comment.split(' (')[0]] += 1
  assert terminations == {
    'White wins by adjudication: eval >= 800 cp or mate for 6 plies': 20,
    'Black wins by adjudication: eval >= 800 cp or mate for 6 plies': 17,
    'draw adjudicated after 160 plies': 9,
    'threefold repetition': 2,
    'insufficient material': 1,
    'checkmate': 1,
  }
