"""Board records carried as columns: the same boards, moves and return buckets back, so the same training targets."""

import json

import bagz
import numpy as np
import pytest

from searchless.core import records
from searchless.core import values
from campaign import board_columns
from searchless.data import packing

from helpers import DATA

LABELS = DATA / 'labels' / 'chunk_000' / 'train' / 'board_value_data.bagz'  # Real Lichess boards, Stockfish values.


def _real_boards(n):
  if not LABELS.exists():
    pytest.skip(f'shared real labels not found at {LABELS}')
  reader = bagz.Reader(str(LABELS))
  return [reader[i] for i in range(n)]


def test_round_trip_keeps_boards_moves_and_buckets_on_real_labels(tmp_path):
  raw = _real_boards(300)
  with bagz.Writer(str(tmp_path / 'in.bag')) as w:
    for blob in raw:
      w.write(blob)
  meta = board_columns.pack(tmp_path / 'in.bag', tmp_path / 'cols')  # Its default: 3 processes compressing.
  before = [records.decode(records.BOARD_VALUE, b) for b in raw]
  assert meta == {'boards': 300, 'num_buckets': 128, 'values': sum(len(b.moves) + 1 for b in before)}
  assert sorted(p.name for p in (tmp_path / 'cols').iterdir()) == ['buckets.xz', 'columns.json', 'fens.xz', 'moves.xz']
  assert board_columns.unpack(tmp_path / 'cols', tmp_path / 'out.bag', workers=2) == 300
  after = [records.decode(records.BOARD_VALUE, b) for b in bagz.Reader(str(tmp_path / 'out.bag'))]
  edges, centres = values.uniform_buckets(128)
  for b, a in zip(before, after, strict=True):
    assert (a.fen, a.moves) == (b.fen, b.moves)
    buckets = values.win_probabilities_to_buckets([*b.win_probs, b.state_value], edges)
    np.testing.assert_array_equal(values.win_probabilities_to_buckets([*a.win_probs, a.state_value], edges), buckets)
    assert [*a.win_probs, a.state_value] == centres[buckets].tolist()
  # What a model trains on, the packed rows (tokens, actions, bucket targets), is the same.
  np.testing.assert_array_equal(packing.packed_rows(after, 128, edges), packing.packed_rows(before, 128, edges))
  # Unpacking in this process writes the same bag as the workers did.
  board_columns.unpack(tmp_path / 'cols', tmp_path / 'inline.bag')
  assert (tmp_path / 'inline.bag').read_bytes() == (tmp_path / 'out.bag').read_bytes()


def test_boards_without_moves_among_others_and_an_empty_bag(tmp_path):
  mate = records.BoardValue('7k/6Q1/6K1/8/8/8/8/8 b - - 0 1', (), (), 0.0)
  king = records.BoardValue('7k/8/8/8/8/8/8/K7 w - - 0 1', ('a1b1', 'a1a2', 'a1b2'), (0.5, 0.01, 0.999), 0.999)
  with bagz.Writer(str(tmp_path / 'in.bag')) as w:
    for board in (mate, king, mate):
      w.write(records.encode(records.BOARD_VALUE, board))
  assert board_columns.pack(tmp_path / 'in.bag', tmp_path / 'cols', workers=1) == {
    'boards': 3,
    'num_buckets': 128,
    'values': 6,
  }
  board_columns.unpack(tmp_path / 'cols', tmp_path / 'out.bag')
  centre = lambda bucket: (bucket + 0.5) / 128
  assert [records.decode(records.BOARD_VALUE, b) for b in bagz.Reader(str(tmp_path / 'out.bag'))] == [
    mate._replace(state_value=centre(0)),
    king._replace(win_probs=(centre(63), centre(1), centre(127)), state_value=centre(127)),
    mate._replace(state_value=centre(0)),
  ]
  with bagz.Writer(str(tmp_path / 'empty.bag')):
    pass
  assert board_columns.pack(tmp_path / 'empty.bag', tmp_path / 'none', workers=1)['boards'] == 0
  assert board_columns.unpack(tmp_path / 'none', tmp_path / 'none.bag') == 0


@pytest.mark.parametrize(
  'board, error',
  [
    (
      records.BoardValue('7k/8/8/8/8/8/8/K7 w - - 0 1', ('a1b1', 'a1a2'), (0.5, float('nan')), 0.5),
      'record 1: win probability nan is not in [0, 1]',
    ),
    (
      records.BoardValue('7k/8/8/8/8/8/8/K7 w - - 0 1', ('a1b1', 'a1a2'), (0.5,), 0.5),
      'record 1: 2 moves but 1 values',
    ),
    (
      records.BoardValue('7k/8/8/8/8/8/8/K7 w - - 0 1', ('a1 b1',), (0.5,), 0.5),
      'record 1: a move or FEN with a separator in it',
    ),
  ],
)
def test_pack_refuses_what_training_would_refuse_or_the_columns_cannot_hold_naming_the_record(tmp_path, board, error):
  good = records.BoardValue('7k/8/8/8/8/8/8/K7 w - - 0 1', ('a1b1',), (0.5,), 0.5)
  with bagz.Writer(str(tmp_path / 'in.bag')) as w:
    for b in (good, board):
      w.write(records.encode(records.BOARD_VALUE, b))
  with pytest.raises(ValueError, match=f'^{tmp_path / "in.bag"}: {error}'.replace('[', r'\[').replace(']', r'\]')):
    board_columns.pack(tmp_path / 'in.bag', tmp_path / 'cols', workers=1)


def test_columns_that_disagree_with_their_meta_are_refused_naming_the_folder(tmp_path):
  with bagz.Writer(str(tmp_path / 'in.bag')) as w:
    for blob in _real_boards(3):
      w.write(blob)
  meta = board_columns.pack(tmp_path / 'in.bag', tmp_path / 'cols', workers=1)
  (tmp_path / 'cols' / 'columns.json').write_text(json.dumps({**meta, 'values': meta['values'] + 1}))
  with pytest.raises(ValueError, match=rf'^{tmp_path / "cols"}: 3 FENs, 3 move lines and {meta["values"]} values'):
    board_columns.unpack(tmp_path / 'cols', tmp_path / 'out.bag')
  with pytest.raises(ValueError, match='at most 256'):
    board_columns.pack(tmp_path / 'in.bag', tmp_path / 'c2', num_buckets=300)
  (tmp_path / 'cols' / 'columns.json').write_text(json.dumps({**meta, 'num_buckets': 4}))
  with pytest.raises(ValueError, match=r'cols: a bucket \d+ in buckets.xz, where columns.json says 4 buckets'):
    board_columns.unpack(tmp_path / 'cols', tmp_path / 'out.bag')
