"""Board packing: board records, the converter, the packed model, its training and its play."""

import dataclasses
import functools
import json
import struct

import chess
import jax
import numpy as np
import pytest

from searchless.core import bags
from searchless.core import codecs
from searchless import configs
from searchless.core import moves as moves_lib
from searchless.core import records
from searchless.core import values
from searchless.data import boards as boards_lib
from searchless.data import loader as loader_lib
from searchless.data import packing
from searchless.model import network
from searchless.model.config import ModelConfig
from searchless.training import train

from helpers import play_legal_moves, uci_engine

TINY_PACKED = 'tiny_packed'
SMALL = [
  'model.embedding_dim=32',
  'model.num_layers=2',
  'model.num_heads=2',
  'data.batch_size=8',
  'train.log_every=1',
  'train.ckpt_every=3',
  'train.eval_every=1000',
  'train.compute_dtype=float32',
]
MIDDLEGAME = 'r3k2r/pppq1ppp/2npbn2/2b1p3/2B1P3/2NPBN2/PPPQ1PPP/R3K2R w KQkq - 0 1'  # 43 legal moves.
ONE_MOVE = 'k7/8/8/8/8/8/1r6/K1r5 w - - 0 1'  # Only Kxb2.


# --------------------------------------------------------------------------------------
# Board records and conversion.


def test_board_value_coder_round_trip_and_layout():
  board = records.BoardValue(ONE_MOVE, ('a1b2',), (0.123456789,), 0.25)
  data = records.encode('board_value', board)
  assert data == (
    bytes([len(ONE_MOVE)])
    + ONE_MOVE.encode()
    + b'\x00\x00\x00\x01\x04a1b2'
    + b'\x00\x00\x00\x01'
    + struct.pack('>d', 0.123456789)
    + struct.pack('>d', 0.25)
  )
  assert records.decode('board_value', data) == board
  terminal = records.BoardValue('7k/6Q1/6K1/8/8/8/8/8 b - - 0 1', (), (), 0.0)
  assert records.decode('board_value', records.encode('board_value', terminal)) == terminal


def test_from_action_values_is_order_independent_and_derives_chessbench_records():
  pairs = [('a1b2', 0.7), ('a1a2', 0.2), ('a1b1', 0.7)]
  fen = '7k/8/8/8/8/8/8/K7 w - - 0 1'
  a = boards_lib.from_action_values(fen, pairs)
  assert a == boards_lib.from_action_values(fen, pairs[::-1])
  assert a.moves == ('a1b1', 'a1a2', 'a1b2') and a.win_probs == (0.7, 0.2, 0.7) and a.state_value == 0.7
  assert boards_lib.from_action_values(fen, pairs, 0.6).state_value == 0.6
  out = boards_lib.to_chessbench(a)
  assert sorted(out['action_value']) == sorted(records.ActionValue(fen, m, p) for m, p in pairs)
  assert out['state_value'] == [records.StateValue(fen, 0.7)]
  assert out['behavioral_cloning'] == [records.BehavioralCloning(fen, 'a1b1')]  # First of the equals.
  mate = records.BoardValue('7k/6Q1/6K1/8/8/8/8/8 b - - 0 1', (), (), 0.0)
  assert boards_lib.to_chessbench(mate) == {
    'action_value': [],
    'state_value': [records.StateValue(mate.fen, 0.0)],
    'behavioral_cloning': [],
  }


def test_mismatch_names_what_is_wrong():
  fen = '7k/8/8/8/8/8/8/K7 w - - 0 1'
  assert boards_lib.mismatch(fen, ['a1a2', 'a1b1', 'a1b2']) is None
  assert boards_lib.mismatch(fen, ['a1a2', 'a1b1']) == 'missing a1b2'
  assert boards_lib.mismatch(fen, ['a1a2', 'a1b1', 'a1b2', 'h8h7']) == 'not legal h8h7'
  assert boards_lib.mismatch(fen, ['a1a2', 'a1a2', 'a1b1', 'a1b2']) == 'repeated a1a2'
  assert boards_lib.mismatch(fen, ['a1a2']) == 'missing a1b1 a1b2'


def _convert(input_spec, output_dir, *flags):
  """searchless-convert's run with the command's flags (``--to board``, ``--skip_bad_boards``, ...)."""
  from searchless.pipelines import convert as command

  return command.run([str(input_spec), str(output_dir), *map(str, flags)]).to_dict()


@pytest.fixture(scope='module')
def converted(compat, tmp_path_factory):
  """The compat action-value sample -> board records -> ChessBench records, through the real pipeline."""
  out = tmp_path_factory.mktemp('converted')
  to_board = _convert(compat / 'action_value_sample.bag', out / 'board', '--to', 'board')
  to_chessbench = _convert(out / 'board' / 'board_value_data.bag', out / 'chessbench', '--to', 'chessbench')
  return out, to_board, to_chessbench


def test_converter_round_trip_is_exact(compat, converted):
  out, to_board, to_chessbench = converted
  original = bags.read_records(str(compat / 'action_value_sample.bag'), 'action_value')
  round_trip = bags.read_records(str(out / 'chessbench' / 'action_value_data.bag'), 'action_value')
  assert len(original) == len(round_trip) == 1740
  assert sorted(original) == sorted(round_trip)  # Same records, float values bit for bit.
  boards = bags.read_records(str(out / 'board' / 'board_value_data.bag'), 'board_value')
  assert len(boards) == 57 == to_board['outputs']['board_value']['records']
  assert to_board['bad_boards'] == 0 and to_board['action_values'] == 1740
  for board in boards:
    assert boards_lib.mismatch(board.fen, board.moves) is None
    assert list(board.moves) == sorted(board.moves, key=moves_lib.MOVE_TO_ACTION.get)
    assert board.state_value == max(board.win_probs)
  state_values = bags.read_records(str(out / 'chessbench' / 'state_value_data.bag'), 'state_value')
  assert sorted(state_values) == sorted((b.fen, b.state_value) for b in boards)
  assert to_chessbench['outputs']['behavioral_cloning']['records'] == 57
  # Bytes per action-value: the board records store each FEN once.
  sizes = to_board['bytes_per_action_value']
  assert sizes['action_value'] == (compat / 'action_value_sample.bag').stat().st_size / 1740
  assert sizes['action_value'] / sizes['board_value'] > 4.5
  assert json.loads((out / 'board' / 'convert.json').read_text())['bad_boards'] == 0


# --------------------------------------------------------------------------------------
# The packed model.


@pytest.fixture(scope='module')
def small_model():
  config = ModelConfig(embedding_dim=32, num_layers=3, num_heads=4, output_size=128, max_sequence_length=79)
  rng = np.random.default_rng(0)
  params = jax.tree.map(
    lambda x: x + 0.05 * rng.standard_normal(x.shape).astype(np.float32), network.init_params(config)
  )  # Away from the symmetric init.
  return config, params


def test_packed_and_per_move_models_share_parameters(small_model):
  config, _ = small_model
  shapes = lambda c: jax.tree.map(lambda x: x.shape, jax.eval_shape(lambda: network.init_params(c)))
  assert shapes(config) == shapes(dataclasses.replace(config, packing='board'))


# --------------------------------------------------------------------------------------
# Data and training.


def test_packed_rows_keep_the_moves_in_order_and_draw_a_fixed_subset():
  edges, _ = values.uniform_buckets(128)
  board = boards_lib.from_action_values(
    MIDDLEGAME, [(m.uci(), i / 42) for i, m in enumerate(chess.Board(MIDDLEGAME).legal_moves)]
  )
  full = packing.packed_rows([board], 48, edges)[0]
  actions = full[77:125]
  assert actions[:43].tolist() == [moves_lib.MOVE_TO_ACTION[m] for m in board.moves] and set(actions[43:]) == {-1}
  assert full[125:168].tolist() == values.win_probabilities_to_buckets(np.array(board.win_probs), edges).tolist()
  cut = packing.packed_rows([board, board], 16, edges, indices=[5, 6], epoch=2)
  again = packing.packed_rows([board], 16, edges, indices=[5], epoch=2)
  np.testing.assert_array_equal(cut[0], again[0])  # Seeded by (record, epoch), not by batch position.
  assert not np.array_equal(cut[0], cut[1])
  assert not np.array_equal(cut[0], packing.packed_rows([board], 16, edges, indices=[5], epoch=3)[0])
  kept = cut[0, 77:93].tolist()
  assert kept == sorted(kept, key=[moves_lib.MOVE_TO_ACTION[m] for m in board.moves].index) and -1 not in kept
  bad = board._replace(win_probs=board.win_probs[:-1] + (1.5,))
  with pytest.raises(codecs.BadRecord, match=r'^record 1 of the batch: win probability 1.5 is not in \[0, 1\]$'):
    packing.packed_rows([board, bad], 48, edges)


def _packed_config(data, *extra):
  return configs.load(TINY_PACKED, SMALL + [f'data.train={data}', *extra])


def test_packed_loader_reads_board_records_only(board_bag, compat):
  build = functools.partial(
    loader_lib.build_loader,
    policy='action_value',
    num_return_buckets=128,
    batch_size=8,
    seed=0,
    num_epochs=1,
    worker_count=0,
    max_moves=64,
  )
  rows = list(build(board_bag, shuffle=True))
  assert len(rows) == 7 and rows[0].shape == (8, 77 + 128 + 1)
  with pytest.raises(
    ValueError,
    match=r'board packing needs board_value records, but record 0 of .* is an? '
    r'action_value record.*searchless-convert',
  ):
    build(str(compat / 'action_value_sample.bag'), shuffle=False)


# --------------------------------------------------------------------------------------
# Play: every command that takes a checkpoint takes a packed one.


@pytest.fixture(scope='module')
def packed_checkpoint(tmp_path_factory, board_bag):
  workdir = tmp_path_factory.mktemp('packed_run')
  train.train(_packed_config(board_bag, 'train.num_steps=3'), workdir)
  return workdir


def test_evaluation_data_is_action_value_or_board_records(compat, board_bag):
  from searchless.evaluation import evaluate

  boards, dropped, spec = evaluate.load_boards(board_bag)
  assert (len(boards), dropped, spec) == (57, 0, board_bag)
  with pytest.raises(
    ValueError,
    match=r"policy 'action_value' needs action_value records, but record 0 of .* is a"
    r' state_value record',
  ):
    evaluate.load_boards(str(compat / 'state_value_sample.bag'))


def test_packed_checkpoint_plays_legal_moves_through_uci(packed_checkpoint):
  with uci_engine(packed_checkpoint) as engine:
    assert len(play_legal_moves(engine, plies=6, seconds=1.0).move_stack) == 6
