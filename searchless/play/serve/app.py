"""The server's routes (Starlette): the JSON API, health, metrics and the page.

* ``POST /v1/analyse``: one position (``fen``, ``moves``) or ``positions``, batched (`service.Service.analyse`);
* ``POST /v1/play``: the search agent's move (servers started with ``--agent search:...``);
* ``POST /v1/stockfish``: Stockfish's move and win probability (servers started with ``--stockfish``);
* ``POST /v1/pgn``: a game's moves from its PGN (what the page steps through);
* ``GET /v1/info``: the model, the limits, what else the server answers;
* ``GET /health/live``: 200 while the process serves; ``GET /health/ready``: 200 once every batch shape is
  compiled (503 before, and while stopping);
* ``GET /metrics``: Prometheus' text format (`metrics`);
* ``GET /``: the analysis page, and ``/page/...`` its files (package data, no network).

Every error is a JSON object ``{"error": "<one sentence>"}``: 400 for a bad body (`inputs`), 413 for a body over
`inputs.MAX_BODY_BYTES` (its Content-Length, or the bytes as they stream in), 404/405, 503 with ``Retry-After``
while the model compiles or when the queue is full, 500 for a fault of the server (logged with its traceback,
never sent).
"""

import asyncio
from collections.abc import Awaitable, Callable
import contextlib
import functools
import importlib.resources
import logging
import time
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from searchless.play.serve import batcher as batcher_lib
from searchless.play.serve import inputs
from searchless.play.serve import metrics as metrics_lib
from searchless.play.serve import service as service_lib

_LOG = logging.getLogger(__name__)
RETRY_AFTER_SECONDS = 1  # Retry-After of a 503 (queue full, compiling, stopping).


def _error(message: str, status: int, **headers: str) -> JSONResponse:
  return JSONResponse({'error': message}, status_code=status, headers=headers or None)


def _unavailable(message: str) -> JSONResponse:
  return _error(message, 503, **{'Retry-After': str(RETRY_AFTER_SECONDS)})


async def read_body(request: Request) -> bytes:
  """The request's body; `inputs.BadRequest` (413) past `inputs.MAX_BODY_BYTES`, by its Content-Length or as it
  streams in (a body sent without one, or longer than it says)."""
  limit = inputs.MAX_BODY_BYTES
  declared = request.headers.get('content-length')
  if declared is not None and (not declared.isdigit() or int(declared) > limit):
    raise inputs.BadRequest(f'body: {declared} bytes (Content-Length), more than the {limit} allowed', 413)
  chunks, size = [], 0
  async for chunk in request.stream():
    size += len(chunk)
    if size > limit:
      raise inputs.BadRequest(f'body: more than the {limit} bytes allowed', 413)
    chunks.append(chunk)
  return b''.join(chunks)


Handler = Callable[[Request, bytes], Awaitable[Any]]


def _api(service: service_lib.Service, *, needs: str | None = None) -> Callable[[Handler], Callable]:
  """An endpoint of the JSON API: reads the body (`read_body`), answers the handler's dict as JSON, and turns each
  failure into its JSON error; `needs`: the service's part it uses (``agent``, ``stockfish``), 404 without it."""

  def wrap(handler: Handler) -> Callable:
    @functools.wraps(handler)
    async def endpoint(request: Request) -> Response:
      try:
        if needs is not None and getattr(service, needs) is None:
          flag = {'agent': '--agent search:...', 'stockfish': '--stockfish'}[needs]
          return _error(f'{request.url.path}: this server was started without {flag}', 404)
        body = await read_body(request)
        if service.stopping.is_set():
          return _unavailable('the server is stopping')
        if not service.ready:
          return _unavailable('the model is compiling its batch shapes; retry shortly (GET /health/ready)')
        return JSONResponse(await handler(request, body))
      except inputs.BadRequest as error:
        return _error(str(error), error.status)
      except batcher_lib.QueueFull as error:
        return _unavailable(f'the server is busy: {error}')
      except batcher_lib.Stopped:
        return _unavailable('the server is stopping')
      except Exception:  # pylint: disable=broad-except  # A fault of the server: logged, never sent.
        _LOG.exception('%s failed', request.url.path)
        return _error('internal error (the server logged it)', 500)

    return endpoint

  return wrap


class MetricsMiddleware:
  """Counts and times every request by endpoint (a route's path; ``other`` for an unknown one) and status, and
  counts those in flight."""

  def __init__(self, app: ASGIApp, metrics: metrics_lib.Metrics, endpoints: set[str]):
    self.app = app
    self.metrics = metrics
    self.endpoints = endpoints

  async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
    if scope['type'] != 'http':
      await self.app(scope, receive, send)
      return
    path = scope['path']
    endpoint = path if path in self.endpoints else '/page' if path.startswith('/page/') else 'other'
    status = [500]

    async def sending(message: Message) -> None:
      if message['type'] == 'http.response.start':
        status[0] = message['status']
      await send(message)

    start = time.perf_counter()
    self.metrics.started()
    try:
      await self.app(scope, receive, sending)
    finally:
      self.metrics.answered(endpoint, status[0], time.perf_counter() - start)


def make_app(
  service: service_lib.Service,
  *,
  on_ready: Callable[[float], None] | None = None,
  on_failure: Callable[[BaseException], None] | None = None,
) -> Starlette:
  """The application over `service`. At startup it starts the batcher and compiles the batch shapes on the model's
  thread (`on_ready(seconds)` after; `on_failure(error)` if that fails); at shutdown it stops the service."""
  metrics = service.metrics
  page = importlib.resources.files('searchless.play.serve') / 'page'  # Package data (no __init__.py).
  index = page.joinpath('index.html').read_bytes()

  async def home(request: Request) -> Response:
    return Response(index, media_type='text/html; charset=utf-8')

  async def live(request: Request) -> Response:
    return JSONResponse({'status': 'live'})

  async def ready(request: Request) -> Response:
    if service.stopping.is_set():
      return JSONResponse({'status': 'stopping'}, status_code=503)
    if not service.ready:
      return JSONResponse({'status': 'compiling'}, status_code=503, headers={'Retry-After': str(RETRY_AFTER_SECONDS)})
    return JSONResponse({'status': 'ready', 'compiled_shapes': service.compiled_shapes})

  async def metrics_text(request: Request) -> Response:
    return Response(metrics.text(), media_type=metrics_lib.CONTENT_TYPE)

  async def info(request: Request) -> Response:
    return JSONResponse(
      {
        'model': service.name,
        'policy': service.policy.kind,
        'ready': service.ready,
        'max_batch': service.max_batch,
        'max_positions': inputs.MAX_POSITIONS,
        'max_moves': inputs.MAX_MOVES,
        'max_body_bytes': inputs.MAX_BODY_BYTES,
        'play': None if service.agent is None else service.agent.name,
        'stockfish': None if service.stockfish is None else service.stockfish.id.get('name', 'stockfish'),
      }
    )

  @_api(service)
  async def analyse(request: Request, body: bytes) -> dict[str, Any]:
    boards, batch = inputs.analyse_request(body)
    answers = await service.analyse(boards)
    head = {'model': service.name, 'policy': service.policy.kind}
    return {**head, 'positions': answers} if batch else {**head, **answers[0]}

  @_api(service, needs='agent')
  async def play(request: Request, body: bytes) -> dict[str, Any]:
    return await service.play(inputs.play_request(body))

  @_api(service, needs='stockfish')
  async def stockfish(request: Request, body: bytes) -> dict[str, Any]:
    return await service.engine(inputs.position_request(body))

  @_api(service)
  async def pgn(request: Request, body: bytes) -> dict[str, Any]:
    game = inputs.pgn_request(body)
    board = game.board()
    moves = []
    for move in game.mainline_moves():
      moves.append({'uci': move.uci(), 'san': board.san(move)})
      board.push(move)
    return {'headers': dict(game.headers), 'fen': game.board().fen(), 'moves': moves}

  async def not_found(request: Request, error: Exception) -> Response:
    if isinstance(error, HTTPException):
      return _error(f'{request.method} {request.url.path}: {error.detail}', error.status_code)
    _LOG.error('%s failed', request.url.path, exc_info=error)
    return _error('internal error (the server logged it)', 500)

  @contextlib.asynccontextmanager
  async def lifespan(app: Starlette):
    service.start()
    loop = asyncio.get_running_loop()

    async def warm() -> None:
      try:
        seconds = await loop.run_in_executor(service._model_thread, service.warm_up)  # pylint: disable=protected-access
      except Exception as error:  # pylint: disable=broad-except  # Reported by `on_failure` (the server stops).
        _LOG.exception('compiling the batch shapes failed')
        if on_failure is not None:
          on_failure(error)
        return
      if on_ready is not None:
        on_ready(seconds)

    warming = loop.create_task(warm())
    try:
      yield
    finally:
      warming.cancel()
      await service.stop()

  routes = [
    Route('/', home),
    Route('/health/live', live),
    Route('/health/ready', ready),
    Route('/metrics', metrics_text),
    Route('/v1/info', info),
    Route('/v1/analyse', analyse, methods=['POST']),
    Route('/v1/play', play, methods=['POST']),
    Route('/v1/stockfish', stockfish, methods=['POST']),
    Route('/v1/pgn', pgn, methods=['POST']),
    Mount('/page', StaticFiles(directory=str(page)), name='page'),
  ]
  endpoints = {route.path for route in routes if isinstance(route, Route)}
  app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: not_found, Exception: not_found})
  app.add_middleware(MetricsMiddleware, metrics=metrics, endpoints=endpoints)
  return app
