"""The "A sample game" section: one game of the match, move by move, as the model and Stockfish saw it.

Reads ``report/sample_game.json`` (`sample_game.SampleGame`), which the
``searchless-analyse-game`` step writes; the section itself runs no model and
no engine.
"""

from collections.abc import Sequence
import html
from typing import NamedTuple

import chess
import chess.svg

from searchless.report import figures
from searchless.report import sample_game as sample_game_lib
from searchless.report.context import Context, read_games
from searchless.report.document import Callout, Cell, Image, Section, Svg, Table, Text, format_percent

GAME_PNG = 'sample_game.png'
GAME_SVG = 'sample_game_final.svg'


class GamePly(NamedTuple):
  """One move of the sample game, as the move table shows it."""

  ply: int  # 0-based index of the move in the game.
  san: str
  color: chess.Color
  book: bool  # Part of the given opening.
  by_model: bool
  model_move_prob: float | None  # The model's win probability for the move it played (its own view).
  model_best: str | None  # The model's preferred move (SAN) when it differs from the move played.


def _cell(p: GamePly | None, stockfish: Sequence[float | None]) -> Cell:
  """A move with the model's and Stockfish's numbers (and Stockfish's drop of 10 points or more)."""
  if p is None:
    return Cell('', '')
  md_move, html_move = (
    (f'**{p.san}**', f'<strong>{html.escape(p.san)}</strong>')
    if p.by_model
    else ((f'*{p.san}*', f'<em>{html.escape(p.san)}</em>') if p.book else (p.san, html.escape(p.san)))
  )
  notes, drop_text = [], ''
  if p.by_model:
    if p.model_move_prob is not None:
      notes.append(f'model {format_percent(p.model_move_prob, 0)}' + (f' [{p.model_best}]' if p.model_best else ''))
    before, after = stockfish[p.ply], stockfish[p.ply + 1]
    if after is not None:
      notes.append(f'SF {format_percent(after, 0)}')
      if before is not None and before - after >= 0.1:
        drop_text = f'−{100 * (before - after):.0f} pts'
  text = ' · '.join(notes + ([drop_text] if drop_text else []))
  html_notes = html.escape(' · '.join(notes)) + (f' · <span class="drop">{drop_text}</span>' if drop_text else '')
  return Cell(
    md_move + (f' ({text})' if text else ''), html_move + (f' <span class="muted">{html_notes}</span>' if text else '')
  )


def move_table(rows: Sequence[GamePly], stockfish: Sequence[float | None]) -> Table:
  """Full moves as rows: number, White's move, Black's move, each with the model's and Stockfish's numbers."""
  by_number: dict[int, list[GamePly | None]] = {}
  # Rows by full move: a game from a FEN with Black to move starts with an empty White cell.
  start_black = rows[0].color == chess.BLACK if rows else False
  for p in rows:
    k = (p.ply + (1 if start_black else 0)) // 2
    by_number.setdefault(k, [None, None])[0 if p.color == chess.WHITE else 1] = p
  table_rows = [[k + 1, _cell(w, stockfish), _cell(b, stockfish)] for k, (w, b) in sorted(by_number.items())]
  return Table(['#', 'White', 'Black'], table_rows, numeric=(0,))


def _color(name: str | None) -> chess.Color | None:
  """'white' -> chess.WHITE, 'black' -> chess.BLACK, None -> None."""
  return None if name is None else name == 'white'


def _plies(game: sample_game_lib.SampleGame) -> list[GamePly]:
  model_color = _color(game.model_color)
  rows = []
  for i, p in enumerate(game.plies):
    color = p['color'] == 'white'
    rows.append(
      GamePly(
        i,
        p['san'],
        color,
        i < game.book_plies,
        color == model_color and i >= game.book_plies,
        p.get('model_prob'),
        p.get('model_best'),
      )
    )
  return rows


def sample_game_section(ctx: Context) -> Section:
  """The sample game of ``report/sample_game.json``: its moves, the win-probability curves, its final position."""
  section = Section('A sample game', 'sample-game')
  path = ctx.paths.sample_game
  game = sample_game_lib.SampleGame.read_or_none(path)
  if game is None:
    if not read_games(ctx.paths.games):
      return ctx.not_run(section, f'No games: `{ctx.paths.games}` is missing or empty.', 'match')
    return ctx.not_run(section, f'No sample game analysed: `{path}` is missing.', 'analyse_game')
  h = game.headers
  model_color = _color(game.model_color)
  won = model_color is not None and h.get('Result') == ('1-0' if model_color == chess.WHITE else '0-1')
  blocks = section.blocks
  blocks.append(
    Text(
      f'Round {h.get("Round", "?")}: **{h.get("White", "?")}** (White) vs **{h.get("Black", "?")}** (Black), '
      f'**{h.get("Result", "*")}** after {h.get("PlyCount", "?")} plies'
      + (f', opening {h["Opening"]}' if h.get('Opening') else '')
      + (f'; {game.ending}' if game.ending else '')
      + '. '
      + ("Chosen as the model's longest win." if won else 'Chosen as the longest game (the model won none).')
    )
  )
  blocks.append(
    Text(
      "How to read the moves: the model's moves are **bold**, the given opening's in italics. After each "
      'model move: `model` = the win probability the model predicted for the move it played (in brackets '
      "its top-scored move when the play rules chose another); `SF` = Stockfish's win probability for "
      f"the model's side after the move ({game.stockfish_nodes:,} nodes per position); `−N pts` = how much "
      'that dropped with the move, when 10 points or more.'
    )
  )
  if ctx.paths.games.exists() and ctx.paths.games.stat().st_mtime > path.stat().st_mtime:
    blocks.append(
      Callout(
        'note',
        f'`{path}` is older than `{ctx.paths.games}`: it may show a game of an earlier match. '
        f'Rerun `{ctx.cmds["analyse_game"]}`.',
      )
    )
  for note in game.notes:
    blocks.append(Callout('note', note))
  stockfish = game.stockfish_view
  blocks.append(move_table(_plies(game), stockfish))
  if model_color is not None and any(v is not None for v in game.model_view + stockfish):
    side = chess.COLOR_NAMES[model_color]
    figures.plot_game(
      list(range(len(game.model_view))),
      game.model_view,
      stockfish,
      f'{h.get("White", "?")} – {h.get("Black", "?")} {h.get("Result", "*")}: win probability of the model ({side})',
      ctx.out_dir / GAME_PNG,
      opening_plies=game.book_plies,
    )
    blocks.append(
      Image(
        GAME_PNG,
        'win probability over the game',
        "Blue: the model's view of its position when it is to move (its best move's predicted win "
        "probability); red: Stockfish's, before every ply.",
      )
    )
  final = chess.Board(game.final_fen)
  last = chess.Move.from_uci(game.plies[-1]['uci']) if game.plies else None
  svg = chess.svg.board(
    final, size=320, lastmove=last, orientation=model_color if model_color is not None else chess.WHITE
  )
  (ctx.out_dir / GAME_SVG).write_text(svg)
  blocks.append(Svg(GAME_SVG, svg, f'Final position ({h.get("Result", "*")}): {game.final_fen}'))
  return section
