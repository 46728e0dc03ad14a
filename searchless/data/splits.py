"""Train/test splits by game and board de-duplication: shared by annotation and puzzle mining.

A game's split is a hash of its key (its Lichess URL, else its headers and
moves) against the test fraction, so every tool that reads the same games
agrees on which are test games, on any runner and in any order.

>>> split_of('https://lichess.org/abcdefgh', 0.0), split_of('https://lichess.org/abcdefgh', 1.0)
('train', 'test')
>>> dedup_key('8/8/8/8/8/8/8/K1k5 w - - 3 40', 'position')
'8/8/8/8/8/8/8/K1k5 w - -'
"""

import hashlib

SPLITS = ('train', 'test')
DEFAULT_TEST_FRACTION = 0.1  # Fraction of games (by hash) in the test split, for annotation and mining.
DEDUP_BY = ('fen', 'position')  # A board's identity: the whole FEN, or without the move clocks.


def split_of(game_key: str, test_fraction: float) -> str:
  """Deterministic game-level split: a hash of the game's key against the fraction."""
  digest = hashlib.sha256(game_key.encode('utf-8')).digest()
  return 'test' if int.from_bytes(digest[:8], 'big') / 2**64 < test_fraction else 'train'


def dedup_key(fen: str, by: str) -> str:
  """The de-duplication key of a board: the whole FEN, or without the move clocks."""
  return fen if by == 'fen' else ' '.join(fen.split(' ')[:4])
