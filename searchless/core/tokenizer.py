"""FEN -> 77 tokens, exactly as ChessBench tokenizes boards.

A FEN becomes: side to move (1) + the 64 squares from a8 to h1 (empty = '.') +
castling rights padded to 4 with '.' + en-passant square (2, '..' if none) +
half-move clock padded to 3 + full-move number padded to 3 = 77 tokens.

Counters of 4 or more digits (a game past move 999) do not fit; the reference
tokenizer fails on them. Both are clamped to `MAX_COUNTER` (`clamp_counters`),
here and wherever boards are made (annotation): the full-move number changes
no rule, and a half-move clock of 150 already ends the game (the 75-move
rule), so a clamped board has the same legal moves and outcome.

>>> tokens = tokenize('rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1')
>>> tokens.shape, tokens.dtype
((77,), dtype('uint8'))
>>> tokens[:9].tolist()  # 'w', then a8..h8 = r n b q k b n r ('b' is also file b)
[29, 20, 19, 11, 22, 21, 11, 19, 20]
>>> tokenize_batch(['8/8/8/8/8/8/8/K1k5 w - - 0 1'] * 2).shape
(2, 77)
"""

from collections.abc import Sequence

import numpy as np

from searchless.plumbing import errors

# Token alphabet in index order (the reference's `_CHARACTERS`).
CHARACTERS = '0123456789abcdefghpnrkqPBNRQKw.'
CHARACTER_TO_TOKEN = {c: i for i, c in enumerate(CHARACTERS)}
SEQUENCE_LENGTH = 77

_EXPAND_BOARD = str.maketrans({**{str(n): '.' * n for n in range(1, 9)}, '/': None})
_LOOKUP = np.full(256, 255, dtype=np.uint8)
for _char, _token in CHARACTER_TO_TOKEN.items():
  _LOOKUP[ord(_char)] = _token


MAX_COUNTER = 999  # The largest half-move clock / full-move number 3 tokens hold.


def clamp_counters(fen: str) -> str:
  """`fen` with its half-move clock and full-move number clamped to MAX_COUNTER.

  >>> clamp_counters('8/8/8/8/8/8/8/K1k5 w - - 1200 1034')
  '8/8/8/8/8/8/8/K1k5 w - - 999 999'
  """
  fields = fen.split(' ')
  if len(fields) == 6 and (len(fields[4]) > 3 or len(fields[5]) > 3):
    fields[4:] = [str(min(int(f), MAX_COUNTER)) if f.isdigit() else f for f in fields[4:]]
    return ' '.join(fields)
  return fen


def fen_to_characters(fen: str) -> str:
  """Returns the 77-character string whose characters are the tokens of `fen`."""
  try:
    board, side, castling, en_passant, halfmoves, fullmoves = fen.split(' ')
  except ValueError:
    raise errors.BadInput(f'FEN must have 6 space-separated fields: {fen!r}') from None
  if len(halfmoves) > 3 or len(fullmoves) > 3:
    halfmoves, fullmoves = clamp_counters(fen).split(' ')[4:]
  chars = (
    side
    + board.translate(_EXPAND_BOARD)
    + ('' if castling == '-' else castling).ljust(4, '.')
    + ('..' if en_passant == '-' else en_passant)
    + halfmoves.ljust(3, '.')
    + fullmoves.ljust(3, '.')
  )
  if len(chars) != SEQUENCE_LENGTH:
    raise errors.BadInput(f'FEN does not tokenize to {SEQUENCE_LENGTH} tokens (got {len(chars)}): {fen!r}')
  return chars


def _lookup(chars: str, fens: Sequence[str]) -> np.ndarray:
  try:
    raw = np.frombuffer(chars.encode('ascii'), dtype=np.uint8)
  except UnicodeEncodeError:
    raw = None
  tokens = None if raw is None else _LOOKUP[raw]
  if tokens is None or (tokens == 255).any():
    for fen in fens:  # Name the offending FEN.
      bad = [c for c in fen_to_characters(fen) if c not in CHARACTER_TO_TOKEN]
      if bad:
        raise errors.BadInput(f'FEN has characters outside the alphabet {bad}: {fen!r}')
  if tokens is None:
    raise errors.BadInput(f'FENs are not ASCII: {fens!r}')
  return tokens


def tokenize(fen: str) -> np.ndarray:
  """Returns the 77 tokens of `fen` as uint8, identical to ChessBench."""
  return _lookup(fen_to_characters(fen), (fen,))


def tokenize_batch(fens: Sequence[str]) -> np.ndarray:
  """Returns [B, 77] uint8 tokens for a batch of FENs in one vectorised lookup."""
  chars = ''.join([fen_to_characters(fen) for fen in fens])
  return _lookup(chars, fens).reshape(len(fens), SEQUENCE_LENGTH)
