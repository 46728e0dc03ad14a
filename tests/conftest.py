"""Shared fixtures: the compat vectors and real data beside the checkout, and Stockfish."""

import pathlib

import pytest

from searchless import engine

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / 'shared'
COMPAT = SHARED / 'compat'
DATA = SHARED / 'data'
LICHESS_999 = DATA / 'games' / 'lichess_db_standard_rated_2021-10_first999.pgn'


@pytest.fixture(scope='session')
def compat() -> pathlib.Path:
  if not COMPAT.is_dir():
    pytest.skip(f'ChessBench compat fixtures not found at {COMPAT}')
  return COMPAT


@pytest.fixture(scope='session')
def shared_data() -> pathlib.Path:
  if not DATA.is_dir():
    pytest.skip(f'shared real data not found at {DATA}')
  return DATA


@pytest.fixture(scope='session')
def lichess_999(shared_data) -> pathlib.Path:
  return LICHESS_999


@pytest.fixture(scope='session')
def stockfish() -> str:
  path = engine.find_stockfish()
  if path is None:
    pytest.skip('Stockfish not found (apt-get install stockfish, or set SEARCHLESS_STOCKFISH)')
  return path
