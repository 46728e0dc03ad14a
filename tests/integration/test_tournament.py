"""Tournaments (searchless.evaluation.tournament): game rules with scripted agents, real engine games, resume, Elo."""

import io
import json
import os
import pathlib
import stat
import sys
import time

import chess
import chess.engine
import chess.pgn
import pytest

from helpers import FAKE_ENGINES

from searchless.commands import tournament as tournament_command
from searchless.engines import launch
from searchless.evaluation import openings
from searchless.evaluation import tournament
from searchless.play import agents

GARBAGE_UCI = FAKE_ENGINES / 'garbage_uci.py'
START = openings.Opening('start', chess.STARTING_FEN)
NO_EVAL = tournament.Adjudication(eval=False)
KNIGHT_DANCE = ['g1f3', 'g8f6', 'f3g1', 'f6g8'] * 3


class Scripted:
  """Plays a fixed list of moves (or whatever `move` returns); records the boards it is handed."""

  def __init__(self, name: str, moves=(), elo=None):
    self.name, self.moves, self.boards, self.closed = name, list(moves), [], False

  def play(self, board: chess.Board) -> chess.Move:
    self.boards.append(board)
    board.push(chess.Move.null())  # Agents get a copy: this must not touch the game.
    move = self.moves.pop(0)
    return chess.Move.from_uci(move) if isinstance(move, str) else move

  def close(self) -> None:
    self.closed = True


class Crashing(Scripted):
  def play(self, board: chess.Board) -> chess.Move:
    raise chess.engine.EngineTerminatedError('engine process died unexpectedly (exit code: -9)')


def _pair(white_moves, black_moves):
  return Scripted('W', white_moves), Scripted('B', black_moves)


def _pgn(game: chess.pgn.Game) -> chess.pgn.Game:
  """The game as a reader of the PGN file sees it."""
  return chess.pgn.read_game(io.StringIO(str(game)))


# --- Rules, with scripted agents -----------------------------------------------------------------------


def test_checkmate_and_headers():
  white, black = _pair(['f2f3', 'g2g4'], ['e7e5', 'd8h4'])
  game = _pgn(tournament.play_game(white, black, START, adjudication=NO_EVAL, round_number=3, date='2024.01.02'))
  assert dict(game.headers) == {
    'Event': 'searchless tournament',
    'Site': 'searchless',
    'Date': '2024.01.02',
    'Round': '3',
    'White': 'W',
    'Black': 'B',
    'Result': '0-1',
    'Opening': 'start',
    'PlyCount': '4',
    'Termination': 'normal',
  }
  assert game.end().comment == 'checkmate'
  assert [m.uci() for m in game.mainline_moves()] == ['f2f3', 'e7e5', 'g2g4', 'd8h4']


def test_agents_get_a_copy_with_the_move_history():
  opening = openings.opening_from_san('1. e4 e5', name='Open Game', eco='C20')
  white, black = _pair(['g1f3'], ['b8c6'])
  game = tournament.play_game(white, black, opening, adjudication=tournament.Adjudication(max_plies=2, eval=False))
  assert [len(b.move_stack) for b in white.boards + black.boards] == [2 + 1, 3 + 1]  # +1: the agent's own push.
  assert [m.uci() for m in black.boards[0].move_stack[:3]] == ['e2e4', 'e7e5', 'g1f3']
  assert game.headers['ECO'] == 'C20' and game.headers['Opening'] == 'Open Game'
  assert game.headers['Result'] == '1/2-1/2' and game.headers['Termination'] == 'max plies (2)'
  assert game.end().comment == 'draw after 2 plies'
  assert game.next().next().comment == 'end of opening' and game.headers['PlyCount'] == '4'
  assert 'FEN' not in game.headers


def test_illegal_move_loses():
  white, black = _pair(['e2e4', 'e1e3'], ['e7e5'])
  game = tournament.play_game(white, black, START, adjudication=NO_EVAL)
  assert game.headers['Result'] == '0-1'
  assert game.headers['Termination'] == 'illegal move by W: e1e3'
  assert game.headers['PlyCount'] == '2'
  white, black = _pair(['e2e4'], [None])  # No move at all.
  game = tournament.play_game(white, black, START, adjudication=NO_EVAL)
  assert (game.headers['Result'], game.headers['Termination']) == ('1-0', 'illegal move by B: None')


def test_crashing_agent_loses():
  game = tournament.play_game(Scripted('W', ['d2d4']), Crashing('B'), START, adjudication=NO_EVAL)
  assert game.headers['Result'] == '1-0'
  assert game.headers['Termination'] == (
    'engine crash: B: EngineTerminatedError: engine process died unexpectedly (exit code: -9)'
  )
  assert game.end().comment == game.headers['Termination']


@pytest.mark.engine
def test_an_engine_that_overruns_its_clock_loses_on_time(stockfish):
  hurried = agents.from_spec(f'uci:{stockfish},clock=0.001,name=hurried')  # 1 ms for the game.
  try:
    game = tournament.play_game(Scripted('W', ['d2d4']), hurried, START, adjudication=NO_EVAL)
  finally:
    hurried.close()
  assert (game.headers['Result'], game.headers['Termination']) == ('1-0', 'time forfeit')
  assert game.end().comment.startswith('hurried lost on time (')


def test_threefold_repetition_is_a_draw_unless_claims_are_off():
  white, black = _pair(KNIGHT_DANCE[0::2], KNIGHT_DANCE[1::2])
  game = tournament.play_game(white, black, START, adjudication=NO_EVAL)
  assert (game.headers['Result'], game.headers['Termination'], game.end().comment) == (
    '1/2-1/2',
    'normal',
    'threefold repetition',
  )
  assert game.headers['PlyCount'] == '8'  # The start position's third occurrence.
  white, black = _pair(KNIGHT_DANCE[0::2], KNIGHT_DANCE[1::2])
  no_claims = tournament.Adjudication(max_plies=10, claim_draws=False, eval=False)
  game = tournament.play_game(white, black, START, adjudication=no_claims)
  assert (game.headers['Termination'], game.headers['PlyCount']) == ('max plies (10)', '10')


def test_fifty_move_claim_and_fen_start():
  # Kings only would be insufficient material: a rook each keeps the game going; 99 quiet plies already.
  opening = openings.Opening('rooks', '4k3/r7/8/8/8/8/R7/4K3 w - - 99 80')
  white, black = _pair(['e1f1'], [])
  game = _pgn(tournament.play_game(white, black, opening, adjudication=NO_EVAL))
  assert (game.headers['Result'], game.end().comment) == ('1/2-1/2', 'fifty-move rule')
  assert game.headers['FEN'] == opening.fen and game.headers['SetUp'] == '1'
  mate = openings.Opening('queen', '7k/8/6K1/8/8/8/8/Q7 w - - 0 1')
  game = tournament.play_game(Scripted('W', ['a1a8']), Scripted('B'), mate, adjudication=NO_EVAL)
  assert (game.headers['Result'], game.end().comment, game.headers['PlyCount']) == ('1-0', 'checkmate', '1')


def test_schedule_rounds_colours_and_cycling():
  a, b, c = (tournament.Entrant(n, f'stockfish:nodes=1,name={n}') for n in 'ABC')
  ops = [openings.Opening(n, chess.STARTING_FEN) for n in ('o1', 'o2')]
  tasks = tournament.schedule([(a, b), (a, c)], ops, games_per_pair=5)
  assert [(t.round, t.white.name, t.black.name, t.opening.name) for t in tasks] == [
    (1, 'A', 'B', 'o1'),
    (1, 'A', 'C', 'o1'),
    (2, 'B', 'A', 'o1'),
    (2, 'C', 'A', 'o1'),
    (3, 'A', 'B', 'o2'),
    (3, 'A', 'C', 'o2'),
    (4, 'B', 'A', 'o2'),
    (4, 'C', 'A', 'o2'),
    (5, 'A', 'B', 'o1'),
    (5, 'A', 'C', 'o1'),
  ]
  assert len(tournament.schedule([(a, b)], ops)) == 4


def test_anchor_names_with_equals_signs():
  sf = tournament.Entrant('stockfish (nodes=1000)', 'stockfish:nodes=1000')
  ladder = tournament.Entrant('sf1350', 'stockfish:nodes=1000,elo=1350,name=sf1350', 1350)
  assert tournament.resolve_anchor('stockfish (nodes=1000)=2000', [sf, ladder]) == {'stockfish (nodes=1000)': 2000.0}
  assert tournament.resolve_anchor('stockfish (nodes=1000)', [sf, ladder]) == {'stockfish (nodes=1000)': 0.0}
  assert (
    tournament.resolve_anchor('ladder', [sf, ladder])
    == tournament.resolve_anchor('auto', [sf, ladder])
    == {'sf1350': 1350.0}
  )
  assert tournament.resolve_anchor('auto', [sf]) == tournament.resolve_anchor('none', [sf, ladder]) == {}
  with pytest.raises(ValueError, match='UCI_Elo'):
    tournament.resolve_anchor('ladder', [sf])
  with pytest.raises(ValueError, match='expected NAME'):
    tournament.resolve_anchor('nobody=3', [sf])


@pytest.mark.parametrize(
  'argv, message',
  [
    (['--agent', 'stockfish:nodes=1,name=X', '--agent', 'stockfish:nodes=2,name=X'], "'X' is the name of"),
    (['--agent', 'stockfish:nodes=1,name=X'], 'at least two --agent'),
    (['--agent', 'stockfish:nodes=1,name=X', '--agent', 'bogus:1'], 'bad agent'),
    (
      ['--agent', 'stockfish:nodes=1,name=X', '--agent', 'stockfish:nodes=2,name=Y', '--anchor', 'Z=1'],
      "--anchor 'Z=1'",
    ),
  ],
)
def test_cli_errors_are_one_line(tmp_path, capsys, argv, message):
  (tmp_path / 'o.epd').write_text(chess.Board().epd() + '\n')
  with pytest.raises(SystemExit) as exit_info:
    tournament_command.main(
      [*argv, '--openings', str(tmp_path / 'o.epd'), '--out', str(tmp_path / 'out'), '--no_progress']
    )
  assert exit_info.value.code == 2
  err = capsys.readouterr().err
  assert err.startswith('error: ') and message in err and err.count('\n') == 1
  assert not (tmp_path / 'out').exists()  # A failed run leaves no empty folder behind.


def test_a_program_that_is_no_uci_engine_is_one_line_soon_and_made_openings_are_not_left(tmp_path, capsys, stockfish):
  start = time.monotonic()
  with pytest.raises(SystemExit) as exit_info:
    tournament_command.main(
      [
        '--agent',
        'uci:/bin/cat,nodes=1',
        '--agent',
        'stockfish:nodes=100',
        '--make_openings',
        '2',
        '--engine_path',
        stockfish,
        '--out',
        str(tmp_path / 'out'),
        '--no_progress',
      ]
    )
  assert exit_info.value.code == 2
  assert capsys.readouterr().err == (
    f'error: \'/bin/cat\' is not a UCI engine: no "uciok" within {launch.HANDSHAKE_SECONDS:g} s\n'
  )
  assert time.monotonic() - start < 3 * launch.HANDSHAKE_SECONDS
  assert not (tmp_path / 'out').exists()  # Not even the openings it made.


def test_cli_needs_openings(tmp_path, capsys):
  with pytest.raises(SystemExit):
    tournament_command.main(
      ['--agent', 'stockfish:nodes=1,name=X', '--agent', 'stockfish:nodes=1,name=Y', '--out', str(tmp_path)]
    )
  assert 'give either --openings FILE... or --make_openings N' in capsys.readouterr().err


def _executable(path: pathlib.Path, text: str) -> str:
  path.write_text(text)
  path.chmod(path.stat().st_mode | stat.S_IEXEC)
  return str(path)


def test_worker_uci_illegal_move_and_crashed_engine_rebuilt(tmp_path):
  log = tmp_path / 'starts.log'
  # Answers every search with a2a3 (illegal for Black); the other one dies when asked to search.
  garbage = _executable(
    tmp_path / 'garbage.sh', f'#!/bin/sh\necho garbage >> {log}\nexec {sys.executable} {GARBAGE_UCI}\n'
  )
  dying = _executable(
    tmp_path / 'dying.py',
    f"""#!{sys.executable}
import sys
import time
open({str(log)!r}, 'a').write('dying\\n')
for line in sys.stdin:
  if line.strip() == 'uci':
    print('id name Dying\\nuciok', flush=True)
  elif line.strip() == 'isready':
    print('readyok', flush=True)
  elif line.startswith('go'):
    sys.exit(3)
""",
  )
  g1, g2, d = (
    tournament.Entrant(n, f'uci:{path},nodes=1,name={n}')
    for n, path in (('G1', garbage), ('G2', garbage), ('D', dying))
  )
  worker = tournament.Worker(NO_EVAL, 'test')
  try:
    games = [
      _pgn(chess.pgn.read_game(io.StringIO(worker.play(tournament.Task(1, w, b, START)))))
      for w, b in ((g1, g2), (d, g1), (g1, d))
    ]
    assert d not in worker.agents  # Closed after its crash (and rebuilt for the third game, then closed again).
  finally:
    worker.close()
  assert [(g.headers['Result'], g.headers['Termination']) for g in games] == [
    ('1-0', 'illegal move by G2: a2a3'),
    ('0-1', 'engine crash: D: EngineTerminatedError: engine process died unexpectedly (exit code: 3)'),
    ('1-0', 'engine crash: D: EngineTerminatedError: engine process died unexpectedly (exit code: 3)'),
  ]
  assert sorted(log.read_text().split()) == ['dying', 'dying', 'garbage', 'garbage']


# --- Real engines --------------------------------------------------------------------------------------


@pytest.mark.engine
def test_eval_adjudication_wins_and_draws(stockfish):
  # Queen and rook against a bare king: Stockfish finds the mate after White's first move.
  crushing = openings.Opening('queen and rook', 'k7/8/8/8/8/8/8/KQR5 w - - 0 1')
  adjudication = tournament.Adjudication(eval_engine=stockfish, eval_limit='nodes=2000')
  game = tournament.play_game(Scripted('W', ['a1a2']), Scripted('B'), crushing, adjudication=adjudication)
  assert game.headers['Result'] == '1-0' and game.headers['Termination'] == 'adjudication: White wins'
  assert game.end().comment == 'adjudication: White wins, White mates in 2'  # Was 'eval mate in 2 for White'.
  assert game.headers['PlyCount'] == '1'
  mirrored = openings.Opening('queen and rook, Black', 'K7/8/8/8/8/8/8/kqr5 w - - 0 1')
  game = tournament.play_game(Scripted('W', ['a8a7']), Scripted('B'), mirrored, adjudication=adjudication)
  assert game.headers['Result'] == '0-1'
  assert game.end().comment == 'adjudication: Black wins, Black mates in 2'  # Was 'eval mate in -2 for White'.
  # Opposite-coloured bishops, kings shuffling: drawn after 4 plies of |eval| < 10 cp (before any repetition).
  bishops = openings.Opening('bishops', '4k3/8/8/3b4/8/8/3B4/4K3 w - - 0 60')
  draw = tournament.Adjudication(eval_engine=stockfish, eval_limit='nodes=2000', win_cp=None, draw_cp=10, draw_plies=4)
  game = tournament.play_game(*_pair(['e1f1', 'f1e1'], ['e8f8', 'f8e8']), bishops, adjudication=draw)
  assert (game.headers['Result'], game.headers['Termination'], game.headers['PlyCount']) == (
    '1/2-1/2',
    'adjudication: draw',
    '4',
  )


def _counting_stockfish(tmp_path: pathlib.Path, stockfish: str) -> tuple[str, pathlib.Path]:
  """A Stockfish wrapper that logs every start (to count engine processes)."""
  log = tmp_path / 'starts.log'
  wrapper = tmp_path / 'stockfish.sh'
  wrapper.write_text(f'#!/bin/sh\necho start >> {log}\nexec {stockfish} "$@"\n')
  wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
  return str(wrapper), log


def _starts(log: pathlib.Path) -> int:
  return len(log.read_text().splitlines()) if log.exists() else 0


def _read_games(source) -> list[chess.pgn.Game]:
  """All games of a PGN path or text stream."""
  games = []
  with open(source) if isinstance(source, (str, os.PathLike)) else source as f:
    while (game := chess.pgn.read_game(f)) is not None:
      games.append(game)
  return games


@pytest.mark.engine
def test_stockfish_tournament_two_workers_then_resume(tmp_path, stockfish, shared_data, capsys):
  wrapper, log = _counting_stockfish(tmp_path, stockfish)
  out = tmp_path / 'out'
  argv = [
    '--agent',
    f'stockfish:nodes=1000,path={wrapper},name=sf-nodes1000',
    '--agent',
    f'stockfish:nodes=1000,elo=1350,path={wrapper},name=sf-elo1350',
    '--openings',
    str(shared_data / 'openings' / 'a.tsv'),
    '--games_per_pair',
    '4',
    '--seed',
    '0',
    '--workers',
    '2',
    '--out',
    str(out),
    '--max_plies',
    '60',
    '--engine_path',
    wrapper,
    '--no_progress',
  ]
  tournament_command.main(argv)
  stdout = capsys.readouterr().out
  # Two workers, each with both agents and an adjudicating engine.
  assert _starts(log) == 6
  games = _read_games(out / 'games.pgn')
  sampled = openings.sample_openings(openings.read_openings(shared_data / 'openings' / 'a.tsv'), 2, seed=0)
  assert [(g.headers['Round'], g.headers['White'], g.headers['Opening']) for g in games] == [
    ('1', 'sf-nodes1000', sampled[0].name),
    ('2', 'sf-elo1350', sampled[0].name),
    ('3', 'sf-nodes1000', sampled[1].name),
    ('4', 'sf-elo1350', sampled[1].name),
  ]
  for game in games:
    h = game.headers
    assert {h['White'], h['Black']} == {'sf-nodes1000', 'sf-elo1350'}
    assert h['Result'] in ('1-0', '0-1', '1/2-1/2') and h['Event'] == 'searchless tournament'
    opening = sampled[(int(h['Round']) - 1) // 2]
    assert h['ECO'] == opening.eco and 'FEN' not in h
    assert not game.errors and h['Termination'].split(':')[0] in ('normal', 'adjudication', 'max plies (60)')
    moves = [m.uci() for m in game.mainline_moves()]
    assert tuple(moves[: len(opening.moves)]) == opening.moves
    assert len(moves) <= len(opening.moves) + 60 and int(h['PlyCount']) == len(moves)
  results = json.loads((out / 'results.json').read_text())
  assert results['games'] == results['played_this_run'] == 4
  assert results['anchors'] == {'sf-elo1350': 1350.0}  # The UCI_Elo ladder.
  assert {p['name'] for p in results['elo']['players']} == {'sf-nodes1000', 'sf-elo1350'}
  assert results['elo_error'] is None and results['pairs'][0]['games'] == 4
  assert sum(results['terminations'].values()) == 4
  assert 'Rank Name' in stdout and 'sf-elo1350    1350    0    0     4' in stdout

  # A rerun plays nothing and starts no engine.
  before = (out / 'games.pgn').read_text()
  tournament_command.main(argv)
  assert _starts(log) == 6
  assert (out / 'games.pgn').read_text() == before
  assert json.loads((out / 'results.json').read_text())['played_this_run'] == 0

  # A crash that cut the last game: it is dropped and replayed, the others kept.
  text = before.rstrip('\n')
  (out / 'games.pgn').write_text(text[: len(text) - 40])
  tournament_command.main(argv)
  err = capsys.readouterr().err
  assert 'dropped 1 incomplete game(s)' in err
  results = json.loads((out / 'results.json').read_text())
  assert (results['games'], results['played_this_run']) == (4, 1)
  games = _read_games(out / 'games.pgn')
  assert [g.headers['Round'] for g in games] == ['1', '2', '3', '4']
  assert [str(g) for g in games[:3]] == [str(g) for g in _read_games(io.StringIO(before))[:3]]


@pytest.mark.engine
def test_gauntlet_checkpoint_against_stockfish(tmp_path, stockfish, model_checkpoint):
  start = [openings.opening_from_san('1. e4 e5 2. Nf3 Nc6', name='Open Game')]
  results = tournament.gauntlet(
    f'checkpoint:{model_checkpoint},name=model',
    ['stockfish:nodes=1,name=sf1'],
    start,
    out_dir=str(tmp_path),
    workers=1,
    adjudication=tournament.Adjudication(max_plies=60, eval_engine=stockfish, eval_limit='nodes=1000'),
    progress=False,
  )
  assert results['games'] == 2
  games = _read_games(tmp_path / 'games.pgn')
  assert [(g.headers['White'], g.headers['Black']) for g in games] == [('model', 'sf1'), ('sf1', 'model')]
  for game in games:
    termination = game.headers['Termination']
    assert not termination.startswith(('illegal', 'engine crash')), termination
    # The model played legal moves throughout (5+ of its own after the 4-ply opening).
    assert not game.errors and int(game.headers['PlyCount']) >= 4 + 10
  assert results['elo'] is not None and results['anchors'] == {}
  assert abs(sum(p['elo'] for p in results['elo']['players'])) < 1e-6  # Mean 0 without anchors.


def test_the_shipped_model_goes_by_the_name_the_user_gave():
  entrants = tournament.resolve_entrants(['checkpoint:pretrained', 'stockfish:nodes=1,name=sf'])
  assert [e.name for e in entrants] == ['pretrained', 'sf']
