"""The sample-game analysis: one game of the match, with the model's and Stockfish's view of every move.

    searchless-analyse-game --run_dir runs/demo

picks a game of ``RUN_DIR/match/games.pgn`` (`pick_game`: the model's longest
win, else the longest game it played, else the longest game), asks this run's
model (the checkpoint in ``RUN_DIR/train``) how it judged each of its moves and
Stockfish (a small node limit) how good each position was, and writes
``RUN_DIR/report/sample_game.json`` (`SampleGame`), which the report's "A
sample game" section reads. A view that cannot be had (no checkpoint, no
Stockfish) is left out with a note; the game is still written.

>>> game = SampleGame(games_file='match/games.pgn', headers={'White': 'searchless', 'Result': '1-0'},
...                   ending='checkmate', model_color='white', book_plies=0,
...                   plies=[{'san': 'e4', 'uci': 'e2e4', 'color': 'white', 'model_prob': 0.5, 'model_best': None}],
...                   model_view=[0.5, None], stockfish_view=[None, None], stockfish_nodes=0,
...                   final_fen='rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1', notes=[])
>>> SampleGame.from_json(game.to_json()) == game
True
"""

from collections.abc import Sequence
import dataclasses
import os
import pathlib
from typing import Any, ClassVar

import chess
import chess.engine
import chess.pgn

from searchless.core import artefacts
from searchless.plumbing import errors
from searchless.report import context as context_lib

DEFAULT_STOCKFISH_NODES = 10_000  # Stockfish's nodes per position of the sample game.
_BATCH = 16  # Boards per model call.


@dataclasses.dataclass(frozen=True)
class SampleGame(artefacts.Artefact):
  """One analysed game (``searchless-analyse-game``, read by the report)."""

  FORMAT: ClassVar[str] = 'searchless-sample-game'
  FILE: ClassVar[str] = 'sample_game.json'

  games_file: str  # The PGN the game is from.
  headers: dict[str, str]  # Its Round, White, Black, Result, PlyCount and Opening headers (those it has).
  ending: str  # The comment on its last move (how it ended), '' if none.
  model_color: str | None  # 'white' or 'black': the side of this run's model; None when it did not play.
  book_plies: int  # Plies of the given opening.
  plies: list[dict[str, Any]]  # Per ply: san, uci, color, model_prob (the model's win probability for the move
  #                              it played, its moves only) and model_best (its top move in SAN, when another).
  model_view: list[float | None]  # Per position (plies + 1): the model's value of its side when it is to move.
  stockfish_view: list[float | None]  # Per position: Stockfish's win probability for the model's side.
  stockfish_nodes: int  # Stockfish's nodes per position (0: not asked).
  final_fen: str  # The final position.
  notes: list[str]  # Views that are missing, and why.


def pick_game(games: Sequence[chess.pgn.Game], models: set[str]) -> chess.pgn.Game | None:
  """The model's longest win, else the longest game it played, else the longest game."""

  def plies(g: chess.pgn.Game) -> int:
    return sum(1 for _ in g.mainline_moves())

  def won(g: chess.pgn.Game) -> bool:
    h = g.headers
    return (h.get('White') in models and h.get('Result') == '1-0') or (
      h.get('Black') in models and h.get('Result') == '0-1'
    )

  played = [g for g in games if g.headers.get('White') in models or g.headers.get('Black') in models]
  for pool in ([g for g in played if won(g)], played, list(games)):
    if pool:
      return max(pool, key=plies)  # max keeps the first of equals: the earliest round.
  return None


def _model_view(train_dir: pathlib.Path, boards: Sequence[chess.Board]) -> list[Any]:
  """The checkpoint's analysis of each board (None for boards without legal moves)."""
  from searchless.play import player as player_lib  # JAX only here.

  player = player_lib.Player.load(str(train_dir))
  live = [i for i, b in enumerate(boards) if any(b.legal_moves)]
  out: list[Any] = [None] * len(boards)
  for start in range(0, len(live), _BATCH):
    chunk = live[start : start + _BATCH]
    for i, analysis in zip(chunk, player.policy.analyse_many([boards[i] for i in chunk])):
      out[i] = analysis
  return out


def _stockfish_view(
  boards: Sequence[chess.Board], color: chess.Color, nodes: int, engine_path: str | None
) -> list[float | None]:
  """Stockfish's win probability for `color` of each board (terminal boards by the rules)."""
  from searchless.core import values
  from searchless.engines import launch

  limit = launch.SearchLimit('nodes', nodes).to_chess(hang_seconds=launch.HANG_SECONDS)
  out: list[float | None] = []
  engine = launch.open_engine(engine_path)
  try:
    for board in boards:
      if board.is_checkmate():
        out.append(0.0 if board.turn == color else 1.0)
      elif board.is_game_over():
        out.append(0.5)
      else:
        info = engine.analyse(board, limit, info=chess.engine.INFO_SCORE)
        out.append(values.score_to_win_probability(info['score'].pov(color)))
  finally:
    launch.close_engine(engine)
  return out


def _positions(game: chess.pgn.Game) -> tuple[list[chess.Board], list[chess.Move], int]:
  """The positions before each move and the final one, the moves, and the given opening's plies (the book ends
  at the move commented 'end of opening')."""
  boards, moves, book_end = [], [], 0
  node: chess.pgn.GameNode = game
  while node.variations:
    nxt = node.variation(0)
    boards.append(node.board())
    moves.append(nxt.move)
    if nxt.comment.strip() == 'end of opening':
      book_end = len(moves)
    node = nxt
  boards.append(node.board())
  return boards, moves, book_end


def analyse_game(
  game: chess.pgn.Game,
  models: set[str],
  *,
  train_dir: pathlib.Path,
  games_file: str,
  stockfish_nodes: int = DEFAULT_STOCKFISH_NODES,
  use_model: bool = True,
  engine_path: str | None = None,
) -> SampleGame:
  """`game` with the model's view (the checkpoint in `train_dir`, unless not `use_model`) and Stockfish's
  (`stockfish_nodes` per position; 0: none) of the moves of `models`' side."""
  h = game.headers
  color = chess.WHITE if h.get('White') in models else chess.BLACK if h.get('Black') in models else None
  boards, moves, book_end = _positions(game)
  notes = []
  analyses: list[Any] = [None] * len(boards)
  if color is not None and use_model:
    try:
      analyses = _model_view(train_dir, boards)
    except Exception as error:  # No checkpoint, no JAX, ...: the game is kept without the model's view.
      notes.append(
        f"The model's view is missing: the checkpoint in `{train_dir}` could not be analysed "
        f'({type(error).__name__}: {error}).'
      )
  stockfish: list[float | None] = [None] * len(boards)
  if color is not None and stockfish_nodes > 0:
    try:
      stockfish = _stockfish_view(boards, color, stockfish_nodes, engine_path)
    except Exception as error:  # No Stockfish: the game is kept without its view.
      notes.append(f"Stockfish's view is missing ({type(error).__name__}: {error}).")

  plies = []
  for i, (board, move) in enumerate(zip(boards, moves)):
    prob, best, a = None, None, analyses[i]
    if board.turn == color and i >= book_end and a is not None:
      if move in a.moves:
        index = a.moves.index(move)
        prob = float(a.win_probs[index] if a.win_probs is not None else a.scores[index])
      top = a.best_move()
      if top is not None and top != move:
        best = board.san(top)
    plies.append(
      {
        'san': board.san(move),
        'uci': move.uci(),
        'color': chess.COLOR_NAMES[board.turn],
        'model_prob': prob,
        'model_best': best,
      }
    )
  # The model's view where it is to move: its own position as it judges it (its best move's value).
  model_view = [
    None if a is None or a.value is None or b.turn != color else float(a.value) for a, b in zip(analyses, boards)
  ]
  return SampleGame(
    games_file=games_file,
    headers={k: h[k] for k in ('Round', 'White', 'Black', 'Result', 'PlyCount', 'Opening') if k in h},
    ending=game.end().comment,
    model_color=None if color is None else chess.COLOR_NAMES[color],
    book_plies=book_end,
    plies=plies,
    model_view=model_view,
    stockfish_view=stockfish,
    stockfish_nodes=stockfish_nodes,
    final_fen=boards[-1].fen(),
    notes=notes,
  )


def analyse(
  run_dir: str | os.PathLike,
  *,
  stockfish_nodes: int = DEFAULT_STOCKFISH_NODES,
  use_model: bool = True,
  engine_path: str | None = None,
) -> pathlib.Path:
  """Analyses the sample game of `run_dir`'s match; writes and returns ``RUN_DIR/report/sample_game.json``."""
  paths = context_lib.RunPaths(pathlib.Path(run_dir))
  if not paths.run_dir.is_dir():
    raise errors.MissingInput(f'run directory {str(paths.run_dir)!r} not found')
  games = context_lib.read_games(paths.games)
  if not games:
    raise errors.MissingInput(f'no games to analyse: {paths.games} is missing or empty (run the match first)')
  results = artefacts.MatchResults.read_or_none(paths.match_results)
  names = sorted({g.headers.get(side, '?') for g in games for side in ('White', 'Black')})
  models = context_lib.model_names(results, names, paths.train)
  game = pick_game(games, models)
  assert game is not None  # There are games.
  analysis = analyse_game(
    game,
    models,
    train_dir=paths.train,
    games_file=str(paths.games),
    stockfish_nodes=stockfish_nodes,
    use_model=use_model,
    engine_path=engine_path,
  )
  analysis.write(paths.sample_game)
  return paths.sample_game
