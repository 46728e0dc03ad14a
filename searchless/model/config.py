"""The predictor's architecture: `ModelConfig`, for the transformer (the paper's) and the graph model.

The one home of the model's fields, their defaults (the paper's 9M model) and their checks.
`searchless.model.network.build` builds either kind from it; `ModelConfig.from_config`
reads it from an experiment config (`searchless.core.config`), whose ``model`` section
holds `ModelConfig.experiment_defaults()`.

>>> ModelConfig().packed, ModelConfig().num_layers
(False, 8)
>>> ModelConfig(kind='graph', graph_edge_dim=0)
Traceback (most recent call last):
...
searchless.plumbing.errors.BadInput: model.graph_edge_dim must be >= 1, got 0
"""

import dataclasses
from typing import Any

import ml_collections

from searchless.core import moves
from searchless.core import records
from searchless.core import tokenizer
from searchless.model import priors
from searchless.plumbing import errors

# The reference sizes the position table for the longest sequence (action_value)
# whatever the policy, so its checkpoints of every policy have 79 position rows.
POSITION_ROWS = tokenizer.SEQUENCE_LENGTH + 2

SEQUENCE_LENGTHS = records.SEQUENCE_LENGTHS  # Per policy: 79 action_value, 78 otherwise.

KINDS = ('transformer', 'graph')  # The ChessBench transformer | the AlphaGateau graph network (`graph`).
PACKINGS = ('none', 'board')  # One sequence per move (the paper) | per board.
MOVE_ATTENTIONS = ('self', 'moves')  # What a packed move token attends to besides the board.

_FROM_POLICY = ('output_size', 'max_sequence_length')  # `from_config` derives them from the policy and the buckets.
# The smallest value of each numeric field, and whether it is allowed.
_RANGES = (
  ('embedding_dim', 1, True),
  ('num_layers', 1, True),
  ('num_heads', 1, True),
  ('widening_factor', 0, False),
  ('joint_layers', 0, True),
  ('graph_edge_dim', 1, True),
  ('smolgen', 0, True),
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelConfig:
  """Architecture of the predictor (the reference's TransformerConfig, narrowed); the defaults are the paper's 9M."""

  embedding_dim: int = 256  # Width d of the residual stream.
  num_layers: int = 8  # Transformer blocks (graph: GATEAU layers).
  num_heads: int = 8  # Attention heads; d / num_heads features per head.
  output_size: int = 128  # Classes per position: return buckets or NUM_ACTIONS (from the policy and buckets).
  max_sequence_length: int = POSITION_ROWS  # Rows of the learned position table.
  widening_factor: int = 4  # SwiGLU hidden size = widening_factor * d.
  emb_init_scale: float = 0.02  # Std of the truncated-normal token-embedding init.
  apply_post_ln: bool = True  # Final LayerNorm before the output layer.
  apply_qk_layernorm: bool = False  # LayerNorm on queries and keys.
  use_causal_mask: bool = False  # The reference predicts from the whole board.
  seed: int = 1  # Parameter initialisation seed (`network.init_params`).
  # 'none': one sequence per move (the paper) | 'board': one per board (board_value records).
  packing: str = 'none'
  move_attention: str = 'self'  # packing='board': a move token sees the board and itself | 'moves': all real moves.
  joint_layers: int = 0  # packing='board': blocks before the last in which board tokens also see the real moves.
  # 'transformer' (the paper) | 'graph': AlphaGateau's graph network (`searchless.model.graph`), per board
  # like packing='board' (board_value records).
  kind: str = 'transformer'
  graph_edge_dim: int = 32  # kind='graph': width of the edge features (nodes have embedding_dim; heads num_heads).
  graph_open_lines: bool = True  # kind='graph': each edge is told whether its line is open (False: an ablation).
  # Structural priors (`searchless.model.priors`), transformer only, each off by default:
  mover_view: bool = False  # Black to move: board and moves mirrored, so every board is seen as White.
  move_squares: str = 'none'  # 'none' | 'tied' | 'untied': move tokens add their squares' and promotion's embeddings.
  square_bias: str = 'none'  # 'none' | 'relative' | 'open_lines': learned attention biases by square displacement.
  smolgen: int = (
    0  # > 0: a board-dependent bias between squares per head and layer (Leela's smolgen), summary this wide.
  )
  move_gather: bool = (
    False  # Before every block a move token adds a map of its from- and to-square's states (action-value).
  )

  def __post_init__(self):
    for name, low, inclusive in _RANGES:
      value = getattr(self, name)
      if not (value >= low if inclusive else value > low):  # NaN fails both.
        raise errors.BadInput(f'model.{name} must be {">=" if inclusive else ">"} {low}, got {value}')
    if self.kind not in KINDS:
      raise errors.BadInput(f'model kind must be one of {KINDS}, got {self.kind!r}')
    if self.move_squares not in priors.MOVE_SQUARES:
      raise errors.BadInput(f'move_squares must be one of {priors.MOVE_SQUARES}, got {self.move_squares!r}')
    if self.square_bias not in priors.SQUARE_BIASES:
      raise errors.BadInput(f'square_bias must be one of {priors.SQUARE_BIASES}, got {self.square_bias!r}')
    if self.embedding_dim % self.num_heads:
      raise errors.BadInput(f'embedding_dim {self.embedding_dim} is not divisible by num_heads {self.num_heads}')
    if self.kind == 'graph':
      if (
        self.mover_view or self.move_squares != 'none' or self.square_bias != 'none' or self.smolgen or self.move_gather
      ):
        raise errors.BadInput(
          'mover_view, move_squares, square_bias, smolgen and move_gather are transformer options '
          '(the graph model has its own)'
        )
      if self.packing != 'none' or self.output_size == moves.NUM_ACTIONS:
        raise errors.BadInput(
          "the graph model scores every legal move of a board: packing 'none', value buckets as outputs"
        )
      return
    if not self.graph_open_lines:
      raise errors.BadInput('graph_open_lines is a graph option (the transformer has no edges)')
    if self.packing not in PACKINGS:
      raise errors.BadInput(f'packing must be one of {PACKINGS}, got {self.packing!r}')
    if self.move_attention not in MOVE_ATTENTIONS:
      raise errors.BadInput(f'move_attention must be one of {MOVE_ATTENTIONS}, got {self.move_attention!r}')
    if not self.joint_layers < self.num_layers:
      raise errors.BadInput(
        f'joint_layers must be in [0, num_layers - 1 = {self.num_layers - 1}], got {self.joint_layers}'
      )
    if self.packing == 'board' and (self.use_causal_mask or self.output_size == moves.NUM_ACTIONS):
      raise errors.BadInput('board packing is an action-value model: no causal mask, value buckets as outputs')

  @property
  def packed(self) -> bool:
    """Whether the model reads whole boards (`[B, 77 + M]` -> `[B, M, V]`): board packing or the graph model."""
    return self.packing == 'board' or self.kind == 'graph'

  @classmethod
  def experiment_defaults(cls) -> dict[str, Any]:
    """The fields of an experiment config's ``model`` section, with their defaults.

    Every field but those `from_config` derives from the policy and the buckets.

    >>> defaults = ModelConfig.experiment_defaults()
    >>> defaults['embedding_dim'], defaults['kind'], 'output_size' in defaults
    (256, 'transformer', False)
    """
    return {field.name: field.default for field in dataclasses.fields(cls) if field.name not in _FROM_POLICY}

  @classmethod
  def from_config(cls, config: ml_collections.ConfigDict | ml_collections.FrozenConfigDict) -> 'ModelConfig':
    """Returns the model of an experiment config (`config.model`, policy, buckets).

    A field missing from ``config.model`` (a config saved before the field existed) takes its default.

    >>> config = ml_collections.ConfigDict({'policy': 'action_value', 'num_return_buckets': 32,
    ...                                     'model': {'num_layers': 2, 'foo': 1}})
    >>> ModelConfig.from_config(config)
    Traceback (most recent call last):
    ...
    searchless.plumbing.errors.BadInput: unknown model field 'foo'
    """
    policy = config.policy
    if policy not in SEQUENCE_LENGTHS:
      raise errors.BadInput(f'unknown policy {policy!r} (expected one of {sorted(SEQUENCE_LENGTHS)})')
    defaults = cls.experiment_defaults()
    for name in config.model.keys():
      if name not in defaults:
        raise errors.BadInput(f'unknown model field {name!r}')
    fields = {**defaults, **config.model}
    if fields['packing'] == 'board' and policy != 'action_value':
      raise errors.BadInput(f"model.packing='board' scores moves: it needs policy action_value, not {policy!r}")
    if fields['move_squares'] != 'none' and policy != 'action_value':
      raise errors.BadInput(
        f"model.move_squares embeds the input's move token: it needs policy action_value, not {policy!r}"
      )
    if fields['move_gather'] and policy != 'action_value':
      raise errors.BadInput(
        f"model.move_gather reads the input's move token: it needs policy action_value, not {policy!r}"
      )
    if fields['kind'] == 'graph' and policy != 'action_value':
      raise errors.BadInput(f"model.kind='graph' scores moves: it needs policy action_value, not {policy!r}")
    output_size = moves.NUM_ACTIONS if policy == 'behavioral_cloning' else config.num_return_buckets
    return cls(**fields, output_size=output_size, max_sequence_length=POSITION_ROWS)
