"""The benchmarks' dry runs use the suite's fixtures and its session setup (tests/conftest.py: one JAX compilation
cache for the session)."""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / 'tests'))

from conftest import board_bag, compat  # noqa: E402,F401
