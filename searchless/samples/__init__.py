"""The sample data shipped in the package (``README.md`` here says how each was made).

`GAMES`: 50 Stockfish self-play games, the demo's default input. `PUZZLES`: 194
puzzles mined from 200 other self-play games, the demo's puzzle set.

>>> GAMES.name, PUZZLES.name
('sample_games.pgn', 'sample_puzzles.csv')
"""

import importlib.resources
import pathlib

_HERE = pathlib.Path(str(importlib.resources.files(__name__)))
GAMES = _HERE / 'sample_games.pgn'
PUZZLES = _HERE / 'sample_puzzles.csv'
