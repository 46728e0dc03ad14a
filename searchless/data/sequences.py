"""Decoded ChessBench records -> the int32 token sequences the model trains on.

A record becomes one sequence, exactly as the reference data loader builds it:

* ``action_value`` (fen, move, win_prob): 77 FEN tokens + action + return bucket (79);
* ``state_value`` (fen, win_prob): 77 FEN tokens + return bucket (78);
* ``behavioral_cloning`` (fen, move): 77 FEN tokens + action (78).

Buckets are `values.uniform_buckets` with ties to the lower bucket; actions are
`moves.MOVE_TO_ACTION`; tokens are `tokenizer.tokenize_batch`. A whole batch is
converted at once (one tokenizer lookup); a record that does not fit raises
`codecs.BadRecord` naming it.

>>> raw = [records.encode('state_value', ('8/8/8/8/8/8/8/K1k5 w - - 0 1', p)) for p in (0.1, 0.9)]
>>> sequences = to_sequences('state_value', raw, 4)
>>> sequences.shape, sequences[:, -1].tolist()  # the return bucket of each record
((2, 78), [0, 3])
"""

from collections.abc import Sequence

import numpy as np

from searchless.core import codecs
from searchless.core import moves
from searchless.core import records
from searchless.core import tokenizer
from searchless.core import values

SEQUENCE_LENGTHS = records.SEQUENCE_LENGTHS


def tokenize_fens(fens: Sequence[str]) -> np.ndarray:
  """[B] FENs -> [B, 77] tokens; raises `codecs.BadRecord` naming the first FEN that does not tokenize.

  >>> tokenize_fens(['8/8/8/8/8/8/8/K1k5 w - - 0 1', 'not a fen'])  # doctest: +ELLIPSIS
  Traceback (most recent call last):
  ...
  searchless.core.codecs.BadRecord: record 1 of the batch: ...
  """
  try:
    return tokenizer.tokenize_batch(fens)
  except ValueError:
    for position, fen in enumerate(fens):  # Find the offending record.
      try:
        tokenizer.tokenize(fen)
      except ValueError as e:
        raise codecs.BadRecord(position, str(e)) from None
    raise


def columns_to_sequences(kind: str, columns: codecs.Columns, return_edges: np.ndarray) -> np.ndarray:
  """A decoded batch -> [B, T] int32 sequences; raises `codecs.BadRecord` naming the record."""
  count = len(columns.fens)
  sequences = np.empty((count, SEQUENCE_LENGTHS[kind]), dtype=np.int32)  # [B, T]
  sequences[:, : tokenizer.SEQUENCE_LENGTH] = tokenize_fens(columns.fens)  # [B, 77]
  column = tokenizer.SEQUENCE_LENGTH
  if columns.moves is not None:
    actions = np.fromiter((moves.MOVE_TO_ACTION.get(m, -1) for m in columns.moves), dtype=np.int32, count=count)
    if count and actions.min() < 0:
      position = int(np.argmin(actions))
      raise codecs.BadRecord(position, f'move {columns.moves[position]!r} is not a move of the 1968-move vocabulary')
    sequences[:, column] = actions  # [B]
    column += 1
  if columns.win_probs is not None:
    win_probs = columns.win_probs  # [B]
    codecs.check_win_probs(win_probs)  # NaN is outside too.
    sequences[:, column] = values.win_probabilities_to_buckets(win_probs, return_edges)
  return sequences


def to_sequences(kind: str, raw: Sequence[bytes], num_return_buckets: int) -> np.ndarray:
  """Encoded records of `kind` -> [B, T] int32 sequences (decode + tokenize, vectorised).

  >>> raw = [records.encode('behavioral_cloning', ('8/8/8/8/8/8/8/K1k5 w - - 0 1', 'a1a2'))]
  >>> to_sequences('behavioral_cloning', raw, 128)[0, -7:].tolist()  # clocks '0..' and '1..', then a1a2
  [0, 30, 30, 1, 30, 30, 7]
  """
  codecs.check_policy(kind)
  edges, _ = values.uniform_buckets(num_return_buckets)
  return columns_to_sequences(kind, codecs.decode_batch(kind, raw), edges)
