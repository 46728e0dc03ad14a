"""Finding, starting and configuring a UCI engine (Stockfish or any other): the one place that does.

Every part of searchless that talks to an engine (the annotator, agents,
adjudication, puzzle mining, openings, self-play, the report) finds its binary
with `find_stockfish` / `require_stockfish`, parses its limit with
`SearchLimit` and starts it with `open_engine`, so a missing or broken binary
fails the same way everywhere (`EngineNotFound`, one line naming the path).

>>> SearchLimit.parse('nodes=20000')
SearchLimit(kind='nodes', value=20000)
>>> str(SearchLimit.parse('time=0.05')), SearchLimit.parse('depth=9').uci_go()
('time=0.05', 'depth 9')
"""

import asyncio
from collections.abc import Mapping
import concurrent.futures
import contextlib
import dataclasses
import hashlib
import os
import shutil

import chess
import chess.engine

from searchless.plumbing import errors

STOCKFISH_ENV = 'SEARCHLESS_STOCKFISH'  # Environment variable naming the Stockfish binary.
DEFAULT_THREADS = 1  # UCI Threads: one per engine process (workers give the parallelism).
DEFAULT_HASH_MB = 16  # UCI Hash (MiB) per engine process.
HANG_SECONDS = 60.0  # Wall-clock cap on a node- or depth-limited search (python-chess sets none).
_INSTALL_HINT = f'install it (Debian/Ubuntu: apt-get install stockfish) or set {STOCKFISH_ENV}'


HANDSHAKE_SECONDS = 5.0  # For a UCI engine to answer "uci" with "uciok" (Stockfish takes milliseconds).


class EngineNotFound(errors.MissingInput):
  """The engine binary is missing or cannot be started."""


class EngineUnresponsive(chess.engine.EngineError):
  """The program started but is no UCI engine: no ``uciok`` within the deadline, or it exited."""


class EngineKilled(EngineUnresponsive):
  """The engine was killed by a signal during its handshake (the OOM killer, say): a fault of the moment, not of the
  program, worth another start."""


@dataclasses.dataclass(frozen=True)
class SearchLimit:
  """One engine limit: ``time`` (seconds), ``depth`` (plies) or ``nodes``."""

  kind: str
  value: float

  @classmethod
  def parse(cls, text: str) -> 'SearchLimit':
    """Parses ``time=0.05``, ``depth=12`` or ``nodes=20000``."""
    kind, _, value = text.partition('=')
    kind = kind.strip()
    number: float
    try:
      if kind == 'time':
        number = float(value)
      elif kind in ('depth', 'nodes'):
        number = int(value)
      else:
        raise ValueError
      if number <= 0:
        raise ValueError
    except ValueError:
      raise errors.BadInput(
        f'bad engine limit {text!r}: expected time=SECONDS, depth=N or nodes=N with a positive value'
      ) from None
    return cls(kind, number)

  def to_chess(self, hang_seconds: float | None = None) -> chess.engine.Limit:
    """The python-chess limit; `hang_seconds` also caps a node or depth search's wall-clock."""
    limit = chess.engine.Limit(**{self.kind: self.value})  # type: ignore[arg-type]  # int for depth and nodes.
    if hang_seconds is not None and self.kind != 'time':
      limit.time = hang_seconds
    return limit

  def uci_go(self) -> str:
    """The UCI ``go`` arguments of this limit (as python-chess would send them)."""
    if self.kind == 'time':
      return f'movetime {max(1, round(self.value * 1000))}'
    return f'{self.kind} {self.value}'

  def __str__(self) -> str:
    return f'{self.kind}={self.value:g}'


def find_stockfish() -> str | None:
  """The Stockfish binary from $SEARCHLESS_STOCKFISH, PATH or /usr/games; None if there is none.

  A $SEARCHLESS_STOCKFISH that names no executable is an `EngineNotFound` naming the variable, not passed over
  for another Stockfish.
  """
  if named := os.environ.get(STOCKFISH_ENV):
    found = resolve(named)
    if os.path.isdir(found) or not os.access(found, os.X_OK):
      raise EngineNotFound(f'{STOCKFISH_ENV}={named}: no such executable (point it at a Stockfish binary, or unset it)')
    return found
  for candidate in (shutil.which('stockfish'), '/usr/games/stockfish'):
    if candidate and os.access(candidate, os.X_OK):
      return candidate
  return None


def require_stockfish(path: str | None = None) -> str:
  """`path` if given, else the Stockfish `find_stockfish` finds; raises `EngineNotFound` if there is none."""
  found = path or find_stockfish()
  if found is None:
    raise EngineNotFound(f'Stockfish not found: {_INSTALL_HINT}')
  return found


def check_executable(path: str | None, flag: str = '--engine_path') -> None:
  """Refuses (ValueError naming `flag`) a given engine `path` that is no executable here (None: nothing given)."""
  if path and not os.access(resolve(path), os.X_OK):
    raise errors.BadInput(f'{flag} {path!r} is not an executable')


def binary_sha256(path: str) -> str | None:
  """The sha256 of the engine binary `path` (found as `resolve` finds it); None where it is not a local file.

  Recorded with every dataset: two builds of one version (generic, native) share an id name.
  """
  binary = resolve(path)
  if not os.path.isfile(binary):
    return None
  digest = hashlib.sha256()
  with open(binary, 'rb') as f:
    for block in iter(lambda: f.read(1 << 20), b''):
      digest.update(block)
  return digest.hexdigest()


def resolve(path: str) -> str:
  """`path` as found on PATH or in /usr/games (where Debian installs engines), else unchanged."""
  return shutil.which(path) or shutil.which(path, path='/usr/games') or path


def open_engine(
  path: str | None = None,
  *,
  threads: int = DEFAULT_THREADS,
  hash_mb: int = DEFAULT_HASH_MB,
  options: Mapping[str, str | int | bool | None] | None = None,
  handshake_seconds: float = HANDSHAKE_SECONDS,
) -> chess.engine.SimpleEngine:
  """Starts a UCI engine (default: Stockfish) with Threads and Hash set (where it has them) and `options`.

  `handshake_seconds`: how long it may take to answer ``uci`` (an engine that loads a model first needs more).

  Raises `EngineNotFound` when the binary cannot be started and `ValueError` when
  the engine rejects one of `options` (the process is closed first).
  """
  binary = resolve(require_stockfish(path))
  try:
    engine = _popen_uci(binary, handshake_seconds)
  except TimeoutError:  # Before OSError: it is one, with no message.
    raise EngineUnresponsive(f'{binary!r} is not a UCI engine: no "uciok" within {handshake_seconds:g} s') from None
  except chess.engine.EngineTerminatedError as error:
    raise EngineUnresponsive(
      f'{binary!r} is not a UCI engine: it exited during the "uci" handshake ({error})'
    ) from None
  except ProcessLookupError:  # It was gone before python-chess could say "uci" (before OSError: it is one).
    raise EngineNotFound(f'cannot start UCI engine {binary!r}: it exited at once, before the "uci" handshake') from None
  except (FileNotFoundError, PermissionError, OSError) as error:
    raise EngineNotFound(f'cannot start UCI engine {binary!r}: {error.strerror or error}') from None
  wanted = {'Threads': threads, 'Hash': hash_mb}
  try:
    engine.configure({k: v for k, v in wanted.items() if k in engine.options})
    if options:
      engine.configure(dict(options))
  except chess.engine.EngineError as error:
    name = engine.id.get('name', binary)
    close_engine(engine)
    raise errors.BadInput(f'{name}: {error}') from None
  return engine


def _popen_uci(binary: str, timeout: float) -> chess.engine.SimpleEngine:
  """python-chess' `SimpleEngine.popen_uci`, except that a program failing the handshake is killed and reaped
  before its event loop ends (else asyncio warns, when it exits later, that its loop is closed)."""

  async def background(future: concurrent.futures.Future) -> None:
    transport, protocol = await chess.engine.UciProtocol.popen(binary)
    engine = chess.engine.SimpleEngine(transport, protocol, timeout=timeout)
    try:
      try:
        await asyncio.wait_for(protocol.initialize(), timeout)
      except BaseException:
        transport.kill()
        with contextlib.suppress(Exception):
          await asyncio.wait_for(protocol.returncode, timeout)
        raise
      future.set_result(engine)
      engine.returncode.set_result(await protocol.returncode)
    finally:
      engine.close()
    await engine.shutdown_event.wait()

  return chess.engine.run_in_background(background, name=f'SimpleEngine (command={binary!r})')


async def open_engine_async(
  path: str | None = None,
  *,
  threads: int = DEFAULT_THREADS,
  hash_mb: int = DEFAULT_HASH_MB,
  options: Mapping[str, str | int | bool | None] | None = None,
  deadline: float | None = None,
) -> tuple[asyncio.SubprocessTransport, chess.engine.UciProtocol]:
  """`open_engine` on python-chess' asyncio API, each step (start, configure) within `deadline` seconds.

  Threads, Hash and `options` are set where the engine has them.
  """
  binary = resolve(require_stockfish(path))
  loop = asyncio.get_running_loop()
  try:
    transport, protocol = await loop.subprocess_exec(chess.engine.UciProtocol, binary)
  except (FileNotFoundError, PermissionError) as error:
    raise EngineNotFound(f'cannot start UCI engine {binary!r}: {error}') from None
  try:
    try:
      await asyncio.wait_for(protocol.initialize(), deadline)
    except asyncio.TimeoutError:
      raise EngineUnresponsive(f'{binary!r} is not a UCI engine: no "uciok" within {deadline:g} s') from None
    except chess.engine.EngineTerminatedError as error:
      if (transport.get_returncode() or 0) < 0:
        raise EngineKilled(f'{binary!r} was killed during the "uci" handshake ({error})') from None
      raise EngineUnresponsive(
        f'{binary!r} is not a UCI engine: it exited during the "uci" handshake ({error})'
      ) from None
    wanted = {'Threads': threads, 'Hash': hash_mb, **(options or {})}
    try:
      await asyncio.wait_for(protocol.configure({k: v for k, v in wanted.items() if k in protocol.options}), deadline)
    except asyncio.TimeoutError:
      raise EngineUnresponsive(f'UCI engine {binary!r} did not take its options within {deadline:g} s') from None
  except BaseException:
    try:
      transport.kill()  # Never leave a hanging child behind.
    except ProcessLookupError:
      pass
    transport.close()
    await asyncio.sleep(0)
    raise
  return transport, protocol


def close_engine(engine: chess.engine.SimpleEngine) -> None:
  """Quits `engine`, killing it when it no longer answers."""
  try:
    engine.quit()
  except (chess.engine.EngineTerminatedError, chess.engine.EngineError, TimeoutError):
    engine.close()
