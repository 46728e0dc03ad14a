"""Searchless policies over a trained predictor: score every legal move of a board.

`Predictor` runs the model on batches of token sequences with a fixed set of
batch shapes (nothing recompiles per move: a board's moves are padded up to
the next bucket, big inputs are cut into the largest). The three policies of
the paper read it the way the reference engines do:

* action-value: one sequence per legal move (77 FEN tokens, the move, a dummy
  bucket), the move's win probability = sum over buckets of p(bucket) * centre;
* state-value: the board after each legal move (77 tokens, a dummy), the value
  seen from the mover (bucket distribution flipped); and the board's own value;
* behavioral cloning: one sequence for the board, the 1968 action log-probs
  renormalised over the legal moves.

A board-packed model (``packing='board'``, `searchless.model.transformer`) is read by
`PackedActionValuePolicy` over a `PackedPredictor`: one row per board, every
legal move scored in that one pass (move slots padded to `MOVE_BUCKETS`).
`predictor_for` picks the predictor a model needs; `make_policy` the policy.

Moves are in the reference order (by action index) everywhere, so `Analysis`
arrays line up with `moves`.

>>> import chess
>>> from searchless.training import checkpoint
>>> model_config, params, experiment = checkpoint.load_model('pretrained-transformer')  # A shipped model.
>>> policy = make_policy('action_value', predictor_for(model_config, params))
>>> analysis = policy.analyse(chess.Board())
>>> analysis.best_move(), isinstance(policy, Policy)
(Move.from_uci('d2d4'), True)
"""

import dataclasses
import time
from collections.abc import Sequence
import typing
from typing import Any

import chess
import haiku as hk
import jax
import jax.numpy as jnp
from jax.typing import DTypeLike
import numpy as np

from searchless.model import transformer as model
from searchless.core import moves as moves_lib
from searchless.core import tokenizer
from searchless.core import values

ACTION_VALUE = 'action_value'
STATE_VALUE = 'state_value'
BEHAVIORAL_CLONING = 'behavioral_cloning'
POLICIES = (ACTION_VALUE, STATE_VALUE, BEHAVIORAL_CLONING)

# Batch shapes the predictor is compiled for (218 legal moves at most). A board's
# moves go in a few calls of these shapes (`Predictor._chunks`).
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
# Packed model: move slots per row (a board's moves padded up to the next) and boards per call.
MOVE_BUCKETS = (16, 32, 48, 64, 96, 128, 256)
BOARD_BUCKETS = (1, 4, 16, 64)


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
          f < chess.square_file(king) for f in rooks)
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


def ordered_legal_moves(board: chess.Board) -> list[chess.Move]:
  """Legal moves sorted by action index (the reference's order)."""
  legal = list(board.legal_moves)
  return [m for _, m in sorted(zip(model_actions(board, legal), legal), key=lambda pair: pair[0])]


class Predictor:
  """Last-position log-probs of token sequences, jitted on fixed batch shapes.

  `predictor(sequences [N, T] int) -> [N, V] float32` for any N: rows are cut
  into chunks of the bucket sizes, trading padding against calls (`_chunks`).
  """

  def __init__(self, model_config: model.ModelConfig, params: hk.Params, *, compute_dtype: DTypeLike = jnp.float32,
               batch_buckets: Sequence[int] = BATCH_BUCKETS):
    self.model_config = model_config
    self._params = jax.device_put(params)
    self._apply = jax.jit(model.build(model_config, compute_dtype, last_only=True).apply)
    self._buckets = tuple(sorted(batch_buckets))
    self.sequences_run = 0  # Rows sent through the model, padding included.
    self.call_cost = 8.0  # Fixed cost of one call, in rows' worth of compute (`warm_up` measures it).
    self._plans: dict[int, list[tuple[int, int]]] = {}

  def _chunks(self, rows: int) -> list[tuple[int, int]]:
    """(rows, batch shape) per call: the plan of least modelled cost (`call_cost` per call +
    1 per row computed, padding included), found by dynamic programming over the buckets."""
    if rows not in self._plans:
      cost: dict[int, float] = {0: 0.0}
      plan: dict[int, list[tuple[int, int]]] = {0: []}
      for n in range(1, rows + 1):
        options = []
        for b in self._buckets:
          rest = max(n - b, 0)
          options.append((self.call_cost + b + cost[rest], b, rest))
        best, b, rest = min(options)
        cost[n], plan[n] = best, [(n - rest, b)] + plan[rest]
      self._plans[rows] = plan[rows]
    return self._plans[rows]

  def __call__(self, sequences: np.ndarray) -> np.ndarray:
    sequences = np.asarray(sequences, np.int32)  # [N, T]
    outputs, start = [], 0
    for rows, size in self._chunks(len(sequences)):
      padded = np.zeros((size, sequences.shape[1]), np.int32)
      padded[:rows] = sequences[start:start + rows]
      outputs.append((self._apply(self._params, None, padded), rows))  # Dispatched asynchronously.
      start += rows
      self.sequences_run += size
    if not outputs:
      return np.zeros((0, self.model_config.output_size), np.float32)
    return np.concatenate([np.asarray(out)[:rows] for out, rows in outputs])  # [N, V]

  def warm_up(self, sequence_length: int) -> None:
    """Compiles every batch shape for `sequence_length` tokens and measures the cost of a call."""
    for size in self._buckets:
      self._apply(self._params, None, np.zeros((size, sequence_length), np.int32)).block_until_ready()
    small = self._buckets[0]
    large = min(self._buckets, key=lambda b: abs(b - 32))  # Big enough to see the per-row cost.
    if large <= small:
      return
    seconds = {}
    for size in (small, large):
      batch = np.zeros((size, sequence_length), np.int32)
      start = time.perf_counter()
      for _ in range(2):
        self._apply(self._params, None, batch).block_until_ready()
      seconds[size] = (time.perf_counter() - start) / 2
    per_row = max((seconds[large] - seconds[small]) / (large - small), 1e-9)
    self.call_cost = float(np.clip((seconds[small] - small * per_row) / per_row, 0.0, 64.0))
    self._plans.clear()


class PackedPredictor:
  """Log-probs of every move of whole boards through a board-packed model, on fixed shapes.

  `predictor(fen_tokens [N, 77], actions: N arrays [M_i]) -> N arrays [M_i, V]`.
  A board's moves are padded up to the next of `move_buckets` (-1 slots); the
  boards of one move bucket go in calls of `board_buckets` rows (padded with
  empty boards), so nothing recompiles per board.
  """

  def __init__(self, model_config: model.ModelConfig, params: hk.Params, *, compute_dtype: DTypeLike = jnp.float32,
               move_buckets: Sequence[int] = MOVE_BUCKETS, board_buckets: Sequence[int] = BOARD_BUCKETS):
    if not model_config.packed:
      raise ValueError('PackedPredictor needs a board-packed model (packing=board); use Predictor')
    self.model_config = model_config
    self._params = jax.device_put(params)
    self._apply = jax.jit(model.build(model_config, compute_dtype).apply)
    self._move_buckets = tuple(sorted(move_buckets))
    self._board_buckets = tuple(sorted(board_buckets))
    self.rows_run = 0  # Rows (boards) sent through the model, padding included.

  def _slots(self, num_moves: int) -> int:
    for size in self._move_buckets:
      if num_moves <= size:
        return size
    raise ValueError(f'{num_moves} moves exceed the largest move bucket {self._move_buckets[-1]}')

  def _board_chunks(self, rows: int) -> list[tuple[int, int]]:
    """(rows, batch shape) per call: pad up to the next bucket when that wastes less than
    half of it, else fill the largest bucket that fits."""
    chunks = []
    while rows > 0:
      above = [b for b in self._board_buckets if b >= rows]
      size = above[0] if above and 2 * rows > above[0] else max(b for b in self._board_buckets if b <= rows)
      chunks.append((min(rows, size), size))
      rows -= min(rows, size)
    return chunks

  def __call__(self, fen_tokens: np.ndarray, actions: Sequence[np.ndarray]) -> list[np.ndarray]:
    fen_tokens = np.asarray(fen_tokens, np.int32)  # [N, 77]
    groups: dict[int, list[int]] = {}
    for i, acts in enumerate(actions):
      groups.setdefault(self._slots(max(len(acts), 1)), []).append(i)
    pending = []
    for slots, members in sorted(groups.items()):
      start = 0
      for rows, size in self._board_chunks(len(members)):
        batch = np.full((size, tokenizer.SEQUENCE_LENGTH + slots), -1, np.int32)  # [B, 77 + M]
        batch[:, :tokenizer.SEQUENCE_LENGTH] = 0
        chunk = members[start:start + rows]
        for row, i in enumerate(chunk):
          batch[row, :tokenizer.SEQUENCE_LENGTH] = fen_tokens[i]
          batch[row, tokenizer.SEQUENCE_LENGTH:tokenizer.SEQUENCE_LENGTH + len(actions[i])] = actions[i]
        pending.append((chunk, self._apply(self._params, None, batch)))  # Dispatched asynchronously.
        self.rows_run += size
        start += rows
    out: list[Any] = [None] * len(actions)  # Each filled with its [M, V] below.
    for chunk, result in pending:
      result = np.asarray(result)  # [B, M, V]
      for row, i in enumerate(chunk):
        out[i] = result[row, :len(actions[i])]
    return out

  def warm_up(self, max_boards: int = 1) -> None:
    """Compiles, for every move bucket, the board buckets that calls of up to `max_boards` boards
    use (1: what play needs; a search's batch size: what its batches need)."""
    needed = [b for b in self._board_buckets if b < max_boards] + [
        min([b for b in self._board_buckets if b >= max_boards], default=self._board_buckets[-1])]
    for slots in self._move_buckets:
      for boards in needed:
        batch = np.zeros((boards, tokenizer.SEQUENCE_LENGTH + slots), np.int32)
        self._apply(self._params, None, batch).block_until_ready()


def predictor_for(model_config: model.ModelConfig, params: hk.Params, *,
                  compute_dtype: DTypeLike = jnp.float32) -> Predictor | PackedPredictor:
  """The predictor a model needs: `PackedPredictor` for a board-packed model, else `Predictor`."""
  cls = PackedPredictor if model_config.packed else Predictor
  return cls(model_config, params, compute_dtype=compute_dtype)


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
        self, moves=tuple(self.moves[i] for i in keep), scores=self.scores[keep], log_probs=self.log_probs[keep],
        win_probs=None if self.win_probs is None else self.win_probs[keep])

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

  def analyse_many(self, boards: Sequence[chess.Board]) -> list[Analysis]:
    """Several boards in shared batches (faster than one by one)."""

  def warm_up(self, max_boards: int = 1) -> None:
    """Compiles what play needs (before the first move); `max_boards`: what calls of that many boards need."""


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

  def warm_up(self, max_boards: int = 1) -> None:
    """Compiles what play needs and calibrates the batch plan (every batch shape, whatever `max_boards`)."""
    del max_boards
    self.predictor.warm_up(self.sequence_length)

  def analyse_many(self, boards: Sequence[chess.Board]) -> list[Analysis]:
    """Analyses several boards in shared batches (faster than one by one)."""
    raise NotImplementedError


def _fens_tokens(fens: Sequence[str], extra: int) -> np.ndarray:
  tokens = tokenizer.tokenize_batch(list(fens)).astype(np.int32)  # [N, 77]
  return np.pad(tokens, ((0, 0), (0, extra)))  # [N, 77 + extra]; extra slots 0.


class ActionValuePolicy(_Policy):
  """P(bucket | board, move) for every legal move, in one batched pass."""

  kind = ACTION_VALUE
  sequence_length = tokenizer.SEQUENCE_LENGTH + 2

  def analyse_many(self, boards: Sequence[chess.Board]) -> list[Analysis]:
    legal = [ordered_legal_moves(b) for b in boards]
    counts = [len(m) for m in legal]
    states = _fens_tokens([model_fen(b) for b in boards], 2)  # [N, 79]
    sequences = np.repeat(states, counts, axis=0)  # [sum M, 79]
    sequences[:, tokenizer.SEQUENCE_LENGTH] = [a for b, ms in zip(boards, legal) for a in model_actions(b, ms)]
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

  def analyse_many(self, boards: Sequence[chess.Board]) -> list[Analysis]:
    legal = [ordered_legal_moves(b) for b in boards]
    actions = [np.array(model_actions(b, ms), np.int32) for b, ms in zip(boards, legal)]
    tokens = tokenizer.tokenize_batch([model_fen(b) for b in boards])  # [N, 77]
    return self._analyses([b.fen() for b in boards], legal, self.predictor(tokens, actions))  # N x [M, K]

  def warm_up(self, max_boards: int = 1) -> None:
    self.predictor.warm_up(max_boards)


class StateValuePolicy(_Policy):
  """P(bucket | board) of the board and of the board after every legal move."""

  kind = STATE_VALUE
  sequence_length = tokenizer.SEQUENCE_LENGTH + 1

  def analyse_many(self, boards: Sequence[chess.Board]) -> list[Analysis]:
    legal, fens = [], []
    for board in boards:
      ms = ordered_legal_moves(board)
      legal.append(ms)
      fens.append(model_fen(board))
      for m in ms:
        board.push(m)
        fens.append(model_fen(board))
        board.pop()
    log_probs = self.predictor(_fens_tokens(fens, 1))  # [sum (1 + M), K]
    results, start = [], 0
    for board, ms in zip(boards, legal):
      own = log_probs[start]
      following = log_probs[start + 1:start + 1 + len(ms)][:, ::-1]  # [M, K]: the mover's view.
      start += 1 + len(ms)
      wp = np.exp(following) @ self.centres
      results.append(Analysis(board.fen(), tuple(ms), wp, np.ascontiguousarray(following), wp,
                              float(np.exp(own) @ self.centres)))
    return results


class BehavioralCloningPolicy(_Policy):
  """P(action | board) over the 1968 actions, renormalised to the legal moves."""

  kind = BEHAVIORAL_CLONING
  sequence_length = tokenizer.SEQUENCE_LENGTH + 1

  def analyse_many(self, boards: Sequence[chess.Board]) -> list[Analysis]:
    log_probs = self.predictor(_fens_tokens([model_fen(b) for b in boards], 1))  # [N, 1968]
    results = []
    for board, row in zip(boards, log_probs):
      ms = ordered_legal_moves(board)
      legal = row[model_actions(board, ms)].astype(np.float64)
      legal = legal - np.logaddexp.reduce(legal) if len(ms) else legal  # [M]
      results.append(Analysis(board.fen(), tuple(ms), np.exp(legal), legal, None, None))
    return results


_POLICY_CLASSES = {
    ACTION_VALUE: ActionValuePolicy,
    STATE_VALUE: StateValuePolicy,
    BEHAVIORAL_CLONING: BehavioralCloningPolicy,
}


def make_policy(kind: str, predictor: Predictor | PackedPredictor) -> Policy:
  """The `kind` policy (one of POLICIES) over `predictor`; checks the output size fits."""
  if kind not in _POLICY_CLASSES:
    raise ValueError(f'unknown policy {kind!r}; expected one of {POLICIES}')
  if isinstance(predictor, PackedPredictor):
    if kind != ACTION_VALUE:
      raise ValueError(f'a board-packed model scores moves: it plays the action_value policy, not {kind}')
    return PackedActionValuePolicy(predictor)
  output_size = predictor.model_config.output_size
  if (kind == BEHAVIORAL_CLONING) != (output_size == moves_lib.NUM_ACTIONS):
    raise ValueError(f'a {kind} policy does not fit a model with {output_size} outputs')
  return _POLICY_CLASSES[kind](predictor)
