"""One ``go``: the pending search (its worker thread, the release of ``bestmove``) and what it reports.

`Search` is a ``go`` in flight; `allowed_moves` checks its ``searchmoves``;
`info_lines` are the ``info`` lines that precede ``bestmove`` (a searchless
policy has no search to extend: depth 1, the moves the model scored as nodes;
``MultiPV`` lines ranked by the model's values; `wdl` for ``UCI_ShowWDL``).
"""

from collections.abc import Callable
import threading

import chess
import numpy as np

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


def wdl(bucket_probs: np.ndarray, centres: np.ndarray) -> tuple[int, int, int]:
  """Win, draw and loss per mille from a value distribution over buckets ([K] probabilities, [K] centres).

  A bucket of win probability c >= 1/2 reads as a win with probability 2c - 1 and
  a draw otherwise, one below 1/2 as a loss with probability 1 - 2c and a draw
  otherwise: win + draw / 2 is the expected win probability, and a model sure
  of 1/2 says draw. Rounded to per mille summing to 1000.

  >>> wdl(np.array([0.5, 0.5]), np.array([0.25, 1.0]))
  (500, 250, 250)
  """
  win = float(bucket_probs @ np.maximum(2 * centres - 1, 0))
  loss = float(bucket_probs @ np.maximum(1 - 2 * centres, 0))
  w, l = int(round(1000 * win)), int(round(1000 * loss))
  return w, 1000 - w - l, l


def info_lines(board: chess.Board, chosen: chess.Move, analysis: policy_lib.Analysis, player: player_lib.Player,
               *, multipv: int, show_wdl: bool, nodes: int, seconds: float) -> list[str]:
  """The ``info`` lines of a finished search: `multipv` lines, the chosen move's first, then the
  other moves best first (after the repetition rule); scores in centipawns and, with
  `show_wdl`, win/draw/loss per mille (no score for behavioral cloning)."""
  scores = player.adjusted_scores(board, analysis)
  order = [int(i) for i in np.argsort(-scores, kind='stable')]
  first = analysis.moves.index(chosen)
  order = [first] + [i for i in order if i != first]
  centres = getattr(player.policy, 'centres', None)
  lines = []
  for k, i in enumerate(order[:multipv], start=1):
    score = ''
    if analysis.win_probs is not None:
      score = f'score cp {values.win_probability_to_centipawns(float(scores[i]), clip=protocol.CP_CLIP)} '
      if show_wdl and centres is not None:
        if scores[i] != analysis.scores[i]:  # The repetition rule made it a draw.
          w, d, l = 0, 1000, 0
        else:
          w, d, l = wdl(np.exp(np.asarray(analysis.log_probs[i], np.float64)), centres)
        score += f'wdl {w} {d} {l} '
    lines.append(f'info depth 1 seldepth 1 multipv {k} {score}nodes {nodes} '
                 f'nps {int(nodes / max(seconds, 1e-3))} time {int(round(seconds * 1000))} pv {analysis.moves[i].uci()}')
  return lines
