"""The strength protocol: what it measures and keeps, and paired comparisons of two evaluation folders (held-out
boards, puzzles and matches) with `searchless-strength compare`'s lines."""

import json
import math
import os
import subprocess
import sys

import chess.pgn
import pytest

from searchless.commands import strength as command
from searchless.evaluation import paired
from searchless.evaluation import strength


def _heldout(folder, rows):
  (folder / 'heldout').mkdir(parents=True)
  with open(folder / 'heldout' / 'boards.jsonl', 'w') as f:
    for fen, log_loss, accuracy, tau in rows:
      f.write(
        json.dumps({'fen': fen, 'metrics': {'log_loss': log_loss, 'action_accuracy': accuracy, 'kendall_tau': tau}})
        + '\n'
      )


def _puzzles(folder, solved):
  (folder / 'puzzles').mkdir(parents=True)
  rows = ['PuzzleId,Rating,solved,played,expected,first_wrong,Moves,Themes']
  rows += [f'{pid},1500,{int(s)},,,,,' for pid, s in solved.items()]
  (folder / 'puzzles' / 'results.csv').write_text('\n'.join(rows) + '\n')


def _match(folder, results):
  """`results`: (round, searchless plays white, result) per game."""
  (folder / 'match').mkdir(parents=True)
  with open(folder / 'match' / 'games.pgn', 'w') as f:
    for round_number, white, result in results:
      game = chess.pgn.Game()
      game.headers.update(
        Round=str(round_number),
        White='searchless' if white else 'stockfish-elo1350',
        Black='stockfish-elo1350' if white else 'searchless',
        Result=result,
      )
      print(game, file=f, end='\n\n')


def test_a_difference_is_the_mean_of_pairs_with_a_normal_95_interval():
  d = paired.mean_difference([1.0, 2.0, 4.0], [1.0, 1.0, 1.0])  # Differences 0, 1, 3: mean 4/3, sd sqrt(7/3).
  assert (d.n, d.mean) == (3, 4 / 3)
  assert d.half_width_95 == pytest.approx(1.96 * math.sqrt(7 / 3 / 3))
  assert paired.mean_difference([0.5], [0.25]) == paired.Difference(1, 0.25, 0.0)
  with pytest.raises(ValueError, match='differ in length: 2 and 1'):
    paired.mean_difference([1.0, 2.0], [1.0])
  with pytest.raises(ValueError, match='no pairs'):
    paired.mean_difference([], [])


def test_two_folders_pair_their_boards_puzzles_and_games_and_leave_out_the_unshared(tmp_path, capsys):
  base, new = tmp_path / 'base', tmp_path / 'new'
  _heldout(base, [('a', 4.0, 1.0, 0.5), ('b', 3.0, 0.0, None), ('c', 5.0, 1.0, 0.25), ('only-base', 9.0, 0.0, 0.0)])
  _heldout(new, [('c', 4.5, 1.0, 0.75), ('a', 3.5, 1.0, 0.5), ('b', 3.0, 1.0, 1.0), ('only-new', 0.0, 1.0, 1.0)])
  _puzzles(base, {'p1': True, 'p2': True, 'p3': False, 'p4': False, 'gone': True})
  _puzzles(new, {'p1': True, 'p2': False, 'p3': True, 'p4': True})
  _match(base, [(1, True, '1-0'), (2, False, '0-1'), (3, True, '1/2-1/2'), (4, False, '0-1')])
  _match(new, [(2, False, '0-1'), (1, True, '0-1'), (3, True, '1/2-1/2'), (4, False, '*')])  # Round 4 unfinished.
  result = paired.compare(base, new)
  heldout = result['heldout']
  assert heldout['log_loss'].n == 3 and heldout['log_loss'].mean == pytest.approx(-1 / 3)
  assert heldout['action_accuracy'].mean == pytest.approx(1 / 3)
  assert (heldout['kendall_tau'].n, heldout['kendall_tau'].mean) == (2, pytest.approx(0.25))  # b: base's tau is null.
  assert result['puzzles'] == paired.Puzzles(n=4, base_solved=2, new_solved=3, new_only=2, base_only=1)
  m = result['match']  # Rounds 1-3: base 1, 1 (black won as black), 0.5; new 0, 1, 0.5.
  assert (m.games, m.base_score, m.new_score, m.new_better, m.new_worse) == (3, 2.5, 1.5, 0, 1)
  assert m.per_game.mean == pytest.approx(-1 / 3)
  command.main(['compare', str(base), str(new)])
  out = capsys.readouterr().out.splitlines()
  assert out[0] == 'held-out boards: 3 in both; new - base (95%):'
  assert out[1].startswith('  log_loss         -0.3333 ± ')
  # Solved: +1, +1, -1 and 0 a puzzle: mean 0.25, 95% half-width 1.96 * sqrt((3 - 4 * 0.25**2) / 3 / 4).
  assert (
    out[4]
    == 'puzzles: 4 in both; base 2, new 3; new - base +0.2500 ± 0.9383 (95%); new alone 2, base alone 1 (z +0.58)'
  )
  assert out[5].startswith('match: 3 games in both; base 2.5, new 1.5; per game -0.333 ± ')
  assert out[5].endswith('new better in 0, worse in 1')
  command.main(['compare', str(base), str(new), '--json'])
  assert json.loads(capsys.readouterr().out)['puzzles'] == {
    'n': 4,
    'base_solved': 2,
    'new_solved': 3,
    'new_only': 2,
    'base_only': 1,
    'z': 1 / 3**0.5,
    'difference': {'n': 4, 'mean': 0.25, 'half_width_95': pytest.approx(1.96 * (2.75 / 3 / 4) ** 0.5)},
  }


def test_a_match_the_player_did_not_play_and_folders_with_nothing_shared_are_errors(tmp_path, capsys):
  base, new = tmp_path / 'base', tmp_path / 'new'
  _match(base, [(1, True, '1-0')])
  (new / 'match').mkdir(parents=True)
  (new / 'match' / 'games.pgn').write_text('[Round "1"]\n[White "x"]\n[Black "y"]\n[Result "1-0"]\n\n1-0\n\n')
  with pytest.raises(ValueError, match=r"games.pgn, round 1: 'searchless' did not play \(White 'x', Black 'y'\)"):
    paired.compare(base, new)
  with pytest.raises(SystemExit):
    command.main(['compare', str(base), str(tmp_path / 'missing')])
  assert 'share no evaluation' in capsys.readouterr().err


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path):
  """`searchless-strength compare A B | head -1`: the pipe closed before its lines are written is no traceback."""
  base, new = tmp_path / 'base', tmp_path / 'new'
  _puzzles(base, {'p1': True})
  _puzzles(new, {'p1': False})
  read, write = os.pipe()
  os.close(read)  # The reader is gone before the command writes.
  result = subprocess.run(
    [sys.executable, '-m', 'searchless.commands.strength', 'compare', str(base), str(new)],
    stdout=write,
    stderr=subprocess.PIPE,
    text=True,
  )
  os.close(write)
  assert (result.returncode, result.stderr) == (1, '')


def test_a_protocol_measures_only_what_it_is_given_and_refuses_a_missing_file(tmp_path):
  with pytest.raises(ValueError, match='^nothing to measure: give --puzzles, --sts, --heldout or --ladder$'):
    strength.Protocol()
  with pytest.raises(FileNotFoundError, match=f'^--puzzles {tmp_path}/none.csv: no such file$'):
    strength.Protocol(puzzles=str(tmp_path / 'none.csv'))
  with pytest.raises(ValueError, match='^--games must be >= 1 for a ladder, got 0$'):
    strength.Protocol(ladder=(1350,), games=0)
  assert strength.opponents(strength.Protocol(ladder=(1350, 1800), opponent_limit='nodes=100')) == [
    'stockfish:nodes=100,elo=1350,name=stockfish-elo1350',
    'stockfish:nodes=100,elo=1800,name=stockfish-elo1800',
  ]
