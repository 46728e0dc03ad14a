"""Playing one tournament game: how it ends (`Adjudication`), the adjudicating engine, the PGN it makes.

`play_game` plays one game between two `agents.Agent`s from an `Opening`; each
agent is handed a copy of the board *with its move history*, so repetition
rules work for it. A game ends (`Adjudication` sets which rules apply; the
``Termination`` tag and a comment after the last move say which did):

* by the rules: checkmate, stalemate, insufficient material, fivefold
  repetition, seventy-five moves (``Termination "normal"``);
* by a draw claim, as the reference ends games: the position occurred a third
  time (``board.is_repetition()``) or the fifty-move rule can be claimed
  (``Termination "normal"``; `claim_draws`);
* by adjudication with an evaluating Stockfish (`eval`): after every move the
  position is searched at `eval_limit` (reference: 10 ms) and the game is won
  by the side the score favours when it finds a mate or |score| > `win_cp`
  (reference: 1300); optionally drawn when |score| < `draw_cp` for `draw_plies`
  consecutive plies after move `draw_after_move` (off by default)
  (``Termination "adjudication: ..."``); off when no Stockfish is found;
* a draw after `max_plies` plies played from the opening
  (``Termination "max plies (N)"``);
* a loss for an agent that plays an illegal move (``"illegal move by NAME:
  MOVE"``; also a UCI engine's bestmove that python-chess refuses) or raises,
  e.g. because its engine died (``"engine crash: NAME: ERROR"``; the worker
  then starts that agent afresh for its next game);
* a loss on time for an agent on a game clock that overran it
  (``Termination "time forfeit"``, `agents.TimeForfeit`).

>>> Adjudication(max_plies=80, eval=False).needs_engine
False
>>> Adjudication(max_plies=0)
Traceback (most recent call last):
...
searchless.plumbing.errors.BadInput: max_plies must be >= 1 or None, got 0
"""

import dataclasses
import datetime
import re

import chess
import chess.engine
import chess.pgn

from searchless.engines import launch
from searchless.evaluation import openings as openings_lib
from searchless.play import agents as agents_lib
from searchless.plumbing import errors

EVENT = 'searchless tournament'
SITE = 'searchless'
_ILLEGAL_UCI = re.compile(r"(?:illegal|invalid) uci[^:]*: '([^']*)'")  # python-chess' words for a bad bestmove.
_OUTCOMES = {
  chess.Termination.CHECKMATE: 'checkmate',
  chess.Termination.STALEMATE: 'stalemate',
  chess.Termination.INSUFFICIENT_MATERIAL: 'insufficient material',
  chess.Termination.SEVENTYFIVE_MOVES: 'seventy-five-move rule',
  chess.Termination.FIVEFOLD_REPETITION: 'fivefold repetition',
}


@dataclasses.dataclass(frozen=True)
class Adjudication:
  """When a game stops before checkmate or a draw by the rules (see the module docstring)."""

  max_plies: int | None = 400  # Draw after this many plies played from the opening; None: no limit.
  claim_draws: bool = True  # Threefold repetition (is_repetition) / fifty-move claim ends the game drawn.
  eval: bool = True  # Adjudicate with an evaluating Stockfish (when one is found).
  eval_engine: str | None = None  # Its binary (default: launch.find_stockfish()).
  eval_limit: str = 'time=0.01'  # Its search per position (the reference: 10 ms).
  win_cp: int | None = 1300  # Win when |score| > this or a mate is found; None: no win adjudication.
  draw_cp: int | None = None  # Draw when |score| < this ... (None: off)
  draw_plies: int = 10  # ... on this many consecutive plies ...
  draw_after_move: int = 40  # ... after this full move.

  def __post_init__(self):
    if self.max_plies is not None and self.max_plies < 1:
      raise errors.BadInput(f'max_plies must be >= 1 or None, got {self.max_plies}')
    if self.win_cp is not None and self.win_cp < 1:
      raise errors.BadInput(f'win_cp must be >= 1 or None, got {self.win_cp}')
    if self.draw_cp is not None and (self.draw_cp < 1 or self.draw_plies < 1):
      raise errors.BadInput(f'draw_cp and draw_plies must be >= 1, got {self.draw_cp} and {self.draw_plies}')
    launch.SearchLimit.parse(self.eval_limit)

  @property
  def needs_engine(self) -> bool:
    return self.eval and (self.win_cp is not None or self.draw_cp is not None)


class Evaluator:
  """A Stockfish process that scores positions for adjudication (restarted once if it dies)."""

  def __init__(self, path: str, limit: str = 'time=0.01'):
    self.path = path
    self.limit = launch.SearchLimit.parse(limit)
    self._engine = self._start()

  def _start(self) -> chess.engine.SimpleEngine:
    return launch.open_engine(self.path)

  def score(self, board: chess.Board) -> chess.engine.Score:
    """White's score of `board`."""
    for attempt in range(2):
      try:
        return self._engine.analyse(board, self.limit.to_chess(), info=chess.engine.INFO_SCORE)['score'].white()
      except (chess.engine.EngineTerminatedError, chess.engine.EngineError, KeyError):
        if attempt:
          raise
        self.close()
        self._engine = self._start()
    raise AssertionError('unreachable')

  def close(self) -> None:
    try:
      self._engine.quit()
    except (chess.engine.EngineTerminatedError, chess.engine.EngineError, TimeoutError):
      pass


def make_evaluator(adjudication: Adjudication) -> Evaluator | None:
  """The adjudicating engine, or None when adjudication needs none or no Stockfish is found."""
  if not adjudication.needs_engine:
    return None
  path = adjudication.eval_engine or launch.find_stockfish()
  return Evaluator(path, adjudication.eval_limit) if path else None


def _one_line(text: object, limit: int = 200) -> str:
  """`text` on one line, cut to `limit` characters.

  >>> _one_line('engine crash:\\n  died', limit=15)
  'engine crash...'
  """
  text = ' '.join(str(text).split())
  return text if len(text) <= limit else text[: limit - 3] + '...'


def _score_text(score: chess.engine.Score) -> str:
  """White's `score` in words.

  >>> _score_text(chess.engine.Cp(1391)), _score_text(chess.engine.Mate(2)), _score_text(chess.engine.Mate(-1))
  ('eval +1391 cp for White', 'White mates in 2', 'Black mates in 1')
  """
  mate = score.mate()
  if mate is None:
    return f'eval {score.score():+d} cp for White'
  return f'White mates in {mate}' if mate > 0 else f'Black mates in {-mate}'


def _loss(color: chess.Color) -> str:
  return '0-1' if color == chess.WHITE else '1-0'


def play_game(
  white: agents_lib.Agent,
  black: agents_lib.Agent,
  opening: openings_lib.Opening,
  *,
  adjudication: Adjudication = Adjudication(),
  evaluator: Evaluator | None = None,
  round_number: int | str = '?',
  event: str = EVENT,
  site: str = SITE,
  date: str | None = None,
) -> chess.pgn.Game:
  """Plays one game from `opening` (see the module docstring for how it ends).

  `evaluator`: the adjudicating engine to reuse; when None and `adjudication`
  needs one, one is started (if Stockfish is found) for this game only.
  """
  own = make_evaluator(adjudication) if evaluator is None else None
  try:
    return _play(white, black, opening, adjudication, evaluator or own, round_number, event, site, date)
  finally:
    if own is not None:
      own.close()


def _play(white, black, opening, adjudication, evaluator, round_number, event, site, date) -> chess.pgn.Game:
  board = opening.board()
  opening_plies = len(board.move_stack)
  players = {chess.WHITE: white, chess.BLACK: black}
  plies, draw_streak = 0, 0
  while True:
    if (outcome := board.outcome()) is not None:
      result, termination, reason = outcome.result(), 'normal', _OUTCOMES[outcome.termination]
      break
    if adjudication.claim_draws and board.is_repetition(3):
      result, termination, reason = '1/2-1/2', 'normal', 'threefold repetition'
      break
    if adjudication.claim_draws and board.can_claim_fifty_moves():
      result, termination, reason = '1/2-1/2', 'normal', 'fifty-move rule'
      break
    if evaluator is not None and plies > 0:
      score = evaluator.score(board)
      cp = score.score()
      if adjudication.win_cp is not None and (score.is_mate() or abs(cp) > adjudication.win_cp):
        winner = chess.WHITE if score > chess.engine.Cp(0) else chess.BLACK
        result = _loss(not winner)
        termination = f'adjudication: {chess.COLOR_NAMES[winner].capitalize()} wins'
        reason = f'{termination}, {_score_text(score)}'
        break
      drawish = (
        adjudication.draw_cp is not None
        and cp is not None
        and abs(cp) < adjudication.draw_cp
        and board.fullmove_number > adjudication.draw_after_move
      )
      draw_streak = draw_streak + 1 if drawish else 0
      if adjudication.draw_cp is not None and draw_streak >= adjudication.draw_plies:
        result, termination = '1/2-1/2', 'adjudication: draw'
        reason = f'{termination}, |eval| < {adjudication.draw_cp} cp for {draw_streak} plies'
        break
    if adjudication.max_plies is not None and plies >= adjudication.max_plies:
      result, termination = '1/2-1/2', f'max plies ({adjudication.max_plies})'
      reason = f'draw after {plies} plies'
      break
    mover = players[board.turn]
    try:
      move = mover.play(board.copy())
    except Exception as error:  # A crashed engine or a broken agent loses the game.
      if isinstance(error, chess.engine.EngineError) and (bad := _ILLEGAL_UCI.match(str(error))):
        move = bad.group(1)  # python-chess refuses a UCI engine's illegal bestmove: an illegal move.
      elif isinstance(error, agents_lib.TimeForfeit):
        result, termination, reason = _loss(board.turn), 'time forfeit', _one_line(str(error))
        break
      else:
        result = _loss(board.turn)
        termination = _one_line(f'engine crash: {mover.name}: {type(error).__name__}: {error}')
        reason = termination
        break
    if not isinstance(move, chess.Move) or not board.is_legal(move):
      result = _loss(board.turn)
      termination = _one_line(f'illegal move by {mover.name}: {move}')
      reason = termination
      break
    board.push(move)
    plies += 1

  game = chess.pgn.Game.from_board(board)
  headers = game.headers
  headers['Event'] = event
  headers['Site'] = site
  headers['Date'] = date or datetime.date.today().strftime('%Y.%m.%d')
  headers['Round'] = str(round_number)
  headers['White'] = white.name
  headers['Black'] = black.name
  headers['Result'] = result
  if opening.eco:
    headers['ECO'] = opening.eco
  headers['Opening'] = opening.name
  headers['PlyCount'] = str(len(board.move_stack))
  headers['Termination'] = termination
  if 0 < opening_plies < len(board.move_stack):
    node: chess.pgn.GameNode = game
    for _ in range(opening_plies):
      node = node.variations[0]
    node.comment = 'end of opening'
  game.end().comment = reason
  return game
