"""`run`: what ``searchless-serve`` runs: load the checkpoint, bind, compile, serve until SIGTERM or Ctrl-C.

The address is bound first (a port in use is one line, before any loading), then the
model is loaded (a checkpoint that cannot be is one line too), the search agent and
Stockfish started where asked, and uvicorn serves; the batch shapes compile on the
model's thread meanwhile, and ``/health/ready`` answers 200 once they have. SIGTERM and
Ctrl-C make ``/health/ready`` say ``stopping`` at once, stop the searches in flight (each
answers its move so far), stop taking connections, answer the requests in flight
(`GRACE_SECONDS` at most; the last line says how many were cut off past it) and end:
SIGTERM with status 0, Ctrl-C with 130 (``interrupted; ...``); a compile still running
then is abandoned. Beyond loopback, the server needs ``--token`` (or ``--no_token``, said
aloud); every connection is bounded (`connections`, ``--body_timeout``).
"""

from collections.abc import Callable, Sequence
import errno
import ipaddress
import logging
import os
import signal
import socket
import sys

from searchless.engines import launch
from searchless.play import agents
from searchless.play import compilation_cache as compilation_cache_lib
from searchless.play import player as player_lib
from searchless.play.search import agent as search_agent
from searchless.play.serve import app as app_lib
from searchless.play.serve import connections
from searchless.play.serve import guard
from searchless.play.serve import metrics as metrics_lib
from searchless.play.serve import service as service_lib
from searchless.plumbing import errors

GRACE_SECONDS = 4.0  # For the requests in flight at SIGTERM / Ctrl-C: the server is gone within 5 s.
_LOG = logging.getLogger(__name__)


def bind(host: str, port: int) -> socket.socket:
  """A listening socket on `host`:`port` (0: a free port); an address in use or not this machine's is a
  `errors.BadInput` naming the flags."""
  if not 0 <= port <= 65535:
    raise errors.BadInput(f'--port {port}: expected a port from 0 to 65535')
  try:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
  except socket.gaierror as error:
    raise errors.BadInput(f'--host {host}: {error.strerror}') from None
  family, kind, proto, _, address = infos[0]
  sock = socket.socket(family, kind, proto)
  sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
  try:
    sock.bind(address)
    sock.listen(2048)
  except OSError as error:
    sock.close()
    if error.errno == errno.EADDRINUSE:
      raise errors.BadInput(f'--port {port}: {host}:{port} is in use (another server?); pick another port') from None
    raise errors.BadInput(f'--host {host} --port {port}: cannot listen there ({error.strerror})') from None
  return sock


def url(sock: socket.socket) -> str:
  """The http URL of a bound socket."""
  host, port = sock.getsockname()[:2]
  return f'http://[{host}]:{port}/' if ':' in host else f'http://{host}:{port}/'


def loopback(host: str) -> bool:
  """Whether `host` (``--host``) is this machine alone: ``localhost`` or a loopback address."""
  try:
    return host == 'localhost' or ipaddress.ip_address(host).is_loopback
  except ValueError:
    return False


def _search_agent(spec: str) -> search_agent.SearchAgent:
  kind, _, _ = agents.parse_spec(spec)
  if kind != 'search':
    raise errors.BadInput(f'--agent {spec}: expected a search agent, search:CHECKPOINT[,algo=mcts|alphabeta,...]')
  try:
    agent = agents.from_spec(spec)
  except errors.UserError as error:
    raise type(error)(f'--agent {spec}: {error}') from None
  assert isinstance(agent, search_agent.SearchAgent)
  return agent


def run(
  checkpoint: str,
  *,
  host: str = '127.0.0.1',
  port: int = 8000,
  policy: str | None = None,
  dtype: str = 'auto',
  max_batch: int = 64,
  max_wait_ms: float = 0.0,
  max_queue: int = 1024,
  agent: str | None = None,
  stockfish: bool = False,
  engine_path: str | None = None,
  stockfish_limit: str = 'time=0.2',
  compilation_cache: str | None = None,
  log_level: str = 'warning',
  token: str | None = None,
  no_token: bool = False,
  allow_host: Sequence[str] = (),
  allow_origin: Sequence[str] = (),
  max_connections: int = 512,
  header_timeout: float = 10.0,
  body_timeout: float = app_lib.BODY_TIMEOUT_SECONDS,
  keepalive_timeout: float = 5.0,
  announce: Callable[[str], None] = errors.print_or_quit,
  warn: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
) -> None:
  """Serves `checkpoint` (a name or folder, as ``--checkpoint`` anywhere) on `host`:`port` until SIGTERM (returns)
  or Ctrl-C (KeyboardInterrupt); `announce` is told the URL, then when the server is ready; `warn`, that it serves
  beyond loopback. A checkpoint, agent, Stockfish or address that cannot be had, or a bind beyond loopback with
  neither `token` nor `no_token`, is a `errors.UserError` before anything is served."""
  import uvicorn  # The serve extra (the command checks it first).

  limit = launch.SearchLimit.parse(stockfish_limit)
  for flag, value in (('--max_batch', max_batch), ('--max_queue', max_queue)):
    if value < 1:
      raise errors.BadInput(f'{flag}: expected 1 or more, got {value}')
  if max_wait_ms < 0:
    raise errors.BadInput(f'--max_wait_ms: expected 0 or more, got {max_wait_ms:g}')
  if max_queue < max_batch:
    raise errors.BadInput(f'--max_queue {max_queue}: less than --max_batch {max_batch}, a batch could never fill')
  if max_connections < 1:
    raise errors.BadInput(f'--max_connections: expected 1 or more, got {max_connections}')
  for flag, seconds in (('--header_timeout', header_timeout), ('--body_timeout', body_timeout)):
    if not seconds > 0:
      raise errors.BadInput(f'{flag}: expected seconds above 0, got {seconds:g}')
  if not keepalive_timeout > 0:
    raise errors.BadInput(f'--keepalive_timeout: expected seconds above 0, got {keepalive_timeout:g}')
  if token is not None and (len(token) < 16 or not token.isascii() or not token.isprintable() or ' ' in token):
    raise errors.BadInput('--token: expected 16 or more printable ASCII characters without spaces')
  if token is not None and no_token:
    raise errors.BadInput('--token, --no_token: give one of them')
  if not loopback(host) and token is None and not no_token:
    raise errors.BadInput(
      f'--host {host}: serving beyond this machine needs --token T (clients send "Authorization: Bearer T"; '
      'the page takes it as ?token=T), or --no_token to serve anyone who can reach it'
    )
  sock = bind(host, port)
  if not loopback(host):
    reach = 'anyone who can reach it can use it (--no_token)' if token is None else 'clients need its --token'
    warn(f'warning: --host {host} serves beyond this machine, in plain HTTP: {reach}')
  compilation_cache_lib.enable(compilation_cache)
  loaded = player_lib.load_policy(checkpoint, policy=policy, compute_dtype=dtype)
  searcher = _search_agent(agent) if agent else None
  engine = launch.open_engine(engine_path) if stockfish else None
  service = service_lib.Service(
    loaded,
    name=os.path.basename(os.path.normpath(checkpoint)),
    metrics=metrics_lib.Metrics(),
    max_batch=max_batch,
    max_queue=max_queue,
    max_wait_ms=max_wait_ms,
    agent=searcher,
    stockfish=engine,
    stockfish_limit=limit,
  )
  failed: list[BaseException] = []
  server: uvicorn.Server | None = None

  def ready(seconds: float) -> None:
    announce(f'ready: {service.compiled_shapes} batch shapes compiled in {seconds:.1f} s')

  def failure(error: BaseException) -> None:
    failed.append(error)
    if server is not None:
      server.should_exit = True

  access = guard.Access.bind(host, allow_hosts=tuple(allow_host), allow_origins=tuple(allow_origin), token=token)
  app = app_lib.make_app(service, access=access, body_timeout=body_timeout, on_ready=ready, on_failure=failure)
  config = uvicorn.Config(
    app,
    http=connections.protocol(max_connections=max_connections, header_timeout=header_timeout),
    log_level=log_level.lower(),
    access_log=False,
    lifespan='on',
    timeout_keep_alive=keepalive_timeout,  # type: ignore[arg-type]  # uvicorn takes a float (call_later).
    timeout_graceful_shutdown=int(GRACE_SECONDS),
    proxy_headers=False,  # Nothing here reads the client's address; one layer less on every request.
    server_header=False,
  )

  class Server(uvicorn.Server):
    def handle_exit(self, sig, frame) -> None:  # SIGTERM, Ctrl-C: "stopping" from now on, searches stop.
      service.begin_stopping()
      super().handle_exit(sig, frame)

  server = Server(config)
  announce(f'serving {service.name} ({loaded.kind}) at {url(sock)} (compiling its batch shapes: GET /health/ready)')
  terminated: list[int] = []
  previous = signal.signal(signal.SIGTERM, lambda number, frame: terminated.append(number))  # uvicorn re-raises it.
  try:
    server.run(sockets=[sock])
  except KeyboardInterrupt:
    _exit_if_compiling(service, interrupted=True)
    raise KeyboardInterrupt(_drained(app)) from None
  finally:
    signal.signal(signal.SIGTERM, previous)
    sock.close()
  if failed:
    raise failed[0]
  if terminated:
    announce(f'stopped (SIGTERM): {_drained(app)}')
  _exit_if_compiling(service, interrupted=False)


def _drained(app: app_lib.Gate) -> str:
  """What became of the requests in flight at the signal."""
  if not app.cut_off:
    return 'the requests in flight were answered'
  return f'{app.cut_off} request(s) in flight were cut off after {GRACE_SECONDS:g} s (answered 503)'


def _exit_if_compiling(service: service_lib.Service, *, interrupted: bool) -> None:
  """Ends the process now when the warm-up still compiles (its thread cannot be stopped, and the interpreter
  would wait for it at exit): Ctrl-C's line and status 130, or status 0."""
  if service.ready:
    return
  sys.stdout.flush()
  if interrupted:
    print('interrupted; stopped while compiling the batch shapes', file=sys.stderr, flush=True)
  sys.stderr.flush()
  os._exit(errors.INTERRUPTED if interrupted else 0)  # pylint: disable=protected-access
