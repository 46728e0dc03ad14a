"""Serving a checkpoint as a UCI engine on stdin/stdout: `run`, what ``searchless-uci`` runs.

`run` picks the policy (the checkpoint's, unless given), turns on JAX's
persistent compilation cache, wires a `UciEngine` to the process' stdin and
its clean protocol stdout (`process.uci_stdout`), and reads lines until
``quit`` or the end of input.
"""

import os
import sys
import typing

from searchless.model import loading
from searchless.play import compilation_cache as compilation_cache_lib
from searchless.play import player as player_lib
from searchless.play import policy as policy_lib
from searchless.play.uci import engine as engine_lib
from searchless.play.uci import process
from searchless.plumbing import errors


SWITCH_INTERVAL = 0.0005  # Seconds (`sys.setswitchinterval`) in the engine's process.


def checkpoint_policy(path: str) -> str:
  """The policy a checkpoint was trained for (`loading.trained_policy`; else action_value), without loading it."""
  experiment = loading.experiment_config(loading.resolve(path))
  return loading.trained_policy(path, experiment) or policy_lib.ACTION_VALUE


def run(
  checkpoint_path: str,
  *,
  policy: str | None = None,
  dtype: str = 'auto',
  temperature: float = 0.0,
  threads: int | None = None,
  seed: int | None = None,
  compilation_cache: str | None = None,
  search: str = engine_lib.SEARCHES[0],
) -> bool:
  """Speaks UCI on stdin/stdout with the model of `checkpoint_path` until ``quit`` or the end of input.

  `policy`: default the checkpoint's; `temperature`, `threads` (default: all
  available CPUs), `seed` and `search`: the options' starting values;
  `compilation_cache`: JAX's persistent cache directory ('': off; None: `compilation_cache.enable`'s choice).
  The model is loaded before the first line is read: a checkpoint that cannot be
  loaded, whatever the reason, raises FileNotFoundError / ValueError before speaking.
  Returns True once the engine has quit; when a search is stuck in the model
  the process exits at once instead (nor does JAX tear down under it).
  """
  policy = policy or checkpoint_policy(checkpoint_path)
  # A search thread waits at most this long for the interpreter's lock while a shape compiles in the
  # background (Python's default, 5 ms, is paid at every model call of a search on a clock).
  sys.setswitchinterval(SWITCH_INTERVAL)
  options = player_lib.PlayOptions(temperature=temperature, seed=seed)
  compilation_cache_lib.enable(compilation_cache)
  out = process.uci_stdout()

  def output(line: str) -> None:
    try:
      out.write(line + '\n')
      out.flush()
    except (BrokenPipeError, OSError, ValueError):  # The GUI is gone: nothing left to do.
      os._exit(0)  # pylint: disable=protected-access

  def factory(policy_name: str, play_options: player_lib.PlayOptions) -> player_lib.Player:
    return player_lib.Player.load(checkpoint_path, policy=policy_name, compute_dtype=dtype, options=play_options)

  engine = engine_lib.UciEngine(
    factory,
    output,
    policy=policy,
    checkpoint_name=os.path.basename(os.path.normpath(checkpoint_path)),
    options=options,
    threads=threads or process.available_cpus(),
    thread_limiter=process.limit_cpu_threads,
    search=search,
  )
  try:  # Before speaking: a checkpoint that cannot play ends the process here (one line, status 2).
    engine.load()
  except errors.USER_ERRORS as e:  # A bad checkpoint; anything else is a bug and keeps its traceback.
    raise errors.BadInput(f'could not load the model {checkpoint_path}: {e}') from None
  if not _serve(engine, sys.stdin.buffer):  # A search stuck in the model: don't wait for it.
    out.flush()
    os._exit(0)  # pylint: disable=protected-access
  if out is not sys.stdout:
    out.close()  # Our copy of the real stdout.
  return True


def _serve(engine: engine_lib.UciEngine, lines: typing.BinaryIO) -> bool:
  """Feeds `lines` to `engine` until quit or their end; False if a search is still running.

  Lines are read as bytes and decoded here, whatever the locale: bytes that
  are not UTF-8 become U+FFFD, and the engine answers that line as any other
  bad one (``info string error: ...``) instead of the process ending.
  """
  while True:
    try:
      raw = lines.readline()
    except (OSError, ValueError):
      raw = b''
    if not raw:  # End of input: the GUI closed the pipe or died.
      return engine.quit()
    line = raw.decode('utf-8', errors='replace')
    if not engine.handle(line):
      return not engine.searching
