"""Why a board is not a legal chess position, in words: one home for the reason every reader of boards gives.

>>> import chess
>>> problems(chess.Board('4k3/8/8/8/8/8/8/K3K3 w - - 0 1'))
'too many kings'
>>> problems(chess.Board('4k3/8/8/8/8/8/4Q3/4K3 w - - 0 1')), problems(chess.Board())
('opposite check', '')
"""

import chess


def problems(board: chess.Board) -> str:
  """`board.status()`'s flags as words ('' for a legal position; the rules of `board.chess960` apply)."""
  status = board.status()
  if status == chess.STATUS_VALID:
    return ''
  return ', '.join(str(flag.name).lower().replace('_', ' ') for flag in chess.Status if flag and flag in status)
