"""One ``go``: the pending search (its worker thread, the release of ``bestmove``) and what it reports.

`Search` is a ``go`` in flight; `allowed_moves` checks its ``searchmoves``;
`info_lines` are the ``info`` lines that precede ``bestmove`` (a searchless
policy has no search to extend: depth 1, the moves the model scored as nodes;
``MultiPV`` lines ranked by the model's values; `wdl` for ``UCI_ShowWDL``).
With the ``Search`` option, `budget` turns the ``go`` limits into the search's
and `search_info_lines` reports its result.
"""

from collections.abc import Callable
import dataclasses
import threading

import chess
import numpy as np

from searchless.core import values
from searchless.play import player as player_lib
from searchless.play import policy as policy_lib
from searchless.play.search import agent as search_agent
from searchless.play.search import alphabeta
from searchless.play.search import result as result_lib
from searchless.play.uci import options as options_lib
from searchless.play.uci import protocol

MIN_SEARCH_SECONDS = 0.001  # A timed search whose time went on loading the model still looks at its root.


class Search:
  """One pending ``go``: its worker thread and the event that releases ``bestmove``."""

  def __init__(self, board: chess.Board, request: protocol.GoRequest, started: float, run: Callable[['Search'], None]):
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


def info_lines(
  board: chess.Board,
  chosen: chess.Move,
  analysis: policy_lib.Analysis,
  player: player_lib.Player,
  *,
  multipv: int,
  show_wdl: bool,
  nodes: int,
  seconds: float,
) -> list[str]:
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
    lines.append(
      f'info depth 1 seldepth 1 multipv {k} {score}nodes {nodes} '
      f'nps {int(nodes / max(seconds, 1e-3))} time {int(round(seconds * 1000))} pv {analysis.moves[i].uci()}'
    )
  return lines


CLOCK_MOVES = 30  # A clock without movestogo is shared as if this many moves remained.


def budget(
  board: chess.Board,
  request: protocol.GoRequest,
  *,
  kind: str,
  nodes: int,
  depth: int,
  overhead_ms: int,
  spent: float = 0.0,
) -> dict[str, float | int | None]:
  """The search config fields (`MctsConfig` or `AlphaBetaConfig`) of one ``go``.

  ``nodes`` gives MCTS its simulations and alpha-beta its nodes (a limit of nodes visited, kept as a time
  limit is: the deepest iteration completed is played), ``depth`` alpha-beta its depth and MCTS a depth
  (it stops after the batch whose deepest simulation reaches it);
  ``movetime``, or the side to move's clock (its share of the remaining time
  for ``movestogo`` moves, 30 without it, plus 3/4 of the increment, at most
  half of what is left) gives the time, less ``Move Overhead``. A time with no
  count searches until the time is up; neither searches `nodes` / `depth`
  (the SearchNodes / SearchDepth options). ``infinite`` and ``ponder`` search
  until ``stop`` or ``ponderhit``. A time counts from the ``go``: the `spent`
  seconds since (loading the model, compiling) come off it, down to
  `MIN_SEARCH_SECONDS`.

  >>> request, _ = protocol.parse_go('wtime 30010 btime 30010 winc 1000'.split())
  >>> budget(chess.Board(), request, kind='mcts', nodes=256, depth=2, overhead_ms=10)
  {'simulations': 10000000, 'seconds': 1.75, 'depth': None}
  >>> budget(chess.Board(), protocol.parse_go(['depth', '3'])[0], kind='alphabeta', nodes=256, depth=2, overhead_ms=10)
  {'depth': 3, 'seconds': None, 'nodes': None}
  >>> budget(chess.Board(), protocol.parse_go(['depth', '1'])[0], kind='mcts', nodes=256, depth=2, overhead_ms=10)
  {'simulations': 256, 'seconds': None, 'depth': 1}
  """
  limits = request.limits
  seconds: float | None = None
  if request.infinite or request.ponder:
    count = protocol.MAX_SEARCH_NODES if kind == 'mcts' else alphabeta.MAX_DEPTH
  else:
    if 'movetime' in limits:
      seconds = max(limits['movetime'] - overhead_ms, 1) / 1000
    elif ('wtime' if board.turn == chess.WHITE else 'btime') in limits:
      left = limits['wtime' if board.turn == chess.WHITE else 'btime'] - overhead_ms
      increment = limits.get('winc' if board.turn == chess.WHITE else 'binc', 0)
      share = left / max(limits.get('movestogo', CLOCK_MOVES), 1) + 0.75 * increment
      seconds = max(min(share, left / 2), 1) / 1000
    given = limits.get('nodes') if kind == 'mcts' else limits.get('depth')
    if given is not None:
      count = max(given, 1)
    elif seconds is not None:
      count = protocol.MAX_SEARCH_NODES if kind == 'mcts' else alphabeta.MAX_DEPTH
    else:
      count = nodes if kind == 'mcts' else depth
  if seconds is not None:
    seconds = max(seconds - spent, MIN_SEARCH_SECONDS)
  other = limits.get('depth' if kind == 'mcts' else 'nodes') if not (request.infinite or request.ponder) else None
  other = None if other is None else max(other, 1)  # The other kind's limit: MCTS's depth, alpha-beta's nodes.
  if kind == 'mcts':
    return {'simulations': count, 'seconds': seconds, 'depth': other}
  return {'depth': min(count, alphabeta.MAX_DEPTH), 'seconds': seconds, 'nodes': other}


def _score(value: float, show_wdl: bool) -> str:
  mate = result_lib.mate_in(value)
  if mate is not None:
    return f'score mate {mate} ' + ('wdl 1000 0 0 ' if mate > 0 else 'wdl 0 0 1000 ') * show_wdl
  win = float(np.clip((value + 1) / 2, 0, 1))
  text = f'score cp {values.win_probability_to_centipawns(win, clip=protocol.CP_CLIP)} '
  if show_wdl:
    w, d, l = wdl(np.ones(1), np.array([win]))
    text += f'wdl {w} {d} {l} '
  return text


def search_info_lines(result: result_lib.SearchResult, *, multipv: int, show_wdl: bool, seconds: float) -> list[str]:
  """The ``info`` lines of a search: `multipv` lines, the chosen move's first (with the principal
  line), then the other root moves by visits and value; nodes are simulations (MCTS) or nodes
  visited (alpha-beta); a proven mate is ``score mate N``."""
  if result.move is None:
    return []
  first = result.moves.index(result.move)
  order = [int(i) for i in np.lexsort((-result.q, -result.visits)) if i != first]
  lines = []
  for k, i in enumerate([first] + order[: multipv - 1], start=1):
    pv = ' '.join(m.uci() for m in result.pv) if i == first else result.moves[i].uci()
    lines.append(
      f'info depth {max(result.depth, 1)} seldepth {max(result.depth, 1)} multipv {k} '
      f'{_score(float(result.q[i]), show_wdl)}nodes {result.simulations} '
      f'nps {int(result.simulations / max(seconds, 1e-3))} time {int(round(seconds * 1000))} pv {pv}'
    )
  return lines


def run_search(
  agent: search_agent.SearchAgent,
  search: Search,
  kind: str,
  settings: options_lib.Settings,
  *,
  spent: float,
  root_moves: list[chess.Move] | None,
) -> tuple[result_lib.SearchResult, dict[str, float | int | None]]:
  """A ``go``'s search by `agent` (its config set to the go's `budget`, `spent` seconds already gone): (the result,
  the budget). ``stop`` ends it early with what it holds."""
  limits = budget(
    search.board,
    search.request,
    kind=kind,
    nodes=settings.search_nodes,
    depth=settings.search_depth,
    overhead_ms=settings.move_overhead_ms,
    spent=spent,
  )
  agent.searcher.config = dataclasses.replace(agent.searcher.config, **limits)  # type: ignore[arg-type]
  return agent.search(search.board, stop=search.release.is_set, root_moves=root_moves), limits


def policy_info_lines(
  board: chess.Board,
  move: chess.Move,
  analysis: policy_lib.Analysis,
  player: player_lib.Player,
  settings: options_lib.Settings,
  nodes: int,
  seconds: float,
  debug: bool,
) -> list[str]:
  """The ``info`` lines of the searchless player's move (`info_lines`), after its top moves when `debug`."""
  lines = []
  if debug:
    top = ' '.join(f'{m.uci()} {s:.4f}' for m, s in analysis.ranked()[:5])
    lines.append(f'info string {player.policy.kind} top moves: {top}')
  info = info_lines(
    board, move, analysis, player, multipv=settings.multipv, show_wdl=settings.show_wdl, nodes=nodes, seconds=seconds
  )
  return lines + info
