"""The campaign's tests use the suite's fixtures (real data beside the checkout, Stockfish, small models)."""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / 'tests'))

from conftest import board_bag, compat, lichess_999, model_checkpoint, shared_data, stockfish  # noqa: E402,F401
