"""Searchless policies over a trained predictor: score every legal move of a board.

A `predictor.Predictor` runs the model on batches of token sequences with a
fixed set of batch shapes (nothing recompiles per move). The three policies of
the paper read it the way the reference engines do:

* action-value: one sequence per legal move (77 FEN tokens, the move, a dummy
  bucket), the move's win probability = sum over buckets of p(bucket) * centre;
* state-value: the board after each legal move (77 tokens, a dummy), the value
  seen from the mover (bucket distribution flipped); and the board's own value;
* behavioral cloning: one sequence for the board, the 1968 action log-probs
  renormalised over the legal moves.

A board-packed model (``packing='board'``, `searchless.model.transformer`) is read by
`PackedActionValuePolicy` over a `predictor.PackedPredictor`: one row per board, every
legal move scored in that one pass. `predictor.predictor_for` picks the predictor a
model needs; `make_policy` the policy.

Moves are in the reference order (by action index) everywhere, so `Analysis`
arrays line up with `moves`.

>>> import chess
>>> from searchless.model import loading
>>> model_config, params, experiment = loading.load_model('pretrained-transformer')  # A shipped model.
>>> from searchless.play import predictor
>>> policy = make_policy('action_value', predictor.predictor_for(model_config, params))
>>> board = chess.Board()
>>> analysis = policy.analyse(board)
>>> len(analysis.moves), analysis.best_move() in board.legal_moves, isinstance(policy, Policy)
(20, True, True)
>>> round(float(np.exp(analysis.log_probs[0]).sum()), 6)  # A move's distribution over the value buckets.
1.0
"""

import dataclasses
from collections.abc import Sequence
import typing
from typing import Any

import chess
import numpy as np

from searchless.core import moves as moves_lib
from searchless.core import tokenizer
from searchless.core import values
from searchless.play import predictor as predictor_lib
from searchless.plumbing import errors

ACTION_VALUE = 'action_value'
STATE_VALUE = 'state_value'
BEHAVIORAL_CLONING = 'behavioral_cloning'
POLICIES = (ACTION_VALUE, STATE_VALUE, BEHAVIORAL_CLONING)
# Each board's legal moves, in any order, where a caller of `analyse_many` has them already (None: generated).
Legal = Sequence[Sequence[chess.Move]] | None


def model_fen(board: chess.Board) -> str:
  """The FEN the model reads: `board.fen()`, with a Chess960 board's castling rights as KQkq.

  The tokenizer knows only standard castling letters (ChessBench has no Chess960);
  a right is K (q) when its rook is on the king's h-side (a-side), as for the
  standard position, whatever files king and rook stand on.

  >>> model_fen(chess.Board.from_chess960_pos(0))  # Shredder-FEN: ... w HFhf - 0 1.
  'bbqnnrkr/pppppppp/8/8/8/8/PPPPPPPP/BBQNNRKR w KQkq - 0 1'
  """
  if not board.chess960:
    return board.fen()
  letters = ''
  for color, (h_side, a_side) in ((chess.WHITE, 'KQ'), (chess.BLACK, 'kq')):
    king = board.king(color)
    rooks = [chess.square_file(r) for r in chess.scan_forward(board.clean_castling_rights() & board.occupied_co[color])]
    if king is not None:
      letters += h_side * any(f > chess.square_file(king) for f in rooks) + a_side * any(
        f < chess.square_file(king) for f in rooks
      )
  fields = board.fen(en_passant='legal').split(' ')
  fields[2] = letters or '-'
  return ' '.join(fields)


def model_move(board: chess.Board, move: chess.Move) -> str:
  """The move as the model's vocabulary writes it: `move.uci()`, castling as the king's own move.

  On a Chess960 board python-chess writes castling king-takes-rook (``b1a1``);
  the model learned castling as the king's move to the g- or c-file (``e1g1``),
  which is what it gets here. Where that square is the king's own, or the same
  king move is also legal without castling, king-takes-rook stays.

  >>> board = chess.Board('1r2k2r/8/8/8/8/8/8/1R2K2R w HBhb - 0 1', chess960=True)
  >>> [model_move(board, m) for m in board.legal_moves if board.is_castling(m)]
  ['e1g1', 'e1c1']
  """
  if not (board.chess960 and board.is_castling(move)):
    return move.uci()
  rank = chess.square_rank(move.from_square)
  king_to = chess.square(6 if board.is_kingside_castling(move) else 2, rank)
  plain = chess.Move(move.from_square, king_to)
  if king_to == move.from_square or (board.is_legal(plain) and not board.is_castling(plain)):
    return move.uci()
  return plain.uci()


def model_actions(board: chess.Board, moves: Sequence[chess.Move]) -> list[int]:
  """The vocabulary indices of `moves` on `board` (`model_move`)."""
  return [moves_lib.MOVE_TO_ACTION[model_move(board, m)] for m in moves]


def ordered_legal_moves(board: chess.Board, legal: Sequence[chess.Move] | None = None) -> list[chess.Move]:
  """Legal moves sorted by action index (the reference's order); `legal`: them in any order, if at hand."""
  return _ordered_moves_and_actions(board, legal)[0]


def _ordered_moves_and_actions(
  board: chess.Board, legal: Sequence[chess.Move] | None = None
) -> tuple[list[chess.Move], list[int]]:
  """`ordered_legal_moves` and their `model_actions`, from one look-up of each move; `legal`: the board's legal
  moves in any order, when the caller has them (else they are generated)."""
  legal = list(board.legal_moves) if legal is None else legal
  pairs = sorted(zip(model_actions(board, legal), legal), key=lambda pair: pair[0])
  return [m for _, m in pairs], [a for a, _ in pairs]


def _given(boards: Sequence[chess.Board], legal: Legal) -> Sequence[Sequence[chess.Move] | None]:
  """Each board's legal moves as given to `analyse_many` (None: to generate)."""
  if legal is None:
    return [None] * len(boards)
  if len(legal) != len(boards):
    raise ValueError(f'analyse_many: {len(legal)} lists of legal moves for {len(boards)} boards')
  return legal


def _moves_and_actions(
  boards: Sequence[chess.Board], legal: Legal
) -> tuple[tuple[list[chess.Move], ...], tuple[list[int], ...]]:
  """Each board's `_ordered_moves_and_actions` (from its `legal` moves, where given)."""
  pairs = [_ordered_moves_and_actions(board, moves) for board, moves in zip(boards, _given(boards, legal))]
  return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)


@dataclasses.dataclass(frozen=True)
class Analysis:
  """A policy's view of one board; arrays follow `moves` (the reference order)."""

  fen: str
  moves: tuple[chess.Move, ...]
  scores: np.ndarray  # [M] what the policy maximises: win probability (AV, SV) or probability (BC).
  log_probs: np.ndarray  # [M, buckets] (AV, SV: the mover's view) or [M] action log-probs (BC).
  win_probs: np.ndarray | None  # [M] the mover's win probability after each move; None for BC.
  value: float | None  # The board's win probability for the mover (SV: its own head; AV: best move's).

  def best_move(self) -> chess.Move | None:
    return self.moves[int(np.argmax(self.scores))] if self.moves else None

  def restrict(self, allowed: Sequence[chess.Move]) -> 'Analysis':
    """This analysis with only the `allowed` moves (kept in the reference order)."""
    keep = [i for i, m in enumerate(self.moves) if m in set(allowed)]
    return dataclasses.replace(
      self,
      moves=tuple(self.moves[i] for i in keep),
      scores=self.scores[keep],
      log_probs=self.log_probs[keep],
      win_probs=None if self.win_probs is None else self.win_probs[keep],
    )

  def ranked(self) -> list[tuple[chess.Move, float]]:
    """(move, score) pairs, best first."""
    order = np.argsort(-self.scores, kind='stable')
    return [(self.moves[i], float(self.scores[i])) for i in order]


@typing.runtime_checkable
class Policy(typing.Protocol):
  """What plays and evaluation need of a model: its analysis of boards (see `make_policy`)."""

  kind: str  # action_value | state_value | behavioral_cloning.

  def analyse(self, board: chess.Board) -> Analysis:
    """The policy's view of one board."""

  def analyse_many(self, boards: Sequence[chess.Board], legal: Legal = None) -> list[Analysis]:
    """Several boards in shared batches (faster than one by one); `legal`: each board's legal moves in any
    order, where the caller has them already (else generated here)."""

  def warm_up(self, max_boards: int = 1, *, background: bool = False) -> None:
    """Compiles what play needs (before the first move); `max_boards`: what calls of that many boards need;
    `background`: one shape now, the others on a worker thread (calls meanwhile use the compiled ones)."""


class _Policy:
  """Common part of the policies: the predictor and the bucket centres."""

  kind: str
  sequence_length: int

  def __init__(self, predictor: Any):  # A Predictor (a PackedPredictor for the packed policy).
    self.predictor = predictor
    self.num_buckets = predictor.model_config.output_size
    _, self.centres = values.uniform_buckets(self.num_buckets)  # [K]

  def analyse(self, board: chess.Board) -> Analysis:
    return self.analyse_many([board])[0]

  def warm_up(self, max_boards: int = 1, *, background: bool = False) -> None:
    """Compiles what play needs and calibrates the batch plan (every batch shape, whatever `max_boards`)."""
    del max_boards
    self.predictor.warm_up(self.sequence_length, background=background)

  def close(self) -> None:
    """Stops any compiling in the background."""
    self.predictor.close()

  def analyse_many(self, boards: Sequence[chess.Board], legal: Legal = None) -> list[Analysis]:
    """Analyses several boards in shared batches (faster than one by one); `legal` as `Policy.analyse_many`."""
    raise NotImplementedError


def _fens_tokens(fens: Sequence[str], extra: int) -> np.ndarray:
  tokens = tokenizer.tokenize_batch(list(fens)).astype(np.int32)  # [N, 77]
  return np.pad(tokens, ((0, 0), (0, extra)))  # [N, 77 + extra]; extra slots 0.


class ActionValuePolicy(_Policy):
  """P(bucket | board, move) for every legal move, in one batched pass."""

  kind = ACTION_VALUE
  sequence_length = tokenizer.SEQUENCE_LENGTH + 2

  def analyse_many(self, boards: Sequence[chess.Board], legal: Legal = None) -> list[Analysis]:
    legal, actions = _moves_and_actions(boards, legal)
    counts = [len(m) for m in legal]
    states = _fens_tokens([model_fen(b) for b in boards], 2)  # [N, 79]
    sequences = np.repeat(states, counts, axis=0)  # [sum M, 79]
    sequences[:, tokenizer.SEQUENCE_LENGTH] = [a for acts in actions for a in acts]
    log_probs = self.predictor(sequences)  # [sum M, K]
    fens = [b.fen() for b in boards]
    return self._analyses(fens, legal, np.split(log_probs, np.cumsum([len(ms) for ms in legal])[:-1]))

  def _analyses(self, fens, legal, per_board) -> list[Analysis]:
    """Analyses from each board's [M, K] bucket log-probs (moves in the reference order)."""
    results = []
    for fen, ms, lp in zip(fens, legal, per_board):
      wp = np.exp(lp) @ self.centres  # [M]
      results.append(Analysis(fen, tuple(ms), wp, lp, wp, float(wp.max()) if len(ms) else None))
    return results


class PackedActionValuePolicy(ActionValuePolicy):
  """P(bucket | board, move) for every legal move from a board-packed model: one row per board."""

  def analyse_many(self, boards: Sequence[chess.Board], legal: Legal = None) -> list[Analysis]:
    legal, actions = _moves_and_actions(boards, legal)
    model_fens = [model_fen(b) for b in boards]
    fens = [f if not b.chess960 else b.fen() for f, b in zip(model_fens, boards)]  # The same but for Chess960.
    tokens = tokenizer.tokenize_batch(model_fens)  # [N, 77]
    log_probs = self.predictor(tokens, [np.array(a, np.int32) for a in actions])  # N x [M, K]
    return self._analyses(fens, legal, log_probs)

  def warm_up(self, max_boards: int = 1, *, background: bool = False) -> None:
    self.predictor.warm_up(max_boards, background=background)


class StateValuePolicy(_Policy):
  """P(bucket | board) of the board and of the board after every legal move."""

  kind = STATE_VALUE
  sequence_length = tokenizer.SEQUENCE_LENGTH + 1

  def analyse_many(self, boards: Sequence[chess.Board], legal: Legal = None) -> list[Analysis]:
    ordered: list[list[chess.Move]] = []
    fens = []
    for board, moves in zip(boards, _given(boards, legal)):
      ms = ordered_legal_moves(board, moves)
      ordered.append(ms)
      fens.append(model_fen(board))
      for m in ms:
        board.push(m)
        fens.append(model_fen(board))
        board.pop()
    log_probs = self.predictor(_fens_tokens(fens, 1))  # [sum (1 + M), K]
    results, start = [], 0
    for board, ms in zip(boards, ordered):
      own = log_probs[start]
      following = log_probs[start + 1 : start + 1 + len(ms)][:, ::-1]  # [M, K]: the mover's view.
      start += 1 + len(ms)
      wp = np.exp(following) @ self.centres
      results.append(
        Analysis(board.fen(), tuple(ms), wp, np.ascontiguousarray(following), wp, float(np.exp(own) @ self.centres))
      )
    return results


class BehavioralCloningPolicy(_Policy):
  """P(action | board) over the 1968 actions, renormalised to the legal moves."""

  kind = BEHAVIORAL_CLONING
  sequence_length = tokenizer.SEQUENCE_LENGTH + 1

  def analyse_many(self, boards: Sequence[chess.Board], legal: Legal = None) -> list[Analysis]:
    log_probs = self.predictor(_fens_tokens([model_fen(b) for b in boards], 1))  # [N, 1968]
    results = []
    for board, moves, row in zip(boards, _given(boards, legal), log_probs):
      ms = ordered_legal_moves(board, moves)
      logits = row[model_actions(board, ms)].astype(np.float64)
      logits = logits - np.logaddexp.reduce(logits) if len(ms) else logits  # [M]
      results.append(Analysis(board.fen(), tuple(ms), np.exp(logits), logits, None, None))
    return results


_POLICY_CLASSES = {
  ACTION_VALUE: ActionValuePolicy,
  STATE_VALUE: StateValuePolicy,
  BEHAVIORAL_CLONING: BehavioralCloningPolicy,
}


def make_policy(kind: str, predictor: predictor_lib.Predictor | predictor_lib.PackedPredictor) -> Policy:
  """The `kind` policy (one of POLICIES) over `predictor`; checks the output size fits."""
  if kind not in _POLICY_CLASSES:
    raise errors.BadInput(f'unknown policy {kind!r}; expected one of {POLICIES}')
  if isinstance(predictor, predictor_lib.PackedPredictor):
    if kind != ACTION_VALUE:
      raise errors.BadInput(f'a board-packed model scores moves: it plays the action_value policy, not {kind}')
    return PackedActionValuePolicy(predictor)
  output_size = predictor.model_config.output_size
  if (kind == BEHAVIORAL_CLONING) != (output_size == moves_lib.NUM_ACTIONS):
    raise errors.BadInput(f'a {kind} policy does not fit a model with {output_size} outputs')
  return _POLICY_CLASSES[kind](predictor)
