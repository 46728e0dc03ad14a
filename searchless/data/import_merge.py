"""The labels of one board from every source merged into one (Beam's `MergeBoards`), and the import's counts.

A board can come from several games and from Lichess's evaluation database: the deepest source's
state value and best move win, and each move keeps its deepest value. Merging is a maximum per
field, so every runner gives the same board whatever the order.
"""

from collections.abc import Iterable, Iterator
import dataclasses

import apache_beam as beam

from searchless.data import lichess_evals
from searchless.data import job_results


def _depth_bucket(value: int | None) -> str:
  return 'unknown' if value is None else str(value)


def _knodes_bucket(value: int | None) -> str:
  """Powers of ten: '0-9', '10-99', ... ('unknown' when the source does not say)."""
  if value is None:
    return 'unknown'
  low = 10 ** (len(str(max(value, 0))) - 1) if value >= 10 else 0
  return f'{low}-{max(9, low * 10 - 1)}'


def labelled_counts(split_board: tuple[str, lichess_evals.Labelled]) -> Iterator[job_results.Count]:
  """The manifest's counts of one labelled board, before merging (depth and knodes per source)."""
  split, board = split_board
  yield f'boards_seen/{split}', 1
  yield f'depth/{board.source}/{_depth_bucket(board.depth)}', 1
  yield f'knodes/{board.source}/{_knodes_bucket(board.knodes)}', 1


def _preference(board: lichess_evals.Labelled) -> tuple:
  """A total order over a board's sources: the deepest wins (database first, then depth, knodes)."""
  return (board.source == 'eval_db', board.depth or -1, board.knodes or -1, board.state_value, board.fen)


# MergeBoards' accumulator: (preferred board, {move: (preference, win prob)}, smallest FEN).
_Merged = tuple[lichess_evals.Labelled | None, dict[str, tuple[tuple, float]], str | None]


class MergeBoards(beam.CombineFn):
  """The labels of one board from every source: the preferred state value and best move, each move's deepest value.

  The accumulator is (preferred board, {move: (preference, win prob)}, smallest FEN): merging is
  a maximum per field, so every runner gives the same board whatever the order.
  """

  def create_accumulator(self) -> _Merged:
    return None, {}, None

  def add_input(self, acc: _Merged, board: lichess_evals.Labelled) -> _Merged:
    rank = _preference(board)
    return self.merge_accumulators(
      [acc, (board, {m: (rank, p) for m, p in zip(board.moves, board.win_probs)}, board.fen)]
    )

  def merge_accumulators(self, accs: Iterable[_Merged]) -> _Merged:
    best: lichess_evals.Labelled | None = None
    moves: dict[str, tuple[tuple, float]] = {}
    fen: str | None = None
    for other_best, other_moves, other_fen in accs:
      if other_best is not None and (best is None or _preference(other_best) > _preference(best)):
        best = other_best
      for move, ranked in other_moves.items():
        if move not in moves or ranked > moves[move]:
          moves[move] = ranked
      if other_fen is not None and (fen is None or other_fen < fen):
        fen = other_fen
    return best, moves, fen

  def extract_output(self, acc: _Merged) -> lichess_evals.Labelled:
    best, moves, fen = acc
    assert best is not None and fen is not None  # A key's accumulator has seen at least one board.
    ordered = sorted(moves.items(), key=lambda item: (-item[1][1], item[0]))  # Best first.
    return dataclasses.replace(
      best, fen=fen, moves=tuple(m for m, _ in ordered), win_probs=tuple(v for _, (_, v) in ordered)
    )


def board_counts(split_board: tuple[str, lichess_evals.Labelled]) -> Iterator[job_results.Count]:
  split, board = split_board
  yield f'boards/{split}', 1
  yield f'moves_valued/{split}', len(board.moves)
  if board.best_move is not None:
    yield f'best_moves/{split}', 1
