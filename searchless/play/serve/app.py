"""The server's routes (one Starlette router) and the one middleware in front of them, `Gate`.

* ``POST /v1/analyse``: one position (``fen``, ``moves``) or ``positions``, batched (`service.Service.analyse`);
* ``POST /v1/play``: the search agent's move (servers started with ``--agent search:...``);
* ``POST /v1/stockfish``: Stockfish's move and win probability (servers started with ``--stockfish``);
* ``POST /v1/pgn``: a game's moves from its PGN (what the page steps through);
* ``POST /v1/review``: a game's review (``fen``, ``moves``): each move's win% before and after, the model's best
  move, the mark, and each player's accuracy (`searchless.play.review`, what ``searchless-review`` writes);
* ``GET /v1/info``: the model, the limits, what else the server answers;
* ``GET /health/live``: 200 while the process serves; ``GET /health/ready``: 200 once every batch shape is
  compiled (503 before, and from SIGTERM on);
* ``GET /metrics``: Prometheus' text format (`metrics`);
* ``GET /``: the analysis page, and ``/page/...`` its files (package data, no network).

An API request whose client leaves before its answer is cancelled (its positions leave the queue, its search
stops) and counted 499; the checks of /v1/analyse requests take their turn, so that one left meanwhile is
cancelled before its checks (a batch's wait, with others in flight, until the loop acts on the disconnects it
read: `gone_cancelled`). Once ready, the process's long-lived objects are frozen out of the garbage
collector's generations (a full collection over them stopped every thread for 150-770 ms).

Every error is a JSON object ``{"error": "<one sentence>"}``: 400 for a bad body
(`inputs`), 401/403/415/421 for a request `guard` refuses, 404/405, 408 for a body not sent within
``--body_timeout``, 413 for a body over `inputs.MAX_BODY_BYTES` or more positions than ``--max_queue``, 503 with
``Retry-After`` while the model compiles, when the queue is full and while stopping, 500 for a fault of the server
(logged with its traceback, never sent).
"""

import asyncio
from collections.abc import Awaitable, Callable
import contextlib
import gc
import importlib.resources
import logging
import time
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from searchless.play import review as review_lib
from searchless.play.serve import batcher as batcher_lib
from searchless.play.serve import guard
from searchless.play.serve import inputs
from searchless.play.serve import metrics as metrics_lib
from searchless.play.serve import parser as parser_lib
from searchless.play.serve import service as service_lib

_LOG = logging.getLogger(__name__)
RETRY_AFTER_SECONDS = 1  # Retry-After of a 503 (queue full, compiling, stopping).
CLIENT_GONE = 499  # The status counted for a request whose client left before its answer (nginx's).
BODY_TIMEOUT_SECONDS = 10.0  # A request's body, all of it, within this (`--body_timeout`).


class JsonResponse(Response):
  """A JSON answer rendered by orjson: an answer's dozens of moves in a tenth of the standard library's time."""

  media_type = guard.JSON

  def render(self, content: Any) -> bytes:
    return content if isinstance(content, bytes) else orjson.dumps(content)


def error(message: str, status: int, **headers: str) -> JsonResponse:
  """The JSON error ``{"error": message}``."""
  return JsonResponse({'error': message}, status_code=status, headers=headers or None)


def unavailable(message: str) -> JsonResponse:
  return error(message, 503, **{'Retry-After': str(RETRY_AFTER_SECONDS)})


class ClientGone(Exception):
  """The client closed its connection before its answer."""


class _Nothing(Response):
  """No answer: the client is gone."""

  def __init__(self) -> None:
    super().__init__(status_code=CLIENT_GONE)

  async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
    return None


async def read_body(receive: Receive, headers: list[tuple[bytes, bytes]], seconds: float) -> bytes:
  """The request's body, all of it within `seconds`; `inputs.BadRequest` past `inputs.MAX_BODY_BYTES` (413), by
  its Content-Length or as it streams in, or after `seconds` (408); `ClientGone` if the client left."""
  limit = inputs.MAX_BODY_BYTES
  declared = next((value.decode('latin-1') for name, value in headers if name == b'content-length'), None)
  if declared is not None and (not declared.isdigit() or int(declared) > limit):
    if declared.isdigit() and int(declared) <= 2 * limit:  # Read and dropped: the client, still sending, reads
      with contextlib.suppress(TimeoutError):  # its 413 rather than a reset.
        async with asyncio.timeout(seconds):
          while (message := await receive())['type'] == 'http.request' and message.get('more_body', False):
            pass
    raise inputs.BadRequest(f'body: {declared[:40]} bytes (Content-Length), more than the {limit} allowed', 413)
  chunks, size = [], 0
  try:
    async with asyncio.timeout(seconds):
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
  except TimeoutError:
    raise inputs.BadRequest(f'body: {size} bytes in {seconds:g} s, not all of it (--body_timeout)', 408) from None


async def unless_gone(receive: Receive, work: Awaitable[Any]) -> Any:
  """`work`'s result; cancelled, and `ClientGone`, as soon as the client disconnects (once its body is read, the
  next message a client sends is its disconnect)."""
  me = asyncio.current_task()
  assert me is not None
  left = False

  async def watch() -> None:
    nonlocal left
    while (await receive())['type'] != 'http.disconnect':
      pass
    left = True
    me.cancel()

  watcher = asyncio.get_running_loop().create_task(watch())
  try:
    await asyncio.sleep(0)  # The watcher's first look: a client already gone costs no check and no model call.
    return await work
  except asyncio.CancelledError:
    if left and me.uncancel() == 0:
      raise ClientGone() from None
    raise
  finally:
    watcher.cancel()


async def gone_cancelled() -> None:
  """Lets the event loop read its sockets and act on what it read: a client whose disconnect is there to read is
  cancelled here (`unless_gone`), before the work that follows. That takes the loop four turns under asyncio (one
  reads the reset, the next reports the connection lost, the third wakes the request's watcher, which cancels
  the request, the fourth delivers it) and three under uvloop (which reports the loss as it reads)."""
  for _ in range(4):
    await asyncio.sleep(0)


Handler = Callable[[bytes], Awaitable[dict[str, Any]]]


def api_endpoint(
  service: service_lib.Service, handler: Handler, needs: str | None, body_timeout: float
) -> Callable[[Request], Awaitable[Response]]:
  """The route of a JSON endpoint: the body read (bounded in size and time), `handler`'s answer while the client
  stays; each failure its JSON error. `needs`: the service's part it uses (``agent``, ``stockfish``), without
  which it is a 404."""
  flag = {'agent': '--agent search:...', 'stockfish': '--stockfish', None: ''}[needs]

  async def endpoint(request: Request) -> Response:
    if needs is not None and getattr(service, needs) is None:
      return error(f'{request.url.path.rstrip("/")}: this server was started without {flag}', 404)
    service.requests += 1
    try:
      body = await read_body(request.receive, request.scope['headers'], body_timeout)
      if service.stopping.is_set():
        return unavailable('the server is stopping')
      if not service.ready:
        return unavailable('the model is compiling its batch shapes; retry shortly (GET /health/ready)')
      return JsonResponse(orjson.dumps(await unless_gone(request.receive, handler(body))))
    except ClientGone:
      return _Nothing()
    except inputs.BadRequest as bad:
      return error(str(bad), bad.status, **({'Connection': 'close'} if bad.status in (408, 413) else {}))
    except batcher_lib.TooLarge as large:
      return error(f'positions: {large}', 413)
    except batcher_lib.QueueFull as full:
      return unavailable(f'the server is busy: {full}')
    except batcher_lib.Stopped:
      return unavailable('the server is stopping')
    except service_lib.ModelFault:
      return error('internal error: the model gave non-finite values for this position (the server logged it)', 500)
    finally:
      service.requests -= 1

  return endpoint


class Gate:
  """The middleware in front of the routes: `guard.Access`'s checks, the headers of every answer, and the
  metrics: every request counted and timed by endpoint (a route's path; ``other`` for an unknown one) and status
  (499: the client left first), those in flight, and (`cut_off`) those cut off unanswered at shutdown."""

  def __init__(self, app: ASGIApp, metrics: metrics_lib.Metrics, endpoints: set[str], access: guard.Access):
    self.app = app
    self.metrics = metrics
    self.endpoints = endpoints
    self.access = access
    self.cut_off = 0

  async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
    if scope['type'] != 'http':
      await self.app(scope, receive, send)
      return
    path = scope['path']
    named = path.rstrip('/') or path  # /v1/analyse/ is /v1/analyse.
    endpoint = named if named in self.endpoints else '/page' if path.startswith('/page/') else 'other'
    status = CLIENT_GONE  # Unless an answer starts: a client that left before its answer.
    extra = self.access.headers(path)
    unread = any(  # A body is announced.
      (name == b'content-length' and value != b'0') or name == b'transfer-encoding' for name, value in scope['headers']
    )

    async def receiving() -> Message:
      nonlocal unread
      message = await receive()
      unread = unread and message['type'] == 'http.request' and message.get('more_body', False)
      return message

    async def sending(message: Message) -> None:
      nonlocal status
      if message['type'] == 'http.response.start':
        status = message['status']
        message['headers'] = [*message.get('headers', ()), *extra]
        if unread:  # Answered before its body was read (a refusal): the rest is not waited for.
          message['headers'].append((b'connection', b'close'))
      await send(message)

    start = time.perf_counter()
    self.metrics.started()
    try:
      refused = self.access.refusal(scope['method'], path, scope['headers'])
      if refused is not None:
        headers = {'WWW-Authenticate': 'Bearer'} if refused[0] == 401 else {}
        await error(refused[1], refused[0], **headers)(scope, receiving, sending)
      else:
        await self.app(scope, receiving, sending)
    except asyncio.CancelledError:  # Shutdown's grace is over: the request is cut off, answered 503 if it can be.
      self.cut_off += 1
      if status == CLIENT_GONE:
        with contextlib.suppress(Exception):
          await unavailable('the server stopped before this request was answered')(scope, receive, sending)
      raise
    except BaseException:
      if status == CLIENT_GONE:
        status = 500
      raise
    finally:
      self.metrics.answered(endpoint, status, time.perf_counter() - start)


def make_app(
  service: service_lib.Service,
  *,
  access: guard.Access | None = None,
  body_timeout: float = BODY_TIMEOUT_SECONDS,
  on_ready: Callable[[float], None] | None = None,
  on_failure: Callable[[BaseException], None] | None = None,
) -> Gate:
  """The application over `service`, open to `access` (default: a server on 127.0.0.1). At startup it starts the
  batcher and compiles the batch shapes on the model's thread (`on_ready(seconds)` after; `on_failure(error)` if
  that fails); at shutdown it stops the service."""
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
        'max_queue': service.max_queue,
        'max_positions': inputs.MAX_POSITIONS,
        'max_moves': inputs.MAX_MOVES,
        'max_pgn_plies': inputs.MAX_PGN_PLIES,
        'max_body_bytes': inputs.MAX_BODY_BYTES,
        'play': None if service.agent is None else service.agent.name,
        'stockfish': None if service.stockfish is None else service.stockfish.id.get('name', 'stockfish'),
      }
    )

  checking = asyncio.Lock()
  parser = parser_lib.Parser()

  async def analyse(body: bytes) -> dict[str, Any]:
    async with checking:  # One request's checks at a time, and after a batch's (64 positions: 10-20 ms) the loop
      batch = True  # reads its sockets before the next's: a client that left meanwhile is cancelled (`unless_gone`)
      try:  # before its checks and its model call. Lone positions read together are queued together (one call).
        if service.requests > 1 and b'"positions"' in body:  # A batch's checks, with others in flight: a client
          await gone_cancelled()  # gone costs none (100 gone: 0.8 s of CPU). Lone positions go on together.
        boards, batch = inputs.analyse_request(body)
      finally:
        if batch:  # Or checks that failed.
          await asyncio.sleep(0)
    answers = await service.analyse(boards)
    head = {'model': service.name, 'policy': service.policy.kind}
    if not batch:
      if isinstance(answers[0], Exception):
        raise answers[0]
      return {**head, **answers[0]}
    return {**head, 'positions': [_position(answer) for answer in answers]}

  async def play(body: bytes) -> dict[str, Any]:
    return await service.play(inputs.play_request(body))

  async def stockfish(body: bytes) -> dict[str, Any]:
    return await service.engine(inputs.position_request(body))

  async def pgn(body: bytes) -> dict[str, Any]:
    return await parser.answer(body)  # Bounded (`inputs.MAX_PGN_PLIES`), and in a process of its own.

  async def review(body: bytes) -> dict[str, Any]:
    boards, moves = review_lib.replay(inputs.position_request(body))
    if service.policy.kind == 'behavioral_cloning':
      raise inputs.BadRequest("a review needs win probabilities: this server's policy (behavioral_cloning) has none")
    answers = []
    for start in range(0, len(boards), inputs.MAX_POSITIONS):  # As the page's requests: within the queue's size.
      answers += await service.analyse(boards[start : start + inputs.MAX_POSITIONS])
    valued = []
    for answer in answers:
      if isinstance(answer, Exception):
        raise answer  # A position the model could not value: the review has no answer without it.
      valued.append(answer)
    views = [review_lib.view_of_answer(answer, move) for answer, move in zip(valued, [*moves, None])]
    head = {'model': service.name, 'policy': service.policy.kind, 'fen': boards[0].fen()}
    return {**head, **review_lib.review(boards[0].fen(), moves, views)}

  async def failed(request: Request, exception: Exception) -> Response:
    if isinstance(exception, HTTPException):
      message = f'{request.method} {request.url.path[:200]}: {exception.detail}'
      return error(message, exception.status_code, **(exception.headers or {}))
    _LOG.error('%s failed', request.url.path, exc_info=exception)
    return error('internal error (the server logged it)', 500)

  @contextlib.asynccontextmanager
  async def lifespan(app: Starlette):
    service.start()
    parser.start()
    loop = asyncio.get_running_loop()

    async def warm() -> None:
      try:
        seconds = await loop.run_in_executor(service._model_thread, service.warm_up)  # pylint: disable=protected-access
      except Exception as exception:  # pylint: disable=broad-except  # Reported by `on_failure` (the server stops).
        _LOG.exception('compiling the batch shapes failed')
        if on_failure is not None:
          on_failure(exception)
        return
      # What the process holds for good (the model, JAX, the compiled shapes: half a million objects) leaves the
      # garbage collector's generations: a full collection, which a request's garbage (a PGN's tree of
      # variations, a batch's boards) sets off, no longer walks it with every thread stopped (150-770 ms each).
      gc.collect()
      gc.freeze()
      service.metrics.frozen.set(gc.get_freeze_count())
      if on_ready is not None:
        on_ready(seconds)

    warming = loop.create_task(warm())
    try:
      yield
    finally:
      warming.cancel()
      await service.stop()
      await asyncio.to_thread(parser.stop)

  endpoints = {'/v1/analyse': (analyse, None), '/v1/play': (play, 'agent')}
  endpoints |= {'/v1/stockfish': (stockfish, 'stockfish'), '/v1/pgn': (pgn, None), '/v1/review': (review, None)}
  routes: list[Route | Mount] = [
    Route('/', home),
    Route('/health/live', live),
    Route('/health/ready', ready),
    Route('/metrics', metrics_text),
    Route('/v1/info', info),
  ]
  for path, (handler, needs) in endpoints.items():
    endpoint = api_endpoint(service, handler, needs, body_timeout)
    routes += [Route(path, endpoint, methods=['POST']), Route(path + '/', endpoint, methods=['POST'])]
  routes.append(Mount('/page', StaticFiles(directory=str(page)), name='page'))
  handlers = {HTTPException: failed, Exception: failed}
  app = Starlette(routes=routes, lifespan=lifespan, exception_handlers=handlers)
  names = {route.path.rstrip('/') or '/' for route in routes if isinstance(route, Route)}
  return Gate(app, metrics, names, access or guard.Access.bind('127.0.0.1'))


def _position(answer: dict[str, Any] | Exception) -> dict[str, Any]:
  """A batch's entry: the position's answer, or its fault (the others are answered)."""
  if isinstance(answer, service_lib.ModelFault):
    return {'error': 'the model gave non-finite values for this position (the server logged it)'}
  assert not isinstance(answer, Exception), answer
  return answer
