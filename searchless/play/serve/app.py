"""The server's routes: the JSON API (`JsonApi`, plain ASGI), and health, metrics and the page (Starlette).

* ``POST /v1/analyse``: one position (``fen``, ``moves``) or ``positions``, batched (`service.Service.analyse`);
* ``POST /v1/play``: the search agent's move (servers started with ``--agent search:...``);
* ``POST /v1/stockfish``: Stockfish's move and win probability (servers started with ``--stockfish``);
* ``POST /v1/pgn``: a game's moves from its PGN (what the page steps through);
* ``POST /v1/review``: a game's review (``fen``, ``moves``): each move's win% before and after, the model's best
  move, the mark, and each player's accuracy (`searchless.play.review`, what ``searchless-review`` writes);
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
import importlib.resources
import logging
import time
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from searchless.play import review as review_lib
from searchless.play.serve import batcher as batcher_lib
from searchless.play.serve import inputs
from searchless.play.serve import metrics as metrics_lib
from searchless.play.serve import service as service_lib

_LOG = logging.getLogger(__name__)
RETRY_AFTER_SECONDS = 1  # Retry-After of a 503 (queue full, compiling, stopping).
CLIENT_GONE = 499  # The status counted for a request whose client left before its answer (nginx's).


_JSON_TYPE = (b'content-type', b'application/json')  # Of every answer (Starlette's JSONResponse writes the same).


class JsonResponse(JSONResponse):
  """A JSON response rendered by orjson: an answer's dozens of moves in a tenth of the standard library's time."""

  def render(self, content: Any) -> bytes:
    return orjson.dumps(content)


def _error(message: str, status: int, **headers: str) -> JSONResponse:
  return JsonResponse({'error': message}, status_code=status, headers=headers or None)


def _unavailable(message: str) -> JSONResponse:
  return _error(message, 503, **{'Retry-After': str(RETRY_AFTER_SECONDS)})


class ClientGone(Exception):
  """The client closed its connection before its request's body was read."""


async def read_body(scope: Scope, receive: Receive) -> bytes:
  """The request's body; `inputs.BadRequest` (413) past `inputs.MAX_BODY_BYTES`, by its Content-Length or as it
  streams in (a body sent without one, or longer than it says); `ClientGone` if the client left."""
  limit = inputs.MAX_BODY_BYTES
  declared = next((value.decode('latin-1') for name, value in scope['headers'] if name == b'content-length'), None)
  if declared is not None and (not declared.isdigit() or int(declared) > limit):
    raise inputs.BadRequest(f'body: {declared} bytes (Content-Length), more than the {limit} allowed', 413)
  chunks, size = [], 0
  while True:
    message = await receive()
    if message['type'] == 'http.disconnect':
      raise ClientGone()
    chunk = message.get('body', b'')
    size += len(chunk)
    if size > limit:
      raise inputs.BadRequest(f'body: more than the {limit} bytes allowed', 413)
    chunks.append(chunk)
    if not message.get('more_body', False):
      return b''.join(chunks)


Handler = Callable[[bytes], Awaitable[dict[str, Any]]]


class JsonApi:
  """The JSON API's endpoints (POST, a JSON body in, a JSON object out) as one plain ASGI app: a request goes
  from the server to its handler without Starlette's router and middleware between (a tenth of what the
  server adds to a lone position's time). `endpoints`: path -> (handler of the body, the service's part it
  uses, ``agent`` or ``stockfish``, or None); a server without that part answers 404. Each failure is its
  JSON error; a fault of the server is logged with its traceback and answered 500, never sent."""

  def __init__(self, service: service_lib.Service, endpoints: dict[str, tuple[Handler, str | None]]):
    self.service = service
    self.endpoints = endpoints

  def endpoint(self, path: str) -> str | None:
    """The endpoint `path` names (a trailing slash or not), or None."""
    path = path.rstrip('/')
    return path if path in self.endpoints else None

  async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
    path = self.endpoint(scope['path'])
    assert path is not None, scope['path']
    try:
      response = await self._answer(path, scope, receive)
    except ClientGone:
      return
    if isinstance(response, bytes):  # An answer's JSON: sent as is (a Starlette response's headers cost more).
      length = str(len(response)).encode()
      await send({'type': 'http.response.start', 'status': 200, 'headers': [_JSON_TYPE, (b'content-length', length)]})
      await send({'type': 'http.response.body', 'body': response})
    else:
      await response(scope, receive, send)

  async def _answer(self, path: str, scope: Scope, receive: Receive) -> Response | bytes:
    """The handler's answer as JSON bytes, or the error's response."""
    handler, needs = self.endpoints[path]
    service = self.service
    try:
      if scope['method'] != 'POST':
        return _error(f'{scope["method"]} {path}: Method Not Allowed', 405, Allow='POST')
      if needs is not None and getattr(service, needs) is None:
        flag = {'agent': '--agent search:...', 'stockfish': '--stockfish'}[needs]
        return _error(f'{path}: this server was started without {flag}', 404)
      body = await read_body(scope, receive)
      if service.stopping.is_set():
        return _unavailable('the server is stopping')
      if not service.ready:
        return _unavailable('the model is compiling its batch shapes; retry shortly (GET /health/ready)')
      return orjson.dumps(await handler(body))
    except inputs.BadRequest as error:
      return _error(str(error), error.status)
    except batcher_lib.QueueFull as error:
      return _unavailable(f'the server is busy: {error}')
    except batcher_lib.Stopped:
      return _unavailable('the server is stopping')
    except ClientGone:
      raise
    except Exception:  # pylint: disable=broad-except  # A fault of the server: logged, never sent.
      _LOG.exception('%s failed', path)
      return _error('internal error (the server logged it)', 500)


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
    named = path.rstrip('/') or path  # /v1/analyse/ is /v1/analyse.
    endpoint = named if named in self.endpoints else '/page' if path.startswith('/page/') else 'other'
    status = [CLIENT_GONE]  # Unless an answer starts: a client that left before its answer.

    async def sending(message: Message) -> None:
      if message['type'] == 'http.response.start':
        status[0] = message['status']
      await send(message)

    start = time.perf_counter()
    self.metrics.started()
    try:
      await self.app(scope, receive, sending)
    except BaseException:
      if status[0] == CLIENT_GONE:
        status[0] = 500
      raise
    finally:
      self.metrics.answered(endpoint, status[0], time.perf_counter() - start)


def make_app(
  service: service_lib.Service,
  *,
  on_ready: Callable[[float], None] | None = None,
  on_failure: Callable[[BaseException], None] | None = None,
) -> ASGIApp:
  """The application over `service`. At startup it starts the batcher and compiles the batch shapes on the model's
  thread (`on_ready(seconds)` after; `on_failure(error)` if that fails); at shutdown it stops the service."""
  metrics = service.metrics
  page = importlib.resources.files('searchless.play.serve') / 'page'  # Package data (no __init__.py).
  index = page.joinpath('index.html').read_bytes()

  async def home(request: Request) -> Response:
    return Response(index, media_type='text/html; charset=utf-8')

  async def live(request: Request) -> Response:
    return JsonResponse({'status': 'live'})

  async def ready(request: Request) -> Response:
    if service.stopping.is_set():
      return JsonResponse({'status': 'stopping'}, status_code=503)
    if not service.ready:
      return JsonResponse({'status': 'compiling'}, status_code=503, headers={'Retry-After': str(RETRY_AFTER_SECONDS)})
    return JsonResponse({'status': 'ready', 'compiled_shapes': service.compiled_shapes})

  async def metrics_text(request: Request) -> Response:
    return Response(metrics.text(), media_type=metrics_lib.CONTENT_TYPE)

  async def info(request: Request) -> Response:
    return JsonResponse(
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

  async def analyse(body: bytes) -> dict[str, Any]:
    boards, batch = inputs.analyse_request(body)
    answers = await service.analyse(boards)
    head = {'model': service.name, 'policy': service.policy.kind}
    return {**head, 'positions': answers} if batch else {**head, **answers[0]}

  async def play(body: bytes) -> dict[str, Any]:
    return await service.play(inputs.play_request(body))

  async def stockfish(body: bytes) -> dict[str, Any]:
    return await service.engine(inputs.position_request(body))

  async def pgn(body: bytes) -> dict[str, Any]:
    game = inputs.pgn_request(body)
    board = game.board()
    moves = []
    for move in game.mainline_moves():
      moves.append({'uci': move.uci(), 'san': board.san(move)})
      board.push(move)
    return {'headers': dict(game.headers), 'fen': game.board().fen(), 'moves': moves}

  async def review(body: bytes) -> dict[str, Any]:
    boards, moves = review_lib.replay(inputs.position_request(body))
    if service.policy.kind == 'behavioral_cloning':
      raise inputs.BadRequest("a review needs win probabilities: this server's policy (behavioral_cloning) has none")
    answers = []
    for start in range(0, len(boards), inputs.MAX_POSITIONS):  # As the page's requests: within the queue's size.
      answers += await service.analyse(boards[start : start + inputs.MAX_POSITIONS])
    views = [review_lib.view_of_answer(answer, move) for answer, move in zip(answers, [*moves, None])]
    head = {'model': service.name, 'policy': service.policy.kind, 'fen': boards[0].fen()}
    return {**head, **review_lib.review(boards[0].fen(), moves, views)}

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

  api = JsonApi(
    service,
    {
      '/v1/analyse': (analyse, None),
      '/v1/play': (play, 'agent'),
      '/v1/stockfish': (stockfish, 'stockfish'),
      '/v1/pgn': (pgn, None),
      '/v1/review': (review, None),
    },
  )
  routes = [
    Route('/', home),
    Route('/health/live', live),
    Route('/health/ready', ready),
    Route('/metrics', metrics_text),
    Route('/v1/info', info),
    Mount('/page', StaticFiles(directory=str(page)), name='page'),
  ]
  handlers = {HTTPException: not_found, Exception: not_found}
  rest = Starlette(routes=routes, lifespan=lifespan, exception_handlers=handlers)

  async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope['type'] == 'http' and api.endpoint(scope['path']) is not None:
      await api(scope, receive, send)
    else:  # The page, health, metrics, info, unknown paths; the lifespan.
      await rest(scope, receive, send)

  endpoints = {route.path for route in routes if isinstance(route, Route)} | set(api.endpoints)
  return MetricsMiddleware(app, metrics, endpoints)
