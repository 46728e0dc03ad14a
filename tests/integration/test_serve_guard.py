"""`searchless-serve` against impolite clients, on a real server process on 127.0.0.1: clients that leave, linger,
come from another site or send anything at all (a fuzz of 10,000 requests), and the bounds that hold them.

One server serves the module's tests (short timeouts, a token, a name and an origin allowed besides its own); the
test of SIGTERM starts its own.
"""

import http.client
import json
import os
import random
import signal
import socket
import subprocess
import threading
import time

import chess
import pytest

from searchless.engines import launch
from searchless.play.serve import inputs

from serve_process import Served, concurrently, reset_on_close, serve_argv, wait_for

pytestmark = pytest.mark.slow

TOKEN = 'a-token-of-the-tests-0123'
AUTH = {'Authorization': f'Bearer {TOKEN}'}
JSON = {'Content-Type': 'application/json'}
KIWIPETE = 'r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1'
CHESS960 = 'rk2r3/pppppppp/8/8/8/8/PPPPPPPP/RK2R3 w KQkq - 0 1'  # Its rooks on a and e: only Chess960 castles.
MAX_CONNECTIONS = 24


@pytest.fixture(scope='module')
def served(model_checkpoint):
  argv = ['--max_batch', '8', '--max_queue', '64', '--agent', f'search:{model_checkpoint},sims=16', '--token', TOKEN]
  argv += ['--allow_host', 'chess.example', '--allow_origin', 'https://friend.example']
  argv += ['--header_timeout', '1', '--body_timeout', '1', '--keepalive_timeout', '1']
  argv += ['--max_connections', str(MAX_CONNECTIONS)]
  with Served(model_checkpoint, *argv, headers=AUTH) as server:
    server.wait_ready()
    yield server


def _exchange(served, data: bytes, timeout: float = 30) -> tuple[int | None, dict, bytes, float]:
  """(status, headers, body, seconds until the server closed) of raw bytes sent on a new connection; status None
  when the server closed without an answer."""
  with socket.create_connection((served.host, served.port), timeout=timeout) as sock:
    start = time.monotonic()
    sock.sendall(data)
    received = b''
    while chunk := sock.recv(65536):
      received += chunk
    closed = time.monotonic() - start
  if not received:
    return None, {}, b'', closed
  head, _, body = received.partition(b'\r\n\r\n')
  lines = head.decode('latin-1').split('\r\n')
  headers = {name.lower(): value for name, value in (line.split(': ', 1) for line in lines[1:])}
  return int(lines[0].split()[1]), headers, body, closed


def _http(method: str, path: str, body: bytes = b'', headers: dict | None = None) -> bytes:
  lines = [f'{method} {path} HTTP/1.1', 'Host: 127.0.0.1', 'Connection: close']
  lines += [f'{k}: {v}' for k, v in (headers or {}).items()]
  return ('\r\n'.join(lines) + f'\r\nContent-Length: {len(body)}\r\n\r\n').encode() + body


def test_every_answer_has_the_security_headers_and_the_api_is_not_cached(served):
  for path in ('/', '/page/page.js', '/v1/info', '/health/live', '/nowhere'):
    status, headers, _ = served.request('GET', path)
    assert headers['x-content-type-options'] == 'nosniff' and headers['x-frame-options'] == 'DENY', path
    assert (
      "frame-ancestors 'none'" in headers['content-security-policy']
      and "script-src 'self'" in (headers['content-security-policy'])
    )
    assert headers['cache-control'] == ('no-cache' if path == '/' or path.startswith('/page/') else 'no-store')


def test_only_this_server_s_names_and_pages_and_json_with_the_token(served):
  body = json.dumps({'moves': ['e2e4']}).encode()
  ask = lambda **headers: served.request('POST', '/v1/analyse', body, {**JSON, **headers})  # noqa: E731
  assert ask()[0] == 200
  assert ask(Host='localhost:1')[0] == 200 and ask(Host='chess.example')[0] == 200
  status, _, answer = ask(Host=f'rebind.example:{served.port}')  # A DNS-rebinding page's name for 127.0.0.1.
  assert (status, json.loads(answer)) == (
    421,
    {'error': "host: 'rebind.example' is not this server's name (127.0.0.1, chess.example, localhost; more with "
     '--allow_host)'},
  )  # fmt: skip
  assert ask(Origin=f'http://127.0.0.1:{served.port}')[0] == 200 and ask(Origin='https://friend.example')[0] == 200
  for origin in ('https://evil.example', 'null', f'http://localhost:{served.port}'):
    status, _, answer = ask(Origin=origin)
    assert (status, json.loads(answer)['error']) == (
      403,
      f"origin: {origin!r} is not this server's page (more with --allow_origin)",
    )
  for kind in ('text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x'):
    status, _, answer = ask(**{'Content-Type': kind})
    assert (status, json.loads(answer)) == (415, {'error': f'content-type: expected application/json, got {kind!r}'})
  assert ask(**{'Content-Type': 'Application/JSON; charset=utf-8'})[0] == 200
  for authorization in (None, 'Bearer wrong', f'Basic {TOKEN}', f'bearer {TOKEN}x'):
    sent = {**JSON, 'Authorization': authorization} if authorization else JSON
    status, headers, answer, _ = _exchange(served, _http('POST', '/v1/analyse', body, sent))
    assert (status, headers['www-authenticate'], json.loads(answer)) == (
      401,
      'Bearer',
      {'error': 'authorization: this server needs "Authorization: Bearer <its --token>"'},
    )
  status, _, _, _ = _exchange(served, _http('GET', '/metrics'))
  assert status == 401 and _exchange(served, _http('GET', '/health/live'))[0] == 200  # Health needs no token.
  assert _exchange(served, _http('GET', '/'))[0] == 200  # Nor the page: it sends the token it is given.


def test_a_path_with_a_nul_and_requests_uvicorn_cannot_read_are_json_errors(served):
  status, headers, answer = served.request('GET', '/page/page.js%00.css')
  assert (status, json.loads(answer)) == (404, {'error': 'GET /page/page.js%00.css: Not Found'})
  for garbage in (b'\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03' + bytes(40), b'G\x00T / HTTP/1.1\r\n\r\n'):
    status, headers, answer, _ = _exchange(served, garbage)
    assert status == 400 and headers['content-type'] == 'application/json', garbage
    assert json.loads(answer)['error'].endswith('(not HTTP/1.1 the server can read)')
  bad_length = b'POST /v1/analyse HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: abc\r\n\r\n{}'
  assert _exchange(served, bad_length)[0] == 400
  status, headers, answer, _ = _exchange(served, _http('GET', '/health/live', b'', {'X-Big': 'a' * 100_000}))
  assert (status, json.loads(answer)) == (
    431,
    {'error': 'the request head is over 32768 bytes (its headers too large)'},
  )
  status, _, answer = served.request('GET', '/page/' + 'a' * 5000)  # A name too long for the file system.
  assert (status, json.loads(answer)) == (404, {'error': f'GET {("/page/" + "a" * 5000)[:200]}: Not Found'})


def test_a_slow_head_a_slow_body_and_an_idle_connection_are_closed_at_their_timeouts(served):
  """--header_timeout, --body_timeout and --keepalive_timeout are 1 s here."""
  with socket.create_connection((served.host, served.port), timeout=30) as sock:  # A head that never ends.
    start = time.monotonic()
    sock.sendall(b'POST /v1/analyse HTTP/1.1\r\nHost: 127.0.0.1\r\n')
    answer = sock.recv(65536)
    assert sock.recv(65536) == b'' and time.monotonic() - start < 1 + 1
  assert answer.startswith(b'HTTP/1.1 408 Request Timeout\r\n') and answer.endswith(
    b'{"error":"the request head was not received within 1 s (--header_timeout)"}'
  )
  head = _http('POST', '/v1/analyse', b'', {**JSON, **AUTH}).replace(b'Content-Length: 0', b'Content-Length: 1000')
  status, headers, answer, closed = _exchange(served, head + b'{"fen": "8')  # A body that never ends.
  assert (status, headers['connection'], json.loads(answer)) == (
    408,
    'close',
    {'error': 'body: 10 bytes in 1 s, not all of it (--body_timeout)'},
  )
  assert closed < 1 + 1
  refused = f'POST /v1/analyse HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n'
  refused += 'Content-Type: text/plain\r\nContent-Length: 1000\r\n\r\n{"fen": "8'  # Refused before its body ends.
  status, headers, answer, closed = _exchange(served, refused.encode())
  assert (status, headers['connection']) == (415, 'close') and closed < 1
  with socket.create_connection((served.host, served.port), timeout=30) as sock:  # Idle after its answer.
    sock.sendall(b'GET /health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n')
    start = time.monotonic()
    received = b''
    while chunk := sock.recv(65536):
      received += chunk
    assert received.startswith(b'HTTP/1.1 200 OK') and time.monotonic() - start < 1 + 1
  assert served.get('/health/live')[0] == 200


def test_connections_past_the_limit_are_refused_in_json_and_the_others_are_served(served):
  held = [socket.create_connection((served.host, served.port), timeout=30) for _ in range(MAX_CONNECTIONS)]
  try:
    for sock in held:  # Each one open (a request half sent keeps it so past the others' head timeouts).
      sock.sendall(b'GET /health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n')
      assert sock.recv(65536).startswith(b'HTTP/1.1 200 OK')
    status, headers, answer, _ = _exchange(served, _http('GET', '/health/live'))
    assert (status, headers['retry-after'], json.loads(answer)) == (
      503,
      '1',
      {'error': f'{MAX_CONNECTIONS} connections are open, the most this server takes (--max_connections)'},
    )
  finally:
    for sock in held:
      sock.close()
  assert wait_for(lambda: served.get('/health/live')[0] == 200)


def test_clients_that_leave_cost_nobody_anything(served):
  """Clients that send 64 positions each and hang up: their positions leave the queue, they are counted 499 (or
  200 when the answer was out first), and a client that stays is answered, with nothing queued after."""
  body = json.dumps({'positions': [{'fen': KIWIPETE}] * 64}).encode()
  before = {s: served.metric('searchless_serve_requests_total', endpoint='/v1/analyse', status=s) for s in (
    '200', '499', '503')}  # fmt: skip
  leaving = 12

  def leave() -> None:
    with socket.create_connection((served.host, served.port), timeout=30) as sock:
      sock.sendall(_http('POST', '/v1/analyse', body, {**JSON, **AUTH}))
      time.sleep(0.01)
      reset_on_close(sock)

  concurrently([leave] * leaving)
  gone = lambda s: served.metric('searchless_serve_requests_total', endpoint='/v1/analyse', status=s) - before[s]  # noqa: E731
  assert wait_for(lambda: gone('499') + gone('200') + gone('503') == leaving, 60)
  assert wait_for(lambda: served.metric('searchless_serve_queue_length') == 0, 10)
  status, _, answer = served.post('/v1/analyse', {'positions': [{}] * 64})
  assert status == 200 and len(answer['positions']) == 64


@pytest.mark.parametrize('leaving', ['closed after a request answered', 'reset on a new connection'])
def test_clients_gone_before_their_checks_cost_no_checks_and_no_model_call(served, leaving):
  """Clients that send 8 positions each while the server is stopped (SIGSTOP) and leave before it goes on (a close
  on a connection already served once, or a reset on a new one, as `benchmarks/serve_abuse.py`'s leavers): the
  server reads their requests and their leaving. With other requests in flight, a request's checks wait for the
  loop to read its sockets and cancel the clients gone, and the checks of one request at a time wait their turn,
  so at most the first is checked (a 400: its last move is illegal), the others are counted 499 unchecked, and no
  position reaches the model."""
  clients = 8
  body = json.dumps({'positions': [{'fen': KIWIPETE}] * 7 + [{'moves': ['e2e5']}]}).encode()
  socks = [socket.create_connection((served.host, served.port), timeout=30) for _ in range(clients)]
  for sock in socks:
    if leaving == 'reset on a new connection':
      reset_on_close(sock)
    else:  # Each connection accepted and served once before the stop.
      sock.sendall(_http('GET', '/health/live').replace(b'Connection: close', b'Connection: keep-alive'))
      assert sock.recv(65536).startswith(b'HTTP/1.1 200')
  count = lambda name, **labels: served.metric(name, **labels)  # noqa: E731
  before = {s: count('searchless_serve_requests_total', endpoint='/v1/analyse', status=s) for s in ('400', '499')}
  positions_before = count('searchless_serve_batch_size_sum')
  os.kill(served.process.pid, signal.SIGSTOP)
  try:
    for sock in socks:
      sock.sendall(_http('POST', '/v1/analyse', body, {**JSON, **AUTH}))
      sock.close()
  finally:
    os.kill(served.process.pid, signal.SIGCONT)
  answered = lambda s: count('searchless_serve_requests_total', endpoint='/v1/analyse', status=s) - before[s]  # noqa: E731
  assert wait_for(lambda: answered('400') + answered('499') == clients, 30)
  assert answered('400') <= 1  # Checked as soon as read, all 8 were answered 400.
  assert count('searchless_serve_queue_length') == 0
  assert count('searchless_serve_batch_size_sum') == positions_before


def test_a_search_whose_client_left_stops(served):
  """A search of 60 s whose client hangs up stops at its next batch: the next search runs at once."""
  with socket.create_connection((served.host, served.port), timeout=30) as sock:
    sock.sendall(_http('POST', '/v1/play', b'{"movetime_ms": 60000}', {**JSON, **AUTH}))
    assert wait_for(lambda: served.metric('searchless_serve_requests_in_flight') >= 2)  # It and the scrape.
  start = time.monotonic()
  status, _, answer = served.post('/v1/play', {'movetime_ms': 50})
  assert status == 200 and answer['move'] is not None and time.monotonic() - start < 30  # Not 60 s.
  assert wait_for(lambda: served.metric('searchless_serve_requests_total', endpoint='/v1/play', status='499') >= 1)


def test_more_positions_than_the_queue_holds_is_413_and_the_queue_stays_free(served):
  status, _, answer = served.post('/v1/analyse', {'positions': [{}] * 65})
  assert (status, answer) == (
    413,
    {'error': 'positions: 65 positions, more than the 64 the queue holds (--max_queue)'},
  )


def test_pgn_text_that_is_not_one_game_and_chess960(served):
  cases = [
    ('hello world', "pgn: no game found in the text (no tag pair, move or result): 'hello world'"),
    ('1. e4 e5 *\n\n1. d4 d5 *', 'pgn: more than one game in the text; paste one game'),
    (
      '1. e4 ' + '(1. d4 d5 2. c4) ' * 60_000 + '*',
      f'pgn: more than {inputs.MAX_PGN_PLIES} moves, variations included',
    ),
  ]
  for text, error in cases:
    assert served.post('/v1/pgn', {'pgn': text})[::2] == (400, {'error': error}), error
  assert [line for line in served.stderr if 'chess.pgn' in line or 'while parsing' in line] == []  # No log noise.
  status, _, game = served.post('/v1/pgn', {'pgn': f'[Variant "Chess960"]\n[FEN "{CHESS960}"]\n\n1. O-O *'})
  assert (status, game['fen'], game['chess960'], game['moves']) == (
    200,
    CHESS960,
    True,
    [{'uci': 'b1e1', 'san': 'O-O'}],
  )
  after = 'rk2r3/pppppppp/8/8/8/8/PPPPPPPP/R4RK1 b kq - 1 1'
  for fen in (CHESS960, CHESS960.replace('KQkq', 'EAea')):  # X-FEN and Shredder-FEN: Chess960 by its castling.
    status, _, answer = served.post('/v1/analyse', {'fen': fen, 'moves': ['b1e1']})
    assert (status, answer['fen']) == (200, after)
  status, _, answer = served.post('/v1/analyse', {'fen': CHESS960, 'chess960': False})
  assert (status, answer['error']) == (400, f"fen: illegal position '{CHESS960}' (bad castling rights)")
  status, _, answer = served.post('/v1/analyse', {'fen': chess.STARTING_FEN, 'moves': ['e1h1'], 'chess960': True})
  assert status == 400 and answer['error'].startswith("moves[0]: 'e1h1' is not a legal move")  # Pieces between.


def _parsers(served) -> list[int]:
  """The pids of the server's PGN parser processes (its children running `searchless.play.serve.parser`)."""
  children = []
  for task in os.listdir(f'/proc/{served.process.pid}/task'):
    with open(f'/proc/{served.process.pid}/task/{task}/children') as listed:
      children += [int(pid) for pid in listed.read().split()]
  found = []
  for pid in children:
    with open(f'/proc/{pid}/cmdline', 'rb') as cmdline:
      if b'searchless.play.serve.parser' in cmdline.read():
        found.append(pid)
  return found


def test_a_pgn_is_parsed_in_a_process_of_its_own_started_again_when_it_ends(served):
  game = {'pgn': '1. e4 e5 (1... c5 2. Nf3) 2. Nf3 *'}
  moves = [{'uci': 'e2e4', 'san': 'e4'}, {'uci': 'e7e5', 'san': 'e5'}, {'uci': 'g1f3', 'san': 'Nf3'}]
  status, _, answer = served.post('/v1/pgn', game)
  assert (status, answer['moves']) == (200, moves)
  [first] = _parsers(served)  # One process parses every PGN, not the server's interpreter.
  os.kill(first, signal.SIGKILL)
  status, _, answer = served.post('/v1/pgn', game)  # Asked of a new process.
  assert (status, answer['moves']) == (200, moves)
  [second] = _parsers(served)
  assert second != first
  assert served.post('/v1/pgn', {'pgn': 'hello world'})[0] == 400  # Its refusals are the server's 400s.
  assert served.get('/health/live')[0] == 200


FUZZ_REQUESTS = 10_000
FIELDS = ['fen', 'moves', 'positions', 'chess960', 'movetime_ms', 'pgn', 'depth', '', 'fén', '\x00']
VALUES = [
  None,
  True,
  False,
  0,
  -1,
  1,
  5,
  2**63,
  -(2**63),
  1.5,
  1e308,
  -0.0,
  '',
  'x',
  '\x00',
  'é' * 3,
  '\ud7ff',
  [],
  {},
  [[[[]]]],
  chess.STARTING_FEN,
  KIWIPETE,
  CHESS960,
  '8/8/8/8 w - - 0 1',
  'k7/8/8/8/8/8/8/K6K w - - 0 1',
  ['e2e4'],
  ['e2e4', 'e7e5'],
  ['e2e4', 'e2e4'],
  ['zz'],
  ['e1g1'],
  [None],
  [1, 2],
  'e2e4',
  ' ' * 300,
  '1. e4 e5 *',
  '1. e4 (1. d4) *',
  '[FEN "8/8/8/8/8/8/8/8 w - - 0 1"]\n\n*',
  'hello',
  '1. e4 e5 *\n\n1. d4 *',
  '[Variant "Chess960"]\n[FEN "' + CHESS960 + '"]\n\n1. O-O *',
  '{' * 50,
  '1. e4 $1 $999 ! ?? (',
  'e4 e5 Nf3',
]
PATHS = ['/v1/analyse'] * 4 + ['/v1/analyse/', '/v1/play', '/v1/pgn', '/v1/stockfish', '/v1/info', '/nowhere']


def _fuzz_body(rng: random.Random) -> bytes:
  """A body: a JSON object of fields drawn from the API's and others, values of every type, or bytes that are not."""
  kind = rng.random()
  if kind < 0.1:
    return bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
  if kind < 0.15:
    depth = rng.choice([10, 300, 2000, 20000])
    return b'{"positions": ' + b'[' * depth + b']' * depth + b'}'
  if kind < 0.2:
    return rng.choice([b'1' + b'0' * rng.randrange(400), b'{"fen": NaN}', b'{"a": 1, "a": 2}', b'"\\ud800"', b''])
  value: dict = {}
  for _ in range(rng.randrange(4)):
    field = rng.choice(FIELDS)
    if field == 'positions':
      value[field] = [
        {'fen': rng.choice(VALUES), 'moves': rng.choice(VALUES)} for _ in range(rng.choice([0, 1, 3, 65, 300]))
      ]
    elif field == 'movetime_ms':
      value[field] = rng.choice([None, 0, 1, 5, -5, 60_001, 1.5, True, 'x', 2**70])  # Valid ones search 5 ms at most.
    else:
      value[field] = rng.choice(VALUES)
  text = json.dumps(value, ensure_ascii=rng.random() < 0.5).encode('utf-8', 'surrogatepass')
  return text[: rng.randrange(len(text) + 1)] if rng.random() < 0.1 else text


def _fuzz_request(rng: random.Random, port: int) -> bytes:
  method = rng.choice(['POST'] * 30 + ['GET', 'PUT', 'DELETE', 'OPTIONS'])
  body = _fuzz_body(rng) if method != 'GET' or rng.random() < 0.1 else b''
  headers = {'Host': rng.choice([f'127.0.0.1:{port}'] * 40 + ['localhost', 'evil.example', '', '[::1]', 'x' * 300])}
  if rng.random() < 0.97:
    headers['Content-Type'] = rng.choice(['application/json'] * 30 + ['text/plain', 'application/json; charset=x', ''])
  if rng.random() < 0.97:
    headers['Authorization'] = rng.choice([f'Bearer {TOKEN}'] * 40 + ['Bearer', f'Bearer {TOKEN[:-1]}', 'é'])
  if rng.random() < 0.1:
    headers['Origin'] = rng.choice(
      [f'http://127.0.0.1:{port}', 'https://evil.example', 'null', 'https://friend.example']
    )
  lines = [f'{method} {rng.choice(PATHS)} HTTP/1.1'] + [f'{k}: {v}' for k, v in headers.items()]
  return ('\r\n'.join(lines) + f'\r\nContent-Length: {len(body)}\r\n\r\n').encode('utf-8') + body


class _Connection:
  """A keep-alive connection that sends raw requests and reads each answer (opened again when the server closes).
  A request on a kept connection that the server closed as idle (--keepalive_timeout, a race that a pause of the
  test's process can lose) is sent again on a new one, as HTTP clients do; on a new one, no answer is an error."""

  def __init__(self, served):
    self.address = (served.host, served.port)
    self.sock: socket.socket | None = None
    self.buffer = b''

  def ask(self, data: bytes) -> tuple[int, bytes]:
    if self.sock is not None:
      try:
        self.sock.sendall(data)
        if self._head():
          return self._answer()
      except ConnectionError:
        pass
      self.close()  # Closed while idle, before the request came.
    self.sock = socket.create_connection(self.address, timeout=30)
    self.buffer = b''
    self.sock.sendall(data)
    assert self._head(), f'closed without an answer to {data[:300]!r}'
    return self._answer()

  def _head(self) -> bool:
    """Reads until the answer's head is in; False if the server closed before it."""
    assert self.sock is not None
    while b'\r\n\r\n' not in self.buffer:
      chunk = self.sock.recv(65536)
      if not chunk:
        return False
      self.buffer += chunk
    return True

  def _answer(self) -> tuple[int, bytes]:
    assert self.sock is not None
    head, _, self.buffer = self.buffer.partition(b'\r\n\r\n')
    lines = head.decode('latin-1').lower().split('\r\n')
    headers = dict(line.split(': ', 1) for line in lines[1:])
    length = int(headers.get('content-length', 0))
    while len(self.buffer) < length:
      chunk = self.sock.recv(65536)
      assert chunk, 'closed within an answer'
      self.buffer += chunk
    body, self.buffer = self.buffer[:length], self.buffer[length:]
    if headers.get('connection') == 'close':
      self.close()
    return int(lines[0].split()[1]), body

  def close(self) -> None:
    if self.sock is not None:
      self.sock.close()
      self.sock = None


def test_a_fuzz_of_10000_requests_is_answered_2xx_or_4xx_and_the_server_stays_up(served):
  rng = random.Random(78)
  connection = _Connection(served)
  statuses: dict[int, int] = {}
  try:
    for _ in range(FUZZ_REQUESTS):
      request = _fuzz_request(rng, served.port)
      status, body = connection.ask(request)
      statuses[status] = statuses.get(status, 0) + 1
      assert 200 <= status < 500, (status, body, request[:500])
      if status >= 400:
        assert set(json.loads(body)) == {'error'}, (status, body)
  finally:
    connection.close()
  assert sum(statuses.values()) == FUZZ_REQUESTS and statuses[200] > 500 and statuses[400] > 2000, statuses
  assert served.get('/health/live')[0] == 200
  text = served.request('GET', '/metrics')[2].decode()
  assert [line for line in text.splitlines() if 'status="500"' in line] == []


def test_sigterm_stops_searches_in_flight_with_their_moves_and_ready_says_stopping_at_once(model_checkpoint):
  """Three searches of 60 s answer their moves so far; a Stockfish analysis of 10 s (where Stockfish is found),
  which cannot be stopped, is cut off after the 4 s of grace, answered 503, and the last line says so."""
  stockfish = launch.find_stockfish() is not None
  extra = ['--stockfish', '--stockfish_limit', 'time=10'] if stockfish else []
  with Served(model_checkpoint, '--agent', f'search:{model_checkpoint},sims=16', *extra) as server:
    server.wait_ready()
    results: list = []
    search = lambda: results.append((*server.post('/v1/play', {'movetime_ms': 60_000}), time.monotonic()))  # noqa: E731
    threads = [threading.Thread(target=search) for _ in range(3)]
    cut: list = []
    if stockfish:
      threads.append(threading.Thread(target=lambda: cut.append((*server.post('/v1/stockfish', {}), time.monotonic()))))
    for thread in threads:
      thread.start()
    in_flight = len(threads) + 1  # And the scrape.
    assert wait_for(lambda: server.metric('searchless_serve_requests_in_flight') >= in_flight)
    ready = http.client.HTTPConnection(server.host, server.port, timeout=30)
    ready.request('GET', '/health/live')
    assert ready.getresponse().read()
    # Stopped, the server gets SIGTERM and then a readiness probe: it reads the probe after the signal.
    os.kill(server.process.pid, signal.SIGSTOP)
    try:
      os.kill(server.process.pid, signal.SIGTERM)
      ready.request('GET', '/health/ready')
    finally:
      os.kill(server.process.pid, signal.SIGCONT)
    terminated = time.monotonic()
    response = ready.getresponse()
    assert (response.status, json.loads(response.read())) == (503, {'status': 'stopping'})
    for thread in threads:
      thread.join(30)
    assert server.process.wait(30) == 0
    assert [status for status, _, _, _ in results] == [200] * 3
    assert all(chess.Move.from_uci(answer['move']) in chess.Board().legal_moves for _, _, answer, _ in results)
    assert max(done for *_, done in results + cut) - terminated < 5  # Every answer within the 5 s promised.
    if stockfish:
      assert [(status, answer) for status, _, answer, _ in cut] == [
        (503, {'error': 'the server stopped before this request was answered'})
      ]
      assert server.lines[-1] == 'stopped (SIGTERM): 1 request(s) in flight were cut off after 4 s (answered 503)'
    else:
      assert server.lines[-1] == 'stopped (SIGTERM): the requests in flight were answered'


def test_beyond_loopback_a_token_or_no_token_is_required_and_other_flags_are_one_line(model_checkpoint, tmp_path):
  done = subprocess.run(serve_argv(tmp_path / 'none', '--host', '0.0.0.0'), capture_output=True, text=True, timeout=120)
  assert (done.returncode, done.stderr) == (
    2,
    'error: --host 0.0.0.0: serving beyond this machine needs --token T (clients send "Authorization: Bearer T"; '
    'the page takes it as ?token=T), or --no_token to serve anyone who can reach it\n',
  )
  argv = serve_argv(tmp_path / 'none', '--host', '0.0.0.0', '--no_token')
  done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
  warning, error = done.stderr.splitlines()
  assert (
    done.returncode == 2
    and error.startswith('error: ')
    and warning
    == (
      'warning: --host 0.0.0.0 serves beyond this machine, in plain HTTP: anyone who can reach it can use it'
      ' (--no_token)'
    )
  )
  argv = serve_argv(tmp_path / 'none')
  argv[argv.index('--port') + 1] = '70000'
  done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
  assert (done.returncode, done.stderr) == (2, 'error: --port 70000: expected a port from 0 to 65535\n')
  argv = serve_argv(model_checkpoint, '--stockfish', '--engine_path', '/bin/false')
  done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
  assert (done.returncode, done.stderr) == (
    2,
    'error: cannot start UCI engine \'/bin/false\': it exited at once, before the "uci" handshake\n',
  )
  done = subprocess.run(
    serve_argv(model_checkpoint, '--agent', 'search:nope'), capture_output=True, text=True, timeout=120
  )
  assert (done.returncode, done.stderr) == (2, 'error: --agent search:nope: checkpoint path nope does not exist\n')


def test_each_search_starts_from_an_empty_tree(served):
  first, second = (served.post('/v1/play', {'fen': KIWIPETE})[2] for _ in range(2))
  assert first['visits'] == 16  # The agent's sims: no visits kept from an earlier request on this position.
  assert {**first, 'seconds': 0} == {**second, 'seconds': 0}  # The same request, the same answer.
