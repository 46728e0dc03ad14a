"""Training on partial boards (imported labels): the loss reads the valued moves only; the board's own value
carries the graph's state-value head."""

import chess
import numpy as np
import pytest

from searchless.core import codecs
from searchless import configs
from searchless.core import moves
from searchless.core import records
from searchless.core import values
from searchless.data import packing

KIWIPETE = 'r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1'  # 48 legal moves.
EDGES, _ = values.uniform_buckets(128)
PARTIAL = records.BoardValue(KIWIPETE, ('e2a6', 'd5e6', 'g2h3'), (0.71, 0.55, 0.52), 0.7)


def test_a_partial_board_holds_every_legal_move_and_targets_only_its_valued_ones():
  legal = sorted((m.uci() for m in chess.Board(KIWIPETE).legal_moves), key=moves.MOVE_TO_ACTION.get)
  row = packing.packed_rows([PARTIAL], 64, EDGES)[0]
  inputs, targets, own = packing.split_packed(row[None])
  assert (
    inputs[0, 77 : 77 + 48].tolist() == [moves.MOVE_TO_ACTION[m] for m in legal] and (inputs[0, 77 + 48 :] == -1).all()
  )
  valued = {
    legal.index(m): b for m, b in zip(PARTIAL.moves, values.win_probabilities_to_buckets(PARTIAL.win_probs, EDGES))
  }
  assert {i: int(t) for i, t in enumerate(targets[0]) if t >= 0} == valued
  assert int(own[0]) == values.win_probabilities_to_buckets([0.7], EDGES)[0] == 89
  complete = records.BoardValue(KIWIPETE, tuple(legal), tuple([0.5] * 48), 0.5)
  assert int(packing.split_packed(packing.packed_rows([complete], 64, EDGES))[2][0]) == -1  # Its best move's.


def test_a_cut_partial_board_keeps_its_valued_moves():
  for epoch in range(5):
    row = packing.packed_rows([PARTIAL], 8, EDGES, indices=[3], epoch=epoch)[0]
    _, targets, _ = packing.split_packed(row[None])
    assert (targets[0] >= 0).sum() == 3 and (row[77:85] >= 0).all()


def test_a_valued_move_that_is_not_legal_is_a_bad_record_naming_it():
  bad = PARTIAL._replace(moves=('e2a6', 'e1e3', 'g2h3'))
  with pytest.raises(codecs.BadRecord, match=f"move 'e1e3' is not legal on '{KIWIPETE}'"):
    packing.packed_rows([bad], 64, EDGES)


def test_an_eval_set_of_partial_boards_is_refused(tmp_path):
  from searchless.core import bags
  from searchless.training import eval_set

  path = tmp_path / 'partial_board_value_data.bag'
  bags.write_records(str(path), records.PARTIAL_BOARD_VALUE, [PARTIAL])
  config = configs.load('tiny_packed', ['data.train=unused', f'data.eval={path}'])
  with pytest.raises(ValueError, match=r"record 0: a partial board \('r3k2r/.*' has more legal moves than values\)"):
    eval_set.load_eval_set(config)


def test_the_loader_completes_only_the_boards_of_partial_board_value_bags(tmp_path):
  """The bag's kind says which boards may be partial: a board_value bag's boards are read as they are (no legal
  moves generated), a partial_board_value bag's get every legal move."""
  from searchless.core import bags
  from searchless.data import loader

  full, partial = tmp_path / 'board_value_data.bag', tmp_path / 'partial_board_value_data.bag'
  bags.write_records(str(full), records.BOARD_VALUE, [PARTIAL] * 3)  # As complete: its 3 moves only.
  bags.write_records(str(partial), records.PARTIAL_BOARD_VALUE, [PARTIAL] * 2)
  rows = np.concatenate(
    list(
      loader.build_loader(
        f'{full},{partial}',
        policy='action_value',
        num_return_buckets=128,
        batch_size=5,
        shuffle=False,
        seed=0,
        num_epochs=1,
        worker_count=0,
        max_moves=64,
      )
    )
  )
  inputs, targets, own = packing.split_packed(rows)
  assert ((inputs[:, 77:] >= 0).sum(axis=1).tolist(), (targets >= 0).sum(axis=1).tolist()) == (
    [3, 3, 3, 48, 48],
    [3, 3, 3, 3, 3],
  )
  assert (
    own.tolist()[:3] == [-1, -1, -1]
    and own.tolist()[3:] == [int(values.win_probabilities_to_buckets([0.7], EDGES)[0])] * 2
  )
