"""Shared fixtures: the compat vectors (vendored in tests/fixtures), real data beside the checkout, Stockfish."""

import atexit
import os
import pathlib
import shutil
import signal
import tempfile

import pytest

# JAX's persistent compilation cache, one per test session (before anything imports jax): the many tests that train,
# load or play the same small models compile each computation once, and the processes they start inherit the cache
# through the environment. A cache named by the caller is used as it is.
if 'JAX_COMPILATION_CACHE_DIR' not in os.environ:
  os.environ['JAX_COMPILATION_CACHE_DIR'] = tempfile.mkdtemp(prefix='searchless-tests-jax-cache-')
  os.environ.setdefault('JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS', '0.2')
  atexit.register(shutil.rmtree, os.environ['JAX_COMPILATION_CACHE_DIR'], ignore_errors=True)
# XLA's optimizations off (unless the caller says otherwise), here and in the processes the tests start: at the tests'
# model sizes a compile costs more than the runs it serves. `make test` took 12.2 instead of 18.5 min on 2 cores, with
# every number within its float tolerance; what must be bit-exact with the reference's own numbers (the initial
# parameters) is computed in a process with them on (tests/integration/test_reference_train_step.py).
os.environ.setdefault('JAX_DISABLE_MOST_OPTIMIZATIONS', '1')

# A suite started in the background of a non-interactive shell (`make test &`) has SIGINT ignored, and so would
# every command the tests start and interrupt (an ignored signal stays ignored across exec): Python's own handler
# back, so that their Ctrl-C is a KeyboardInterrupt as it is at a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
  signal.signal(signal.SIGINT, signal.default_int_handler)

from helpers import COMPAT, DATA, LICHESS_999, write_checkpoint
from searchless.engines import launch

# UCI engines the tests start as processes; they read stdin, so --doctest-modules must not import them.
collect_ignore = ['integration/fake_engines']
# Docstring examples that build and run models: left out of `make test-fast` with the tests marked slow.
SLOW_DOCTESTS = ('searchless', 'searchless.model.graph', 'searchless.model.network')


def _tier(item: pytest.Item) -> int:
  """Where a test's file goes in the run: the files that build models (`*_slow.py`) first, then the rest of the
  integration tests (engines, Beam, servers, processes) and the campaign's and benchmarks' tests, then the fast tier
  (the unit tests, the docstring examples)."""
  parts = item.path.parts
  if 'integration' in parts:
    return 0 if item.path.stem.endswith('_slow') else 1
  return 1 if 'tests' in parts and ('campaign' in parts or 'benchmarks' in parts) else 2


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
  for item in items:
    if isinstance(item, pytest.DoctestItem) and item.name in SLOW_DOCTESTS:
      item.add_marker(pytest.mark.slow)
  # pytest-xdist (`make test`: --dist loadfile --no-loadscope-reorder) hands the files out in this order: the long
  # ones first, so that the many short ones fill the end of the run on every worker, and no worker is left alone
  # with a long file at the end (its default, most tests first, put the single-test files of a minute or more last).
  items.sort(key=_tier)


@pytest.fixture(scope='session')
def compat() -> pathlib.Path:
  assert COMPAT.is_dir(), f'the vendored ChessBench compat vectors are missing: {COMPAT}'  # Part of the checkout.
  return COMPAT


@pytest.fixture(scope='session')
def shared_data() -> pathlib.Path:
  if not DATA.is_dir():
    pytest.skip(f'shared real data (Lichess games, puzzles) not found at {DATA}: a checkout without ../shared')
  return DATA


@pytest.fixture(scope='session')
def lichess_999(shared_data) -> pathlib.Path:
  return LICHESS_999


@pytest.fixture(scope='session')
def stockfish() -> str:
  path = launch.find_stockfish()
  if path is None:
    pytest.skip('Stockfish not found (apt-get install stockfish, or set SEARCHLESS_STOCKFISH)')
  return path


@pytest.fixture(scope='session')
def model_checkpoint(tmp_path_factory) -> pathlib.Path:
  """A small random action-value model (d=32, 2 layers) saved in our layout: its workdir."""
  return write_checkpoint(tmp_path_factory.mktemp('model_checkpoint'))


@pytest.fixture(scope='session')
def board_bag(compat, tmp_path_factory) -> str:
  """The compat action-value sample as 57 board_value records (grouped in-process)."""
  from searchless.core import bags
  from searchless.data import boards as boards_lib

  grouped = {}
  for r in bags.read_records(str(compat / 'action_value_sample.bag'), 'action_value'):
    grouped.setdefault(r.fen, []).append((r.move, r.win_prob))
  path = tmp_path_factory.mktemp('boards') / 'board_value_data.bag'
  bags.write_records(str(path), 'board_value', [boards_lib.from_action_values(f, p) for f, p in grouped.items()])
  return str(path)
