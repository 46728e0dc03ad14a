"""The held-out records a training run evaluates on (``data.eval``), and how it scores them.

`load_eval_set` reads the first ``train.eval_records`` records once; `evaluate`
gives the log-loss of the EMA parameters on them and, for action values, the
action accuracy on their complete boards (packed models: every board).
"""

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import haiku as hk
import jax
import numpy as np

from searchless.core import bags
from searchless.core import codecs
from searchless.core import config as config_lib
from searchless.core import records
from searchless.core import values
from searchless.data import packing
from searchless.data import sequences as sequences_lib
from searchless.evaluation import metrics
from searchless.plumbing import errors
from searchless.training import sharding


class Scorer(Protocol):
  """What scoring the eval set needs of a run's jitted functions (`step.Functions` has it)."""

  @property
  def last_log_probs(self) -> Callable[..., Any]:
    """(params, sequences [B, T]) -> [B, V] at the last position; packed: [B, M, V]."""

  @property
  def batch_sharding(self) -> jax.sharding.NamedSharding:
    """How a global batch is laid out over the devices."""


class EvalSet(NamedTuple):
  """The first `train.eval_records` records of `data.eval`, ready to score."""

  sequences: np.ndarray  # [N, T] int32 (packed: [N, 77 + 2M + 1] rows), N padded to a multiple of the batch size.
  num_real: int  # Real (unpadded) sequences.
  boards: list  # metrics.Board per complete board (action_value only; packed: every board, rows in order).


def _eval_rows(config: config_lib.Config, raw: list[bytes]) -> tuple[np.ndarray, list]:
  """Packed eval rows: every move of every board (M = the largest board, rounded up to 16)."""
  board_records = codecs.decode_boards(raw)
  max_moves = max([16] + [-(-len(b.moves) // 16) * 16 for b in board_records])
  edges, _ = values.uniform_buckets(config.num_return_buckets)
  rows = packing.packed_rows(board_records, max_moves, edges)  # [N, 77 + 2M + 1]
  for index, row in enumerate(rows):
    if row[-1] >= 0:  # A partial board: its action accuracy and tau-b would be over some moves only.
      raise errors.BadInput(
        f'{config.data.eval!r}, record {index}: a partial board ({board_records[index].fen!r} has more '
        'legal moves than values); evaluate on complete boards (board_value records)'
      )
  boards = [metrics.Board(b.fen, b.moves, np.asarray(b.win_probs), np.arange(len(b.moves))) for b in board_records]
  return rows, boards


def load_eval_set(config: config_lib.Config) -> EvalSet:
  """The held-out records of `config.data.eval`; a bag that is empty or of another kind is a ValueError naming it."""
  reader = bags.reader(config.data.eval)
  codecs.check_kind(config.data.eval, records.BOARD_VALUE if packing.packed(config) else config.policy, reader)
  raw = list(reader[: min(len(reader), config.train.eval_records)])
  boards: list[metrics.Board] = []
  if packing.packed(config):
    sequences, boards = _eval_rows(config, raw)
  else:
    sequences = sequences_lib.to_sequences(config.policy, raw, config.num_return_buckets)  # [N, T]
    if config.policy == 'action_value':
      boards, _ = metrics.group_boards(list(zip(*codecs.decode_batch('action_value', raw))))  # type: ignore[arg-type]
  batch = config.data.batch_size
  padded = np.zeros((-len(raw) % batch + len(raw), sequences.shape[1]), np.int32)
  padded[: len(raw)] = sequences
  return EvalSet(padded, len(raw), boards)


def _evaluate_packed(functions: Scorer, params: hk.Params, config: config_lib.Config, eval_set: EvalSet) -> dict:
  batch, pc, pi = config.data.batch_size, jax.process_count(), jax.process_index()
  _, centres = values.uniform_buckets(config.num_return_buckets)
  picked, predicted = [], []
  for i in range(0, len(eval_set.sequences), batch):
    rows = eval_set.sequences[i : i + batch]
    inputs, targets, _ = packing.split_packed(rows)
    local = inputs[pi * batch // pc : (pi + 1) * batch // pc]
    log_probs = np.asarray(
      jax.device_get(functions.last_log_probs(params, sharding.global_batch(local, functions.batch_sharding)))
    )  # [B, M, V]
    for b in range(len(rows)):
      if i + b >= eval_set.num_real:
        break
      num = len(eval_set.boards[i + b].moves)
      lp = log_probs[b, :num]  # [m, V]
      picked.append(np.take_along_axis(lp, targets[b, :num, None], axis=-1)[:, 0])
      predicted.append(np.exp(lp) @ centres)
  return {
    'eval_loss': float(-np.concatenate(picked).mean()),
    'eval_action_accuracy': metrics.action_accuracy(
      [p for p, b in zip(predicted, eval_set.boards) if len(b.moves)],
      [b.win_probs for b in eval_set.boards if len(b.moves)],
    ),
    'eval_boards': sum(1 for b in eval_set.boards if len(b.moves)),
  }


def evaluate(functions: Scorer, params: hk.Params, config: config_lib.Config, eval_set: EvalSet) -> dict:
  """Log-loss on the eval records; action accuracy on their complete boards (action_value)."""
  if packing.packed(config):
    return _evaluate_packed(functions, params, config, eval_set)
  batch, pc, pi = config.data.batch_size, jax.process_count(), jax.process_index()
  picked, bucket_probs = [], []
  for i in range(0, len(eval_set.sequences), batch):
    local = eval_set.sequences[i : i + batch][pi * batch // pc : (pi + 1) * batch // pc]
    log_probs = functions.last_log_probs(params, sharding.global_batch(local, functions.batch_sharding))
    log_probs = np.asarray(jax.device_get(log_probs))  # [B, V], replicated.
    targets = eval_set.sequences[i : i + batch, -1]
    picked.append(np.take_along_axis(log_probs, targets[:, None], axis=-1)[:, 0])
    bucket_probs.append(np.exp(log_probs))
  losses = np.concatenate(picked)[: eval_set.num_real]
  result = {'eval_loss': float(-losses.mean())}
  if eval_set.boards:
    _, centres = values.uniform_buckets(config.num_return_buckets)
    expected = np.concatenate(bucket_probs)[: eval_set.num_real] @ centres  # [N] expected win prob.
    predicted = [expected[b.records] for b in eval_set.boards]
    result['eval_action_accuracy'] = metrics.action_accuracy(predicted, [b.win_probs for b in eval_set.boards])
    result['eval_boards'] = len(eval_set.boards)
  return result
