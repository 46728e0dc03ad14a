"""The predictor's architecture: `ModelConfig`, for the transformer (the paper's) and the graph model.

`searchless.model.transformer.build` builds either from it; `ModelConfig.from_config`
reads it from an experiment config (`searchless.core.config`).

>>> ModelConfig(embedding_dim=16, num_layers=2, num_heads=2, output_size=128, max_sequence_length=79).packed
False
>>> ModelConfig(kind='graph', embedding_dim=16, num_layers=2, num_heads=2, output_size=128,
...             max_sequence_length=79, graph_edge_dim=0)
Traceback (most recent call last):
...
ValueError: graph_edge_dim must be >= 1, got 0
"""

import dataclasses

import ml_collections

from searchless.core import moves
from searchless.core import records
from searchless.core import tokenizer
from searchless.model import priors

# The reference sizes the position table for the longest sequence (action_value)
# whatever the policy, so its checkpoints of every policy have 79 position rows.
POSITION_ROWS = tokenizer.SEQUENCE_LENGTH + 2

SEQUENCE_LENGTHS = records.SEQUENCE_LENGTHS  # Per policy: 79 action_value, 78 otherwise.

KINDS = ('transformer', 'graph')  # The ChessBench transformer | the AlphaGateau graph network (`graph`).
PACKINGS = ('none', 'board')  # One sequence per move (the paper) | per board.
MOVE_ATTENTIONS = ('self', 'moves')  # What a packed move token attends to besides the board.


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelConfig:
  """Architecture of the predictor (the reference's TransformerConfig, narrowed)."""

  embedding_dim: int  # Width d of the residual stream.
  num_layers: int  # Transformer blocks.
  num_heads: int  # Attention heads; d / num_heads features per head.
  output_size: int  # Classes per position: return buckets or NUM_ACTIONS.
  max_sequence_length: int  # Rows of the learned position table.
  widening_factor: int = 4  # SwiGLU hidden size = widening_factor * d.
  emb_init_scale: float = 0.02  # Std of the truncated-normal token-embedding init.
  apply_post_ln: bool = True  # Final LayerNorm before the output layer.
  apply_qk_layernorm: bool = False  # LayerNorm on queries and keys.
  use_causal_mask: bool = False  # The reference attends over the whole board.
  seed: int = 1  # Parameter initialisation seed (`init_params`).
  packing: str = 'none'  # 'none': one sequence per move (the paper); 'board': one per board.
  move_attention: str = 'self'  # Packed: a move token sees the board and itself | all real moves.
  joint_layers: int = 0  # Packed: blocks before the last in which board tokens also see the real moves.
  kind: str = 'transformer'  # 'transformer' | 'graph' (searchless.model.graph: per board, like packing='board').
  graph_edge_dim: int = 32  # Graph: width of the edge features (nodes have embedding_dim).
  graph_open_lines: bool = True  # Graph: each edge is told whether its line is open (False: an ablation).
  # Structural priors (`searchless.model.priors`), transformer only, each off by default:
  mover_view: bool = False  # Black to move: board and moves mirrored, so every board is seen as White.
  move_squares: str = 'none'  # 'none' | 'tied' | 'untied': move tokens add their squares' and promotion's embeddings.
  square_bias: str = 'none'  # 'none' | 'relative' | 'open_lines': learned attention biases by square displacement (priors).
  smolgen: int = 0  # > 0: a board-dependent bias between squares per head and layer (Leela's smolgen), summary this wide.
  move_gather: bool = False  # Before every block a move token adds a map of its from- and to-square's states (action-value).

  def __post_init__(self):
    if self.kind not in KINDS:
      raise ValueError(f'model kind must be one of {KINDS}, got {self.kind!r}')
    if self.move_squares not in priors.MOVE_SQUARES:
      raise ValueError(f'move_squares must be one of {priors.MOVE_SQUARES}, got {self.move_squares!r}')
    if self.smolgen < 0:
      raise ValueError(f'smolgen must be >= 0 (0: off), got {self.smolgen}')
    if self.square_bias not in priors.SQUARE_BIASES:
      raise ValueError(f'square_bias must be one of {priors.SQUARE_BIASES}, got {self.square_bias!r}')
    if self.kind == 'graph':
      if self.mover_view or self.move_squares != 'none' or self.square_bias != 'none' or self.smolgen or self.move_gather:
        raise ValueError('mover_view, move_squares, square_bias, smolgen and move_gather are transformer options '
                         '(the graph model has its own)')
      if self.packing != 'none' or self.output_size == moves.NUM_ACTIONS:
        raise ValueError("the graph model scores every legal move of a board: packing 'none', value buckets as outputs")
      if self.embedding_dim % self.num_heads:
        raise ValueError(f'embedding_dim {self.embedding_dim} is not divisible by num_heads {self.num_heads}')
      if self.graph_edge_dim < 1:
        raise ValueError(f'graph_edge_dim must be >= 1, got {self.graph_edge_dim}')
      return
    if not self.graph_open_lines:
      raise ValueError('graph_open_lines is a graph option (the transformer has no edges)')
    if self.embedding_dim % self.num_heads:
      raise ValueError(
          f'embedding_dim {self.embedding_dim} is not divisible by num_heads {self.num_heads}'
      )
    if self.packing not in PACKINGS:
      raise ValueError(f'packing must be one of {PACKINGS}, got {self.packing!r}')
    if self.move_attention not in MOVE_ATTENTIONS:
      raise ValueError(f'move_attention must be one of {MOVE_ATTENTIONS}, got {self.move_attention!r}')
    if not 0 <= self.joint_layers < self.num_layers:
      raise ValueError(f'joint_layers must be in [0, num_layers - 1 = {self.num_layers - 1}], got {self.joint_layers}')
    if self.packing == 'board' and (self.use_causal_mask or self.output_size == moves.NUM_ACTIONS):
      raise ValueError('board packing is an action-value model: no causal mask, value buckets as outputs')

  @property
  def packed(self) -> bool:
    """Whether the model reads whole boards (`[B, 77 + M]` -> `[B, M, V]`): board packing or the graph model."""
    return self.packing == 'board' or self.kind == 'graph'

  @classmethod
  def from_config(cls, config: ml_collections.ConfigDict | ml_collections.FrozenConfigDict) -> 'ModelConfig':
    """Returns the model of an experiment config (`config.model`, policy, buckets)."""
    policy = config.policy
    if policy not in SEQUENCE_LENGTHS:
      raise ValueError(f'unknown policy {policy!r} (expected one of {sorted(SEQUENCE_LENGTHS)})')
    m = config.model
    if m.get('packing', 'none') == 'board' and policy != 'action_value':
      raise ValueError(f"model.packing='board' scores moves: it needs policy action_value, not {policy!r}")
    if m.get('move_squares', 'none') != 'none' and policy != 'action_value':
      raise ValueError(f"model.move_squares embeds the input's move token: it needs policy action_value, not {policy!r}")
    if m.get('move_gather', False) and policy != 'action_value':
      raise ValueError(f"model.move_gather reads the input's move token: it needs policy action_value, not {policy!r}")
    if m.get('kind', 'transformer') == 'graph' and policy != 'action_value':
      raise ValueError(f"model.kind='graph' scores moves: it needs policy action_value, not {policy!r}")
    return cls(
        embedding_dim=m.embedding_dim,
        num_layers=m.num_layers,
        num_heads=m.num_heads,
        widening_factor=m.widening_factor,
        emb_init_scale=m.emb_init_scale,
        apply_post_ln=m.apply_post_ln,
        apply_qk_layernorm=m.apply_qk_layernorm,
        use_causal_mask=m.use_causal_mask,
        output_size=moves.NUM_ACTIONS if policy == 'behavioral_cloning' else config.num_return_buckets,
        max_sequence_length=POSITION_ROWS,
        seed=m.seed,
        # Configs saved before board packing existed have none of these fields.
        packing=m.get('packing', 'none'),
        move_attention=m.get('move_attention', 'self'),
        joint_layers=m.get('joint_layers', 0),
        kind=m.get('kind', 'transformer'),
        graph_edge_dim=m.get('graph_edge_dim', 32),
        graph_open_lines=m.get('graph_open_lines', True),
        mover_view=m.get('mover_view', False),
        move_squares=m.get('move_squares', 'none'),
        square_bias=m.get('square_bias', 'none'),
        smolgen=m.get('smolgen', 0),
        move_gather=m.get('move_gather', False),
    )
