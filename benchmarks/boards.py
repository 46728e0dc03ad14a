"""Board sets for the benchmarks, taken from real Lichess games."""

import pathlib

from searchless.data import pgn

ROOT = pathlib.Path(__file__).resolve().parents[1]
LICHESS_999 = ROOT.parent / 'shared' / 'data' / 'games' / 'lichess_db_standard_rated_2021-10_first999.pgn'


def first_games(path: pathlib.Path, min_boards: int) -> tuple[str, list[str]]:
  """The text of the first games of `path` holding >= `min_boards` unique boards, and those boards."""
  texts, boards, seen = [], [], set()
  for raw in pgn.iter_raw_games(str(path)):
    game = pgn.parse_game(raw)
    if not isinstance(game, pgn.Game):
      continue
    texts.append(raw.text + '\n')
    for fen in game.fens:
      if fen not in seen:
        seen.add(fen)
        boards.append(fen)
    if len(boards) >= min_boards:
      break
  return ''.join(texts), boards


def spread_boards(path: pathlib.Path, count: int, stride: int = 7) -> list[str]:
  """`count` unique non-terminal boards, every `stride`-th board across many games."""
  import chess

  out, seen, index = [], set(), 0
  for raw in pgn.iter_raw_games(str(path)):
    game = pgn.parse_game(raw)
    if not isinstance(game, pgn.Game):
      continue
    for fen in game.fens:
      index += 1
      if index % stride or fen in seen or not any(chess.Board(fen).legal_moves):
        continue
      seen.add(fen)
      out.append(fen)
      if len(out) == count:
        return out
  return out
