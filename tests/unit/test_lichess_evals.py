"""Imported labels: [%eval] comments of real Lichess games and lines of the evaluation database as labelled boards."""

import json
import pathlib

import chess
import chess.engine
import chess.pgn
import pytest

from searchless.core import records
from searchless.core import values
from searchless.data import lichess_evals
from searchless.data import pgn

EVAL_SAMPLE = pathlib.Path(__file__).parents[1] / 'fixtures' / 'lichess_db_eval_sample.jsonl'


def _mover(score: chess.engine.PovScore, turn: chess.Color) -> float:
  return values.score_to_win_probability(score.pov(turn))


def test_the_evaluation_database_sample_reads_its_deepest_eval():
  lines = EVAL_SAMPLE.read_text().splitlines()
  boards = [lichess_evals.from_eval_line(line, f'{EVAL_SAMPLE}:{i}') for i, line in enumerate(lines, 1)]
  assert all(isinstance(b, lichess_evals.Labelled) for b in boards) and len(boards) == 31
  for line, board in zip(lines, boards):
    entry = json.loads(line)
    deepest = entry['evals'][0]  # The sample's first eval is its deepest (depth 10, then 6).
    assert board.fen.startswith(entry['fen'] + ' ') and board.fen.endswith(' 0 1')
    assert (board.depth, board.knodes, board.source) == (10, deepest['knodes'], 'eval_db')
    assert board.moves == tuple(dict.fromkeys(pv['line'].split()[0] for pv in deepest['pvs']))
    turn = chess.Board(board.fen).turn
    white = [chess.engine.Mate(pv['mate']) if 'mate' in pv else chess.engine.Cp(pv['cp']) for pv in deepest['pvs']]
    assert board.win_probs == tuple(_mover(chess.engine.PovScore(s, chess.WHITE), turn) for s in white)
    assert board.best_move == board.moves[0] and board.state_value == board.win_probs[0]
  mate = boards[-1]
  assert (mate.best_move, mate.state_value, mate.moves[0]) == ('d1d8', 1.0, 'd1d8')
  black = next(b for b in boards if ' b ' in b.fen)
  assert black.win_probs == tuple(sorted(black.win_probs, reverse=True))  # Best first, from Black's side too.


def test_records_of_each_kind():
  board = lichess_evals.from_eval_line(EVAL_SAMPLE.read_text().splitlines()[-1], 'x:1')
  assert lichess_evals.state_value_records(board) == [(board.fen, 1.0)]
  assert lichess_evals.behavioral_cloning_records(board) == [(board.fen, 'd1d8')]
  [partial] = lichess_evals.partial_board_records(board)
  assert partial == records.BoardValue(board.fen, board.moves, board.win_probs, 1.0) and len(partial.moves) == 3
  encoded = records.encode(records.PARTIAL_BOARD_VALUE, partial)
  decoded = records.decode(records.PARTIAL_BOARD_VALUE, encoded)
  assert (decoded.fen, tuple(decoded.moves), tuple(decoded.win_probs), decoded.state_value) == partial
  played = lichess_evals.Labelled('8/8/8/8/8/8/8/K1k5 w - - 0 1', 0.5, (), (), None, None, None, 'games')
  assert lichess_evals.behavioral_cloning_records(played) == [] and lichess_evals.partial_board_records(played) == []


@pytest.mark.parametrize(
  'line,reason,detail',
  [
    ('{"fen": "8/8/8/8/8/8/8/K1k5 w - -", "evals": [', 'bad_json', 'JSONDecodeError'),
    ('{"evals": []}', 'bad_json', "KeyError: 'fen'"),
    ('{"fen": "8/8/8/8/8/8/8/K1k5 w - -", "evals": []}', 'bad_json', 'ValueError'),
    (
      '{"fen": "8/8/8/8/8/8/8/8 w - -", "evals": [{"pvs": [{"cp": 1, "line": "a1a2"}], "depth": 5}]}',
      'illegal_fen',
      "'8/8/8/8/8/8/8/8 w - -' is not a legal position (no white king, no black king, empty)",
    ),
    ('{"fen": "xyz w - -", "evals": [{"pvs": [{"cp": 1, "line": "a1a2"}], "depth": 5}]}', 'illegal_fen', 'xyz'),
    (
      '{"fen": "8/8/8/8/8/8/8/K1k5 w - -", "evals": [{"pvs": [{"line": "a1a2"}], "depth": 5}]}',
      'missing_score',
      'neither cp nor mate',
    ),
    (
      '{"fen": "8/8/8/8/8/8/8/K1k5 w - -", "evals": [{"pvs": [{"cp": 3, "line": "a1b1"}], "depth": 5}]}',
      'illegal_pv_move',
      "'a1b1' is not a legal move",
    ),
    (
      '{"fen": "8/8/8/8/8/8/8/K1k5 w - -", "evals": [{"pvs": [{"cp": 3, "line": ""}], "depth": 5}]}',
      'illegal_pv_move',
      "'' is not a legal move",
    ),
  ],
)
def test_bad_lines_are_skips_naming_the_line(line, reason, detail):
  skip = lichess_evals.from_eval_line(line, 'db.jsonl:7')
  assert isinstance(skip, pgn.Skip) and (skip.reason, skip.location) == (reason, 'db.jsonl:7')
  assert detail in skip.detail and reason in lichess_evals.SKIP_REASONS
