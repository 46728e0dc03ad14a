"""Board-level records: a whole board (every legal move's value) in one record.

A `records.BoardValue` holds a board's FEN, every legal move with the mover's
win probability after it, and the board's own value. It carries exactly what
the three ChessBench datasets carry for that board, with the FEN stored once:

* action_value: one (fen, move, win_prob) per move;
* state_value: (fen, state_value);
* behavioral_cloning: (fen, best move), the highest-valued move (the first in
  the board's move order among equals). A checkmate or stalemate board has no
  moves, so no action-value or behavioral-cloning record.

Moves are kept in the reference order (by action index), so a board's record
does not depend on the order its action-value records came in.

>>> fen = '7k/8/8/8/8/8/8/K7 w - - 0 1'
>>> board = from_action_values(fen, [('a1b2', 0.5), ('a1a2', 0.4), ('a1b1', 0.5)])
>>> board.moves, board.state_value
(('a1b1', 'a1a2', 'a1b2'), 0.5)
>>> to_chessbench(board)['behavioral_cloning']
[BehavioralCloning(fen='7k/8/8/8/8/8/8/K7 w - - 0 1', move='a1b1')]
>>> mismatch(fen, ['a1a2', 'a1b1'])
'missing a1b2'

`searchless.data.convert`'s Beam transforms convert whole datasets with these
functions (any size, on any runner; `searchless-convert`).
"""

from collections.abc import Iterable, Sequence

import chess

from searchless.core import moves as moves_lib
from searchless.core import records


def mismatch(fen: str, moves: Sequence[str]) -> str | None:
  """Why `moves` are not exactly the legal moves of `fen` (None when they are).

  >>> mismatch('7k/8/8/8/8/8/8/K7 w - - 0 1', ['a1a2', 'a1b1', 'a1b2', 'a1b2'])
  'repeated a1b2'
  >>> mismatch('not a fen', [])
  "invalid FEN: expected 'w' or 'b' for turn part of fen: 'not a fen'"
  """
  try:
    board = chess.Board(fen)
  except ValueError as e:
    return f'invalid FEN: {e}'
  legal = {m.uci() for m in board.legal_moves}
  seen, repeated = set(), []
  for move in moves:
    if move in seen:
      repeated.append(move)
    seen.add(move)
  reasons = []
  if missing := sorted(legal - seen):
    reasons.append('missing ' + ' '.join(missing[:8]) + (f' (+{len(missing) - 8})' if len(missing) > 8 else ''))
  if extra := sorted(seen - legal):
    reasons.append('not legal ' + ' '.join(extra[:8]) + (f' (+{len(extra) - 8})' if len(extra) > 8 else ''))
  if repeated:
    reasons.append('repeated ' + ' '.join(sorted(set(repeated))[:8]))
  return '; '.join(reasons) or None


def from_action_values(
  fen: str, action_values: Iterable[tuple[str, float]], state_value: float | None = None
) -> records.BoardValue:
  """One board's (move, win_prob) pairs (any order) -> its record, moves in the reference order.

  `state_value` defaults to the best move's value (0.5 for a board without
  moves); the annotation pipeline passes its own search's value.
  """
  pairs = sorted(action_values, key=lambda mv: moves_lib.MOVE_TO_ACTION[mv[0]])
  win_probs = tuple(float(p) for _, p in pairs)
  if state_value is None:
    state_value = max(win_probs) if win_probs else 0.5
  return records.BoardValue(fen, tuple(m for m, _ in pairs), win_probs, float(state_value))


def best_move(board: records.BoardValue) -> str | None:
  """The highest-valued move (the first of equals in the board's order); None without moves."""
  if not board.moves:
    return None
  best = max(range(len(board.moves)), key=lambda i: (board.win_probs[i], -i))
  return board.moves[best]


def to_chessbench(board: records.BoardValue) -> dict[str, list]:
  """{kind: records} of the three ChessBench datasets for one board."""
  best = best_move(board)
  return {
    'action_value': [records.ActionValue(board.fen, m, p) for m, p in zip(board.moves, board.win_probs)],
    'state_value': [records.StateValue(board.fen, board.state_value)],
    'behavioral_cloning': [] if best is None else [records.BehavioralCloning(board.fen, best)],
  }
