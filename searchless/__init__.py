"""searchless: distil a chess engine into a transformer that plays without search.

The public API (imported lazily: ``import searchless`` loads neither JAX nor Beam):

>>> import chess, searchless
>>> player = searchless.Player.load('pretrained')   # The model shipped in the package.
>>> board = chess.Board('r1bqkbnr/pppp1ppp/2n5/4p3/2B1P3/5Q2/PPPP1PPP/RNB1K1NR w KQkq - 4 4')
>>> move = player.play(board)   # Scholar's mate is there: Qxf7#.
>>> move in board.legal_moves
True

* `Player`, `PlayOptions` - a trained model that plays (`Player.load(path or 'pretrained')`).
* `Policy`, `Analysis`, `load_policy` - a model's view of boards (move values, win probabilities).
* `load_model` - a checkpoint's model config, parameters and experiment config.
* `load_config` - an experiment config by name (``'tiny'``) or path, with overrides.
* `SearchLimit`, `find_stockfish` - engine limits and the Stockfish binary.

The subpackages, in their import layers (each imports only its own and those
before it): `plumbing` (paths, fetching, atomic writes, locks, outputs, the parser, errors,
progress) -> `core` (moves, tokens, values, records, bags, config values) -> `engines`
(Stockfish), `model` (the networks, loading) -> `configs` (the experiment configs)
-> `data` (PGN, boards, annotation, loader) -> `play` -> `evaluation` -> `training`
-> `report` -> `pipelines` (the data jobs) -> `commands` (the console scripts).
"""

import importlib
from typing import TYPE_CHECKING, Any

__version__ = '0.1.0'

# Public name -> (module, attribute).
_API = {
  'Player': ('searchless.play.player', 'Player'),
  'PlayOptions': ('searchless.play.player', 'PlayOptions'),
  'Policy': ('searchless.play.policy', 'Policy'),
  'Analysis': ('searchless.play.policy', 'Analysis'),
  'load_policy': ('searchless.play.player', 'load_policy'),
  'load_model': ('searchless.model.loading', 'load_model'),
  'load_config': ('searchless.core.config', 'load'),
  'SearchLimit': ('searchless.engines.launch', 'SearchLimit'),
  'find_stockfish': ('searchless.engines.launch', 'find_stockfish'),
}
__all__ = [
  'Analysis',
  'PlayOptions',
  'Player',
  'Policy',
  'SearchLimit',
  'find_stockfish',
  'load_config',
  'load_model',
  'load_policy',
  '__version__',
]

if TYPE_CHECKING:
  from searchless.core.config import load as load_config
  from searchless.engines.launch import SearchLimit, find_stockfish
  from searchless.model.loading import load_model
  from searchless.play.player import Player, PlayOptions, load_policy
  from searchless.play.policy import Analysis, Policy


def __getattr__(name: str) -> Any:
  if name in _API:
    module, attribute = _API[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value  # Later lookups skip this function.
    return value
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def __dir__() -> list[str]:
  return sorted([*globals(), *_API])
