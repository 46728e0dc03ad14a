"""What several tests share that is not a fixture: the checkout's paths, a small checkpoint writer, a UCI game."""

import contextlib
import os
import pathlib
import signal
import subprocess
import sys
import time

import chess
import chess.engine

ROOT = pathlib.Path(__file__).resolve().parents[1]  # The checkout.
FIXTURES = pathlib.Path(__file__).resolve().parent / 'fixtures'
COMPAT = FIXTURES / 'compat'  # The reference implementation's vectors, vendored (fixtures/compat/README.md).
SHARED = ROOT.parent / 'shared'  # Real Lichess data beside the checkout: tests that read it skip without it.
DATA = SHARED / 'data'
LICHESS_999 = DATA / 'games' / 'lichess_db_standard_rated_2021-10_first999.pgn'
SAMPLE_GAMES = ROOT / 'searchless' / 'samples' / 'sample_games.pgn'  # The shipped self-play games.
FAKE_ENGINES = pathlib.Path(__file__).resolve().parent / 'integration' / 'fake_engines'


TINY_CONFIG = 'tiny'


def write_checkpoint(
  directory: pathlib.Path,
  policy: str = 'action_value',
  seed: int = 0,
  overrides: tuple[str, ...] = ('model.embedding_dim=32', 'model.num_layers=2', 'model.num_heads=2'),
) -> pathlib.Path:
  """Saves a freshly initialised model in our layout (workdir/checkpoints/1) and returns the workdir."""
  import optax  # Test-time imports: only checkpoint tests pay for JAX.

  from searchless import configs
  from searchless.model import network
  from searchless.model.config import ModelConfig
  from searchless.training import checkpoint as checkpoint_lib

  experiment = configs.load(str(TINY_CONFIG), [f'policy={policy}', f'model.seed={seed}', *overrides])
  params = network.init_params(ModelConfig.from_config(experiment))
  opt_state = optax.adam(1e-3).init(params)
  with checkpoint_lib.Checkpointer(str(directory / 'checkpoints'), async_save=False) as checkpointer:
    assert checkpointer.save(1, params=params, params_ema=params, opt_state=opt_state, config=experiment)
  return directory


def tensorboard_scalars(logdir):
  """{tag: [(step, value)]} of the event files in `logdir` (TFRecord framing: length, crc, event, crc)."""
  import struct
  from tensorboardX.proto import event_pb2

  scalars = {}
  for path in sorted(logdir.glob('events.out.tfevents.*')):
    data = path.read_bytes()
    at = 0
    while at < len(data):
      (length,) = struct.unpack('<Q', data[at : at + 8])
      event = event_pb2.Event.FromString(data[at + 12 : at + 12 + length])
      at += 12 + length + 4
      for value in event.summary.value:
        scalars.setdefault(value.tag, []).append((event.step, round(value.simple_value, 4)))
  return scalars


def alive(process) -> bool:
  """Whether a psutil.Process still runs: not gone, not a zombie waiting to be reaped."""
  import psutil

  try:
    return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
  except psutil.NoSuchProcess:
    return False


def uci_argv(checkpoint, *args: str) -> list[str]:
  """The command line of `searchless-uci` on `checkpoint`, from this interpreter."""
  return [sys.executable, '-m', 'searchless.commands.uci', '--checkpoint', str(checkpoint), *args]


@contextlib.contextmanager
def uci_engine(checkpoint, *args: str):
  """`searchless-uci` on `checkpoint` as a python-chess engine; asserts it quits cleanly."""
  engine = chess.engine.SimpleEngine.popen_uci(uci_argv(checkpoint, *args), timeout=120, stderr=subprocess.DEVNULL)
  try:
    yield engine
  finally:
    engine.quit()
  assert engine.transport.get_returncode() == 0


def play_legal_moves(engine: chess.engine.SimpleEngine, plies: int, seconds: float) -> chess.Board:
  """Plays `plies` moves of `engine` against itself from the start, asserting each is legal."""
  board = chess.Board()
  for _ in range(plies):
    move = engine.play(board, chess.engine.Limit(time=seconds)).move
    assert move is not None and move in board.legal_moves
    board.push(move)
  return board


def signal_when(
  cmd: list[str], ready, sig: int = signal.SIGINT, *, group: bool = True, timeout: float = 300, stop: float = 300
):
  """Starts `cmd` in a session of its own and, once `ready()`, sends `sig` to its process group (as a terminal's
  Ctrl-C does; a reboot kills the whole group) or to the command alone; returns (status, stdout, stderr) once it
  ends, within `stop` seconds of the signal."""
  proc = subprocess.Popen(
    cmd,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
    start_new_session=True,
    env={**os.environ, 'PYTHONPATH': os.pathsep.join(sys.path), 'PYTHONFAULTHANDLER': '1'},
  )
  deadline = time.monotonic() + timeout
  try:
    while not ready():
      assert proc.poll() is None, proc.communicate()[1][-3000:]
      assert time.monotonic() < deadline, 'the command never got ready'
      time.sleep(0.1)
    if group:
      os.killpg(proc.pid, sig)
    else:
      proc.send_signal(sig)
    try:
      out, err = proc.communicate(timeout=stop)  # A loaded 2-core machine takes its time to stop the workers.
    except subprocess.TimeoutExpired:  # Hung: SIGABRT has faulthandler write every thread's stack to stderr.
      proc.send_signal(signal.SIGABRT)
      err = proc.communicate(timeout=60)[1]
      raise AssertionError(f'still running {stop} s after the signal; its threads then:\n{err[-8000:]}') from None
  finally:
    if proc.poll() is None:
      os.killpg(proc.pid, signal.SIGKILL)
      proc.wait()
    if sig == signal.SIGKILL:
      with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # Its workers too, as a reboot would.
  return proc.returncode, out, err


def namespaces() -> bool:
  """Whether a command can run in a user and mount namespace of its own (``unshare -rm``): where the tests mount a
  small or read-only tmpfs, a real full disk, without being root outside it."""
  try:
    return subprocess.run(['unshare', '-rm', 'true'], capture_output=True, timeout=10).returncode == 0
  except (FileNotFoundError, subprocess.TimeoutExpired):
    return False
