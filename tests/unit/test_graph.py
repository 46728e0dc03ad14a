"""The graph model (AlphaGateau): equivariance of its layer, the moves it scores, its configs."""

import dataclasses

import chess
import numpy as np
import pytest

from searchless import configs
from searchless.core import moves
from searchless.model import board_graph
from searchless.model.config import ModelConfig

SMALL = ModelConfig(
  kind='graph',
  embedding_dim=16,
  num_layers=2,
  num_heads=2,
  output_size=32,
  max_sequence_length=79,
  graph_edge_dim=8,
  seed=3,
)


def test_the_graph_is_every_queen_and_knight_relation():
  assert (board_graph.NUM_RELATIONS, board_graph.NUM_EDGES, board_graph.NUM_SLOTS) == (1792, 1856, 1904)
  assert int(board_graph.SLOT_MASK.sum()) == 1856
  # d4 receives from 27 queen squares, 8 knight squares and itself; a1 from 21 + 2 + 1.
  assert board_graph.SLOT_MASK[board_graph.SLOT_RECEIVER == chess.D4].sum() == 36 == board_graph.IN_DEGREE[chess.D4]
  assert board_graph.SLOT_MASK[board_graph.SLOT_RECEIVER == chess.A1].sum() == 24 == board_graph.IN_DEGREE[chess.A1]
  # Three grids of receivers by in-degree: 28 squares of 24-26 edges, 20 of 28-30, 16 of 34-36.
  assert [g.mask.shape for g in board_graph.GROUPS] == [(28, 26), (20, 30), (16, 36)]
  assert sorted(board_graph.NODE_ORDER.tolist()) == list(range(64))
  assert board_graph.ONE_GRID.mask.shape == (64, 36) and int(board_graph.ONE_GRID.mask.sum()) == 1856
  # Each flat slot's place in the one grid holds the same edge (sender and mask), and the place's source is it.
  place, grid_senders = board_graph.ONE_GRID_PLACE, board_graph.ONE_GRID.senders.reshape(-1)
  flat_senders = np.concatenate([g.senders.reshape(-1) for g in board_graph.GROUPS])
  assert len(set(place.tolist())) == 1904 and (grid_senders[place] == flat_senders).all()
  assert (board_graph.ONE_GRID.mask.reshape(-1)[place] == board_graph.SLOT_MASK).all()
  assert (board_graph.ONE_GRID_SOURCE[place] == np.arange(1904)).all()
  assert (board_graph.ONE_GRID_TYPES[place] == board_graph.SLOT_TYPES).all()
  assert int((board_graph.ONE_GRID_TYPES == board_graph.NUM_EDGE_TYPES - 1).sum()) == 2304 - 1856  # Padding.
  assert (
    board_graph.NODE_ORDER[board_graph.NODE_OF_SQUARE[chess.D4]] == chess.D4
    and board_graph.NODE_OF_SQUARE[chess.D4] >= 48
  )
  e2e4 = board_graph.SLOT_OF_ACTION[moves.MOVE_TO_ACTION['e2e4']]
  assert (board_graph.SLOT_SENDER[e2e4], board_graph.SLOT_RECEIVER[e2e4]) == (chess.E2, chess.E4)
  assert board_graph.BETWEEN[e2e4].nonzero()[0].tolist() == [chess.E3]
  # A promotion uses its pawn move's edge; the four pieces differ by the promotion input only.
  assert len({int(board_graph.SLOT_OF_ACTION[moves.MOVE_TO_ACTION[f'a7a8{p}']]) for p in 'qrbn'}) == 1


def test_graph_configs():
  config = configs.load('graph_tiny', ['data.train=unused'])
  model_config = ModelConfig.from_config(config)
  assert (model_config.kind, model_config.packed, model_config.graph_edge_dim) == ('graph', True, 32)
  with pytest.raises(ValueError, match="model.kind='graph' scores moves"):
    ModelConfig.from_config(configs.load('graph_tiny', ['data.train=unused', 'policy=state_value']))
  with pytest.raises(ValueError, match="packing 'none'"):
    dataclasses.replace(SMALL, packing='board')
  with pytest.raises(ValueError, match='model kind must be one of'):
    dataclasses.replace(SMALL, kind='gnn')
  with pytest.raises(ValueError, match='model.graph_edge_dim must be >= 1'):
    ModelConfig.from_config(configs.load('graph_tiny', ['data.train=unused', 'model.graph_edge_dim=0']))
