"""One ``go``: the pending search (its worker thread, the release of ``bestmove``) and what it reports.

`Search` is a ``go`` in flight; `allowed_moves` checks its ``searchmoves``;
`score_cp` is the chosen move's score and `info_line` the ``info`` line that
precedes ``bestmove`` (a searchless policy has no search to extend: depth 1,
the moves the model scored as nodes).

>>> info_line(chess.Move.from_uci('e2e4'), nodes=20, seconds=0.01, score_cp=35)
'info depth 1 seldepth 1 multipv 1 score cp 35 nodes 20 nps 2000 time 10 pv e2e4'
"""

from collections.abc import Callable
import threading

import chess

from searchless.core import values
from searchless.play import player as player_lib
from searchless.play import policy as policy_lib
from searchless.play.uci import protocol


class Search:
  """One pending ``go``: its worker thread and the event that releases ``bestmove``."""

  def __init__(self, board: chess.Board, request: protocol.GoRequest, started: float,
               run: Callable[['Search'], None]):
    self.board = board
    self.request = request
    self.started = started
    self.release = threading.Event()  # Set by stop (or ponderhit): bestmove may go out.
    self.thread = threading.Thread(target=run, args=(self,), name='uci-go', daemon=True)  # Started by the engine.

  @property
  def holds(self) -> bool:
    """Whether bestmove waits for stop / ponderhit."""
    return self.request.infinite or self.request.ponder


def allowed_moves(board: chess.Board, searchmoves: list[str]) -> tuple[list[chess.Move], list[str]]:
  """The legal moves among `searchmoves` (in order, once each) and an error for each other one.

  >>> allowed_moves(chess.Board(), ['e2e4', 'e2e4', 'e2e5'])
  ([Move.from_uci('e2e4')], ["searchmoves: 'e2e5' is not a legal move"])
  """
  legal = {m.uci(): m for m in board.legal_moves}
  allowed, errors = [], []
  for text in searchmoves:
    move = legal.get(text) or legal.get(protocol.normalise_move(board, text) or '')
    if move is None:
      errors.append(f'searchmoves: {text!r} is not a legal move')
    elif move not in allowed:
      allowed.append(move)
  return allowed, errors


def score_cp(board: chess.Board, move: chess.Move, analysis: policy_lib.Analysis,
             player: player_lib.Player) -> int | None:
  """The chosen move's value for the mover (after the player's repetition rule) in centipawns;
  None for behavioral cloning."""
  if analysis.win_probs is None:
    return None
  win_prob = float(player.adjusted_scores(board, analysis)[analysis.moves.index(move)])
  return values.win_probability_to_centipawns(win_prob, clip=protocol.CP_CLIP)


def info_line(move: chess.Move, *, nodes: int, seconds: float, score_cp: int | None) -> str:
  """The ``info`` line of a finished search (no score when `score_cp` is None)."""
  score_text = '' if score_cp is None else f'score cp {score_cp} '
  return (f'info depth 1 seldepth 1 multipv 1 {score_text}nodes {nodes} nps {int(nodes / max(seconds, 1e-3))} '
          f'time {int(round(seconds * 1000))} pv {move.uci()}')
