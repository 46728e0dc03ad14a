"""JAX's persistent compilation cache for play: compiled batch shapes are kept on disk between processes.

Compiling a model's batch shapes costs seconds per shape on a CPU; with this
cache a new process (the Python API, the UCI engine, a search agent) loads the
shapes an earlier one compiled instead. `enable` turns it on; `load_policy`
(`searchless.play.player`, hence `Player.load` and every agent spec) and the
UCI engine call it before they compile anything. The folder, first match wins:

1. the `directory` given (``searchless-uci --compilation_cache DIR``);
2. ``$SEARCHLESS_COMPILATION_CACHE`` (set empty: no cache);
3. JAX's own setting, when the user gave one (``$JAX_COMPILATION_CACHE_DIR`` or
   ``jax.config.update('jax_compilation_cache_dir', ...)``): left as it is;
4. ``$XDG_CACHE_HOME/searchless/xla``, by default ``~/.cache/searchless/xla``.

The folder holds nothing but compiled code and the record of the models whose
probe passed (``searchless-probes/``, `searchless.model.loading`: the same files
load without running it again): deleting it (``rm -r ~/.cache/searchless/xla``)
only makes the next start compile and probe again.

>>> default_dir().endswith(os.path.join('searchless', 'xla'))
True
"""

import argparse
import os

ENV = 'SEARCHLESS_COMPILATION_CACHE'  # Moves the cache; set empty, turns it off.
_MIN_COMPILE_SECONDS_ENV = 'JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS'  # JAX's own; respected when set.


def default_dir() -> str:
  """The folder of rule 4 (see the module docstring): ``$XDG_CACHE_HOME/searchless/xla`` or ``~/.cache/...``."""
  root = os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')
  return os.path.join(root, 'searchless', 'xla')


def add_flag(parser: argparse.ArgumentParser) -> None:
  """Adds ``--compilation_cache DIR`` (default None: rule 2 onwards), the `directory` of `enable`."""
  parser.add_argument(
    '--compilation_cache',
    metavar='DIR',
    default=None,
    help="JAX's persistent compilation cache: later starts reuse the compiled batch shapes ('' turns it"
    f' off; default: ${ENV} if set, else $JAX_COMPILATION_CACHE_DIR if set, else {default_dir()}).',
  )


def enable(directory: str | None = None) -> str | None:
  """Turns JAX's persistent compilation cache on (see the module docstring for the folder); returns the
  folder in use, or None when the cache is off (`directory` or ``$SEARCHLESS_COMPILATION_CACHE`` empty).

  Call it before the first compile of the process: JAX fixes its cache then. Every compiled shape is
  kept (JAX's default keeps only compiles over a second) unless ``$JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS``
  says otherwise.
  """
  import jax  # pylint: disable=import-outside-toplevel  # The spec parsers import this package without JAX.

  if directory is None:
    directory = os.environ.get(ENV)
  current = getattr(jax.config, 'jax_compilation_cache_dir')  # Typed stubs lack the attribute.
  if directory is None:
    directory = current or default_dir()
  if not directory:
    return None
  if current != directory:
    jax.config.update('jax_compilation_cache_dir', directory)
  if _MIN_COMPILE_SECONDS_ENV not in os.environ:
    jax.config.update('jax_persistent_cache_min_compile_time_secs', 0.0)
  return directory
