"""The three ChessBench record kinds and their Apache Beam coders.

The coders are the reference's: a record is encoded with
``TupleCoder((StrUtf8Coder, ...))``, so bag files written here are read by the
published reader and vice versa.

>>> record = ActionValue('8/8/8/8/8/8/8/K1k5 w - - 0 1', 'a1a2', 0.5)
>>> decode('action_value', encode('action_value', record)) == record
True
"""

from typing import NamedTuple

from apache_beam import coders


class ActionValue(NamedTuple):
  fen: str  # Board before the move.
  move: str  # UCI move.
  win_prob: float  # Mover's win probability after playing `move`.


class StateValue(NamedTuple):
  fen: str
  win_prob: float  # Win probability of the side to move.


class BehavioralCloning(NamedTuple):
  fen: str
  move: str  # The engine's best move.


KINDS = ('action_value', 'state_value', 'behavioral_cloning')
# Tokens of a record as a model input: 77 FEN tokens + action and/or return bucket.
SEQUENCE_LENGTHS = {'action_value': 79, 'state_value': 78, 'behavioral_cloning': 78}
RECORD_TYPES = {
    'action_value': ActionValue,
    'state_value': StateValue,
    'behavioral_cloning': BehavioralCloning,
}

_FEN = coders.StrUtf8Coder()
_MOVE = coders.StrUtf8Coder()
_WIN_PROB = coders.FloatCoder()
CODERS = {
    'action_value': coders.TupleCoder((_FEN, _MOVE, _WIN_PROB)),
    'state_value': coders.TupleCoder((_FEN, _WIN_PROB)),
    'behavioral_cloning': coders.TupleCoder((_FEN, _MOVE)),
}


def _check_kind(kind: str) -> None:
  if kind not in CODERS:
    raise ValueError(f'unknown record kind {kind!r}; expected one of {KINDS}')


def encode(kind: str, record: tuple) -> bytes:
  """Encodes a record of `kind` to the bytes stored in a bag."""
  _check_kind(kind)
  return CODERS[kind].encode(tuple(record))


def decode(kind: str, data: bytes) -> NamedTuple:
  """Decodes the bytes of one bag record of `kind`."""
  _check_kind(kind)
  return RECORD_TYPES[kind](*CODERS[kind].decode(data))
