"""Predictors: a model's jitted forward pass on a fixed set of batch shapes (nothing recompiles per move).

`Predictor` runs token sequences (the per-move model: one sequence per move or
board); `PackedPredictor` runs whole boards through a board-packed model, every
legal move in one row. Both are a `_BasePredictor`: how rows are cut into calls of
the bucket sizes below is theirs, the rest (the jitted call, its compiled shapes, a
call of one batch, the warm-up) is written once there. Which shapes are compiled is
kept in each predictor's `shapes` (`searchless.play.background_compile`), so an
engine in a hurry compiles one shape and the rest in the background.
Predictors of one architecture and compute dtype share their jitted forward
pass and its compiled shapes (`_jitted`): a second agent of a model that this
process has loaded compiles nothing. `predictor_for` picks the predictor a model needs.
"""

from collections.abc import Callable
from collections.abc import Sequence
import threading
import time
from typing import Any

import haiku as hk
import jax
import jax.numpy as jnp
from jax.typing import DTypeLike
import numpy as np

from searchless.core import tokenizer
from searchless.model import network
from searchless.model.config import ModelConfig
from searchless.play import background_compile

# Batch shapes the predictor is compiled for (218 legal moves at most). A board's
# moves go in a few calls of these shapes (`Predictor._chunks`).
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
# Packed model: move slots per row (a board's moves padded up to the next) and boards per call.
MOVE_BUCKETS = (16, 32, 48, 64, 96, 128, 256)
BOARD_BUCKETS = (1, 4, 16, 64)
# Compiled first by `warm_up(background=True)` (the others then compile on a worker thread): a batch of
# 32 sequences (per-move model); one board of the start position's move bucket (packed: `probe`'s shape, so
# compiled already after the first load of a model's files, and in JAX's persistent cache from then on), then,
# first on the worker, one board of up to 48 moves (most positions).
FIRST_BATCH = 32
FIRST_MOVE_SLOTS = 48
START_MOVES = 20  # The start position's legal moves: `PackedPredictor.probe` runs in their move bucket.


_JITTED: dict[tuple, tuple[Callable, set[background_compile.Shape]]] = {}  # `_jitted`'s, by architecture.
_JITTED_LOCK = threading.Lock()


def _jitted(
  model_config: ModelConfig, params: hk.Params, compute_dtype: DTypeLike, *, last_only: bool = False, share: bool
) -> tuple[Callable, set[background_compile.Shape]]:
  """The jitted forward pass of `model_config`'s model in `compute_dtype` and the set of its compiled input
  shapes, one per process for every predictor of that model and parameter shapes (unless not `share`): a shape
  one of them compiled runs in the others without a compile (parameters are an argument of the call)."""
  if not share:
    return network.jit_inference(model_config, compute_dtype, last_only=last_only), set()
  leaves = jax.tree_util.tree_leaves_with_path(params)
  avals = tuple((jax.tree_util.keystr(k), np.shape(a), str(a.dtype)) for k, a in leaves)
  key = (model_config, jnp.dtype(compute_dtype).name, last_only, avals)
  with _JITTED_LOCK:
    if key not in _JITTED:
      _JITTED[key] = _jitted(model_config, params, compute_dtype, last_only=last_only, share=False)
    return _JITTED[key]


class _BasePredictor:
  """Common part of the predictors: the model's jitted forward pass (`_jitted`) on its parameters, put on the
  device once; its compiled input shapes (`shapes`); a call of one padded batch (`_run`); and the warm-up that
  compiles shapes now or in the background (`_compile_shapes`)."""

  def __init__(
    self,
    model_config: ModelConfig,
    params: hk.Params,
    *,
    compute_dtype: DTypeLike,
    share: bool,
    last_only: bool = False,
  ):
    self.model_config = model_config
    self._params = jax.device_put(params)
    self._apply, compiled = _jitted(model_config, params, compute_dtype, last_only=last_only, share=share)
    self.shapes = background_compile.Shapes(self._compile, compiled)  # Compiled [rows, tokens] shapes.
    self.rows_run = 0  # Rows sent through the model, padding included.
    self._ready_only = False  # Calls use compiled shapes only, while the rest compile (`warm_up(background=True)`).

  def _compile(self, shape: background_compile.Shape) -> None:
    self._apply(self._params, None, np.zeros(shape, np.int32)).block_until_ready()

  def _run(self, batch: np.ndarray) -> jax.Array:
    """The model on one padded `batch` of a bucket's shape, dispatched asynchronously (a shape not compiled
    yet is traced and compiled in its turn: `Shapes.guard`); its rows are counted in `rows_run`."""
    shape = batch.shape
    with self.shapes.guard(shape):
      out = self._apply(self._params, None, batch)
    self.shapes.mark(shape)
    self.rows_run += shape[0]
    return out

  def _compiled_sizes(self, sizes: Sequence[int], length: int) -> tuple[int, ...] | None:
    """The row counts among `sizes` to call at `length` tokens: while calls use compiled shapes only, the
    compiled ones; None (any) otherwise, or where none is compiled yet."""
    if not self._ready_only:
      return None
    return tuple(size for size in sizes if (size, length) in self.shapes.ready) or None

  def _compile_shapes(self, shapes: Sequence[background_compile.Shape], background: bool) -> None:
    """Compiles `shapes` (the one most calls use first): all now, or (`background`) the first now and the others
    on the worker, calls meanwhile using the compiled ones only."""
    if background:
      self.shapes.compile(shapes[:1])
      self._ready_only = True
      self.shapes.compile_later(shapes[1:])
      return
    self.shapes.compile(shapes)
    self._ready_only = False

  def close(self) -> None:
    """Stops compiling in the background (after the shape being compiled)."""
    self.shapes.close()


class Predictor(_BasePredictor):
  """Last-position log-probs of token sequences, jitted on fixed batch shapes.

  `predictor(sequences [N, T] int) -> [N, V] float32` for any N: rows are cut
  into chunks of the bucket sizes, trading padding against calls (`_chunks`).
  `share=False`: a jitted call of its own, compiled apart from the other predictors of the model (`_jitted`).
  """

  def __init__(
    self,
    model_config: ModelConfig,
    params: hk.Params,
    *,
    compute_dtype: DTypeLike = jnp.float32,
    batch_buckets: Sequence[int] = BATCH_BUCKETS,
    share: bool = True,
  ):
    super().__init__(model_config, params, compute_dtype=compute_dtype, share=share, last_only=True)
    self._buckets = tuple(sorted(batch_buckets))
    self.call_cost = 8.0  # Fixed cost of one call, in rows' worth of compute (`warm_up` measures it).
    self._plans: dict[tuple[int, tuple[int, ...]], list[tuple[int, int]]] = {}

  def _chunks(self, rows: int, buckets: tuple[int, ...] | None = None) -> list[tuple[int, int]]:
    """(rows, batch shape) per call: the plan of least modelled cost (`call_cost` per call +
    1 per row computed, padding included), found by dynamic programming over `buckets` (default: all)."""
    buckets = buckets or self._buckets
    if (rows, buckets) not in self._plans:
      cost: dict[int, float] = {0: 0.0}
      plan: dict[int, list[tuple[int, int]]] = {0: []}
      for n in range(1, rows + 1):
        options = []
        for b in buckets:
          rest = max(n - b, 0)
          options.append((self.call_cost + b + cost[rest], b, rest))
        best, b, rest = min(options)
        cost[n], plan[n] = best, [(n - rest, b)] + plan[rest]
      self._plans[rows, buckets] = plan[rows]
    return self._plans[rows, buckets]

  def __call__(self, sequences: np.ndarray) -> np.ndarray:
    sequences = np.asarray(sequences, np.int32)  # [N, T]
    length = sequences.shape[1]
    outputs, start = [], 0
    for rows, size in self._chunks(len(sequences), self._compiled_sizes(self._buckets, length)):
      padded = np.zeros((size, length), np.int32)
      padded[:rows] = sequences[start : start + rows]
      outputs.append((self._run(padded), rows))
      start += rows
    if not outputs:
      return np.zeros((0, self.model_config.output_size), np.float32)
    return np.concatenate([np.asarray(out)[:rows] for out, rows in outputs])  # [N, V]

  def probe(self) -> list[float]:
    """`network.probe`'s output computed by this predictor (a call of one sequence)."""
    return np.exp(self(network.probe_tokens()[None])[0]).astype(np.float32).tolist()

  def warm_up(self, sequence_length: int, *, background: bool = False) -> None:
    """Compiles every batch shape for `sequence_length` tokens and measures the cost of a call.

    `background`: compile one shape (`FIRST_BATCH`) now, the others on a worker
    thread; calls meanwhile use the compiled ones (the cost of a call stays the default).
    """
    first = min(self._buckets, key=lambda b: abs(b - FIRST_BATCH))
    by_use = sorted(self._buckets, key=lambda b: abs(b - first))  # `first`, then the sizes nearest it.
    self._compile_shapes([(size, sequence_length) for size in by_use], background)
    if background:
      return
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


class PackedPredictor(_BasePredictor):
  """Log-probs of every move of whole boards through a board-packed model, on fixed shapes.

  `predictor(fen_tokens [N, 77], actions: N arrays [M_i]) -> N arrays [M_i, V]`.
  A board's moves are padded up to the next of `move_buckets` (-1 slots); the
  boards of one move bucket go in calls of `board_buckets` rows (padded with
  empty boards), so nothing recompiles per board. `share` as `Predictor`'s.
  """

  def __init__(
    self,
    model_config: ModelConfig,
    params: hk.Params,
    *,
    compute_dtype: DTypeLike = jnp.float32,
    move_buckets: Sequence[int] = MOVE_BUCKETS,
    board_buckets: Sequence[int] = BOARD_BUCKETS,
    share: bool = True,
  ):
    if not model_config.packed:
      raise ValueError('PackedPredictor needs a board-packed model (packing=board); use Predictor')
    super().__init__(model_config, params, compute_dtype=compute_dtype, share=share)  # Rows: boards.
    self._move_buckets = tuple(sorted(move_buckets))
    self._board_buckets = tuple(sorted(board_buckets))

  def _slots(self, num_moves: int) -> int:
    """The move bucket of a board with `num_moves` moves: the next one up (a compiled one, when calls
    use compiled shapes only and one is)."""
    fits = [size for size in self._move_buckets if num_moves <= size]
    if not fits:
      raise ValueError(f'{num_moves} moves exceed the largest move bucket {self._move_buckets[-1]}')
    if self._ready_only:
      compiled = {length - tokenizer.SEQUENCE_LENGTH for _, length in self.shapes.ready}  # A snapshot.
      return next((size for size in fits if size in compiled), fits[0])
    return fits[0]

  def _board_chunks(self, rows: int, buckets: Sequence[int] | None = None) -> list[tuple[int, int]]:
    """(rows, batch shape) per call: pad up to the next of `buckets` (default: all) when that wastes less
    than half of it, else fill the largest that fits."""
    buckets = buckets or self._board_buckets
    chunks = []
    while rows > 0:
      above = [b for b in buckets if b >= rows]
      below = [b for b in buckets if b <= rows]
      size = above[0] if above and (2 * rows > above[0] or not below) else max(below)
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
      length = tokenizer.SEQUENCE_LENGTH + slots
      for rows, size in self._board_chunks(len(members), self._compiled_sizes(self._board_buckets, length)):
        batch = np.full((size, length), -1, np.int32)  # [B, 77 + M]
        batch[:, : tokenizer.SEQUENCE_LENGTH] = 0
        chunk = members[start : start + rows]
        for row, i in enumerate(chunk):
          batch[row, : tokenizer.SEQUENCE_LENGTH] = fen_tokens[i]
          batch[row, tokenizer.SEQUENCE_LENGTH : tokenizer.SEQUENCE_LENGTH + len(actions[i])] = actions[i]
        pending.append((chunk, self._run(batch)))
        start += rows
    out: list[Any] = [None] * len(actions)  # Each filled with its [M, V] below.
    for chunk, dispatched in pending:
      result = np.asarray(dispatched)  # [B, M, V]
      for row, i in enumerate(chunk):
        out[i] = result[row, : len(actions[i])]
    return out

  def probe(self) -> list[float]:
    """`network.probe`'s output computed by this predictor: its board with its one move, padded to the move
    bucket of the start position (`START_MOVES`), so that the start position's move reuses this compile."""
    tokens = network.probe_tokens()  # [78]
    shape = (1, tokenizer.SEQUENCE_LENGTH + self._slots(START_MOVES))
    batch = np.full(shape, -1, np.int32)
    batch[0, : len(tokens)] = tokens
    log_probs = self._run(batch)  # [1, slots, V]
    return np.exp(np.asarray(log_probs, np.float32)[0, 0]).tolist()

  def warm_up(self, max_boards: int = 1, *, background: bool = False) -> None:
    """Compiles, for every move bucket, the board buckets that calls of up to `max_boards` boards
    use (1: what play needs; a search's batch size: what its batches need).

    `background`: compile one board of the start position's move bucket now (`probe`'s shape: nothing
    to compile after a load that ran the probe, a load from JAX's persistent cache after one that did), the
    other shapes on a worker thread (the bigger board counts at that move bucket, then those of
    `FIRST_MOVE_SLOTS` moves, then the rest by move bucket); calls meanwhile use the compiled shapes only
    (more padding, no compile).
    """
    needed = [b for b in self._board_buckets if b < max_boards] + [
      min([b for b in self._board_buckets if b >= max_boards], default=self._board_buckets[-1])
    ]
    start = next((s for s in self._move_buckets if s >= START_MOVES), self._move_buckets[-1])  # `probe`'s.
    most = next((s for s in self._move_buckets if s >= FIRST_MOVE_SLOTS), self._move_buckets[-1])
    by_use = sorted(self._move_buckets, key=lambda s: (s != start, abs(s - most)))  # 32, 48, 64, 16, 96, 128, 256.
    self._compile_shapes(
      [(boards, tokenizer.SEQUENCE_LENGTH + slots) for slots in by_use for boards in needed], background
    )


def predictor_for(
  model_config: ModelConfig, params: hk.Params, *, compute_dtype: DTypeLike = jnp.float32
) -> Predictor | PackedPredictor:
  """The predictor a model needs: `PackedPredictor` for a board-packed model, else `Predictor`."""
  cls = PackedPredictor if model_config.packed else Predictor
  return cls(model_config, params, compute_dtype=compute_dtype)
