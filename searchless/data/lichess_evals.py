"""Labels that cost no engine time: Lichess's own evaluations as ChessBench labels.

Two sources, each read into `Labelled` boards:

* game dumps whose games carry ``[%eval ...]`` comments (`from_game`, on a game that
  `pgn.parse_game(..., with_evals=True)` read): a comment is Stockfish's score of the
  board after the move it follows, from White's side, in pawns (``0.35``) or as a
  mate (``#-4``), sometimes with a depth (``0.35,20``). A board with a score gets
  its state value; the move played from it gets a value when the next board has a
  score (or is a checkmate). Games have no engine line, so no best move;
* the evaluation database ``lichess_db_eval.jsonl`` (`from_eval_line`): one board
  per line, ``{"fen", "evals": [{"knodes", "depth", "pvs": [{"cp" | "mate", "line"}]}]}``
  (FEN without its clocks; scores from White's side, mate in moves); the deepest
  eval gives the state value, its best line's first move the best move, and the
  first move of each of its lines a move value.

Values are win probabilities of the side to move (`values.score_to_win_probability`,
the paper's formula; a mate is 1 or 0). A board that holds only some of its legal
moves is a partial board (`records.PARTIAL_BOARD_VALUE`).

>>> game = pgn.parse_game(pgn.RawGame('g.pgn', 1, '[Result "*"]\\n\\n1. e4 { [%eval 0.3] } 1... e5 { [%eval 0.35] } *'),
...                       with_evals=True)
>>> [(b.fen.split(' ')[1], round(b.state_value, 3), b.moves, [round(p, 3) for p in b.win_probs])
...  for b in from_game(game)]
[('b', 0.472, ('e7e5',), [0.468]), ('w', 0.532, (), [])]
>>> line = ('{"fen": "7k/8/8/8/8/8/8/R6K w - -", '
...         '"evals": [{"pvs": [{"mate": 1, "line": "a1a8"}], "knodes": 10, "depth": 99}]}')
>>> board = from_eval_line(line, 'db.jsonl:1')
>>> board.fen, board.state_value, board.best_move, board.moves, board.win_probs, board.depth
('7k/8/8/8/8/8/8/R6K w - - 0 1', 1.0, 'a1a8', ('a1a8',), (1.0,), 99)
"""

from collections.abc import Iterator
import dataclasses
import json

import chess
import chess.engine

from searchless.core import legality
from searchless.core import records
from searchless.core import tokenizer
from searchless.core import values
from searchless.data import pgn

SOURCES = ('games', 'eval_db')  # Where a `Labelled` board's labels come from.
# Why a line of the evaluation database is skipped (a `pgn.Skip` reason, counted in the manifest).
SKIP_REASONS = ('bad_json', 'illegal_fen', 'missing_score', 'illegal_pv_move')


@dataclasses.dataclass(frozen=True)
class Labelled:
  """One board with the labels a source gave it."""

  fen: str  # Six fields (the database's boards get clocks '0 1').
  state_value: float  # Win probability of the side to move.
  moves: tuple[str, ...]  # Moves with a value (UCI): the lines' first moves, best first, or the move played.
  win_probs: tuple[float, ...]  # The mover's win probability after each of `moves`.
  best_move: str | None  # The engine's best move (the database's best line); None from games.
  depth: int | None  # Search depth of the score, where the source says.
  knodes: int | None  # Thousands of nodes searched, where the source says.
  source: str  # One of SOURCES.


def _white_score(text: str) -> tuple[chess.engine.Score, int | None]:
  """'0.35' / '#-4' / '1.2,20' (a [%eval] comment's text) -> (White's score, depth or None)."""
  score, _, depth = text.partition(',')
  white = chess.engine.Mate(int(score[1:])) if score.startswith('#') else chess.engine.Cp(round(float(score) * 100))
  return white, int(depth) if depth else None


def _mover_win_prob(white: chess.engine.Score, turn: chess.Color) -> float:
  return values.score_to_win_probability(white if turn == chess.WHITE else -white)


def from_game(game: pgn.Game) -> Iterator[Labelled]:
  """The boards of a game read `with_evals` that have a score: state values, and the played move's value."""
  for index, (fen, text) in enumerate(zip(game.fens, game.evals)):
    if text is None:
      continue
    board = chess.Board(fen)
    if board.is_game_over(claim_draw=False):
      continue
    white, depth = _white_score(text)
    moves: tuple[str, ...] = ()
    win_probs: tuple[float, ...] = ()
    if index < len(game.moves):
      after, after_text = chess.Board(game.fens[index + 1]), game.evals[index + 1]
      if after.is_checkmate():
        moves, win_probs = (game.moves[index],), (1.0,)
      elif after_text is not None:
        moves, win_probs = (game.moves[index],), (_mover_win_prob(_white_score(after_text)[0], board.turn),)
    yield Labelled(fen, _mover_win_prob(white, board.turn), moves, win_probs, None, depth, None, 'games')


def _line_score(pv: dict, turn: chess.Color) -> float | None:
  if 'mate' in pv and isinstance(pv['mate'], int):
    return _mover_win_prob(chess.engine.Mate(pv['mate']), turn)
  if 'cp' in pv and isinstance(pv['cp'], int):
    return _mover_win_prob(chess.engine.Cp(pv['cp']), turn)
  return None


def from_eval_line(line: str, location: str) -> Labelled | pgn.Skip:
  """One line of lichess_db_eval.jsonl -> its board with labels, or why it is skipped (SKIP_REASONS)."""
  try:
    entry = json.loads(line)
    fen, evals = entry['fen'], entry['evals']
    deepest = max(evals, key=lambda e: (e.get('depth', -1), e.get('knodes', -1)))
    lines = deepest['pvs']
  except (ValueError, KeyError, TypeError) as error:
    return pgn.Skip('bad_json', location, f'{type(error).__name__}: {error}'[:200])
  if not isinstance(fen, str) or not isinstance(lines, list) or not lines:
    return pgn.Skip('bad_json', location, 'no fen or no lines')
  full = fen if len(fen.split(' ')) == 6 else f'{fen} 0 1'
  try:
    board = chess.Board(full)
  except ValueError as error:
    return pgn.Skip('illegal_fen', location, str(error)[:200])
  if problems := legality.problems(board):
    return pgn.Skip('illegal_fen', location, f'{fen!r} is not a legal position ({problems})')
  moves, win_probs = [], []
  for pv in lines:
    score = _line_score(pv, board.turn) if isinstance(pv, dict) else None
    if score is None:
      return pgn.Skip('missing_score', location, f'a line of {fen!r} has neither cp nor mate')
    first = str(pv.get('line', '')).split(' ')[0]
    try:
      move = chess.Move.from_uci(first)
    except ValueError:
      move = None
    if move is None or move not in board.legal_moves:
      return pgn.Skip('illegal_pv_move', location, f'{first!r} is not a legal move of {fen!r}')
    if move.uci() not in moves:
      moves.append(move.uci())
      win_probs.append(score)
  depth, knodes = deepest.get('depth'), deepest.get('knodes')
  return Labelled(
    tokenizer.clamp_counters(board.fen()),
    win_probs[0],
    tuple(moves),
    tuple(win_probs),
    moves[0],
    depth if isinstance(depth, int) else None,
    knodes if isinstance(knodes, int) else None,
    'eval_db',
  )


def state_value_records(board: Labelled) -> list[tuple[str, float]]:
  return [(board.fen, board.state_value)]


def behavioral_cloning_records(board: Labelled) -> list[tuple[str, str]]:
  return [] if board.best_move is None else [(board.fen, board.best_move)]


def partial_board_records(board: Labelled) -> list[records.BoardValue]:
  return [records.BoardValue(board.fen, board.moves, board.win_probs, board.state_value)] if board.moves else []


RECORDS_OF = {
  'state_value': state_value_records,
  'behavioral_cloning': behavioral_cloning_records,
  records.PARTIAL_BOARD_VALUE: partial_board_records,
}
