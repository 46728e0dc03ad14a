"""Tiny graph action-value model (AlphaGateau): 4 GATEAU layers, nodes d=64, edges 32, 4 heads, for a CPU.

The board as a graph (`searchless.model.graph`): 64 square nodes, an edge per
queen/knight relation (1856 with self-loops), every legal move scored from its
edge in one pass per board. It reads board_value records, as tiny_packed does,
and plays through the same Player and UCI engine.

Run (after `make run` has annotated the sample games):

    searchless-train --config graph_tiny --workdir runs/graph_tiny \\
        --data 'runs/demo/data/train/board_value*' \\
        --eval_data runs/demo/data/test/board_value_data.bag

Should reach (measured, benchmarks/RESULTS.md "A graph backbone", 2 CPU cores):
~380 ms per step of 32 boards (~2,500 action-values/s; tiny_packed ~5,300); in
15 minutes on 23,756 real Lichess boards (400 games, MultiPV at 20,000 nodes)
action accuracy 0.185, Kendall tau-b 0.183, 5.0% of the 1,500 dev puzzles
(tiny_packed on the same boards and budget: 0.112, 0.040, 0.9%); in 6 minutes
on the demo's 5,174 boards 0.106, 0.208, 1.3%.
"""

import ml_collections

from searchless import configs


def get_config() -> ml_collections.ConfigDict:
  c = configs.get('tiny_packed')
  c.model.kind = 'graph'
  c.model.packing = 'none'  # The graph model is per board by construction.
  c.model.embedding_dim = 64  # Node width.
  c.model.graph_edge_dim = 32  # Edge width: 1856 edges per board, so narrower than the 64 nodes.
  c.model.num_layers = 4  # GATEAU layers, each followed by a SwiGLU MLP on the nodes.
  c.model.num_heads = 4  # Attention heads over each square's incoming edges.
  c.loss.value_weight = 1.0  # The state-value head's loss beside the moves'.
  return c
