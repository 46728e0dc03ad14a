"""`searchless-serve` under abuse: a polite client's answers while, in turn, impolite clients do their worst.

    .venv/bin/python benchmarks/serve_abuse.py                               # pretrained, the sizes below
    .venv/bin/python benchmarks/serve_abuse.py --slow 200 --leavers 100 --fuzz 3000 --timeout 2

A real `searchless-serve` process on 127.0.0.1 (the model, and a search agent of it for /v1/play) with
``--header_timeout`` and ``--body_timeout`` of `--timeout` seconds. The polite client has a keep-alive connection
that POSTs one position to /v1/analyse, waits for its answer, and sends the next, from the first phase to the last;
it runs in a process of its own (with the probe below), so it never waits for the abusive clients' threads. The
phases, one after the other, each `--phase` seconds at least:

* idle: the polite client alone (its p50 is the reference of the others);
* shared: not an abuse but its reference: a second polite client that sends the start position (``{}``) one
  request at a time, as the fuzz's valid requests do (about one in eight of them): what sharing the model with
  another client costs the polite one;
* slow-header: `--slow` connections that send a request head a byte every 0.5 s and never end it;
* slow-body: `--slow` connections that send a head of Content-Length 1000 and a byte of body every 0.5 s;
* leave-analyse: `--leavers` clients that POST 64 positions to /v1/analyse and hang up (a reset) at once;
* leave-play: `--leavers` clients that POST a 60 s search to /v1/play and hang up after 20 ms;
* cross-site: `--fuzz` / 4 requests with another site's Origin, a rebinding Host or a text/plain body;
* fuzz: `--fuzz` requests of random bodies and headers (bytes, deep nesting, numbers, fields of every type);
* heavy-pgn: 20 bodies of 1 MiB of PGN variations, the heaviest request the server takes, one after another.

Another thread probes ``GET /health/live`` every 10 ms throughout ("live max ms": its slowest answer in the phase;
the target is 50 ms while the heaviest request is parsed). The phases run `--rounds` times (a leak grows in each).

Each phase prints: tried (abusive requests or connections), wrong (an abusive one answered 2xx where it should be
refused, a 5xx, a hang, or a connection the server held past its timeout + 1 s; a polite answer that is not 200,
such as a 503 that others' abandoned work caused), the polite client's p50 and p99 and p99 / idle p50, the server's
RSS growth over the phase, and the time from the phase's last disconnect to an empty queue and no request in flight
but the probe. Targets: 0 wrong; p99 within 3x the idle p50 in each abusive phase (``shared`` is printed beside
them: a polite client's p99 when another shares the model); RSS growth under 50 MB over the whole run (at least
10,000 requests); each connection closed within its timeout + 1 s; the queue empty within 1 s of the last
disconnect.
"""

import argparse
import http.client
import json
import multiprocessing
import os
import random
import socket
import statistics
import sys
import threading
import time
import types
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve  # noqa: E402  # The load benchmark's server, client and positions.
from serve import Client, percentile, sample_boards  # noqa: E402

LIVE = b'GET /health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'
RESET = b'\x01\x00\x00\x00\x00\x00\x00\x00'  # SO_LINGER on, 0 s: close() sends a reset.


class Server(serve.Server):
  """`searchless-serve` with a search agent, on a free port, its timeouts all `timeout`."""

  def __init__(self, checkpoint: str, timeout: float):
    flags = ['--agent', f'search:{checkpoint},sims=64', '--header_timeout', str(timeout)]
    super().__init__(checkpoint, *flags, '--body_timeout', str(timeout), '--keepalive_timeout', str(timeout))

  def metrics(self) -> dict[str, float]:
    connection = http.client.HTTPConnection(self.host, self.port, timeout=30)
    connection.request('GET', '/metrics')
    text = connection.getresponse().read().decode()
    connection.close()
    return {line.rsplit(' ', 1)[0]: float(line.rsplit(' ', 1)[1]) for line in text.splitlines() if line[:1] != '#'}

  def rss_mb(self) -> float:
    with open(f'/proc/{self.process.pid}/status') as status:
      return next(int(line.split()[1]) for line in status if line.startswith('VmRSS:')) / 1024

  def drained(self, since: float, limit: float = 30) -> tuple[float, float]:
    """Seconds from `since` until no position is queued, and until no request is in flight either (but the
    probe's and the polite client's: the model calls already running for the clients gone end first)."""
    empty = None
    while time.monotonic() - since < limit:
      values = self.metrics()
      if empty is None and values['searchless_serve_queue_length'] == 0:
        empty = time.monotonic() - since
      if empty is not None and values['searchless_serve_requests_in_flight'] <= 2:
        return empty, time.monotonic() - since
      time.sleep(0.01)
    return empty if empty is not None else float('inf'), float('inf')


class Polite(threading.Thread):
  """The polite client: one request at a time on a keep-alive connection (a position to /v1/analyse, or
  `requests`); each answer's (time, seconds, status)."""

  def __init__(self, server: Any, bodies: list[bytes], requests: list[bytes] | None = None, pause: float = 0):
    super().__init__(daemon=True)
    self.server, self.requests = server, requests or [Client.request('/v1/analyse', body) for body in bodies]
    self.pause = pause
    self.answers: list[tuple[float, float, int]] = []
    self.stop = threading.Event()

  def run(self) -> None:
    connection, i = Client(self.server.host, self.server.port), 0
    while not self.stop.is_set():
      begin = time.monotonic()
      try:
        status, _ = connection.post(self.requests[i % len(self.requests)])
      except (ConnectionError, OSError):
        status = 0
        connection = Client(self.server.host, self.server.port)
      self.answers.append((begin, time.monotonic() - begin, status))
      i += 1
      time.sleep(self.pause)
    connection.close()

  def since(self, start: float) -> list[tuple[float, float, int]]:
    return [a for a in self.answers if a[0] >= start]


class Measured:
  """The polite client and the /health/live probe (every 10 ms), each a thread of a process of their own: the
  abusive clients' threads share the benchmark's interpreter lock, and the clients measured do not wait for it."""

  def __init__(self, server: Server, bodies: list[bytes]):
    context = multiprocessing.get_context('fork')  # Before any thread of the benchmark.
    self._pipe, child = context.Pipe()
    self.process = context.Process(target=_measure, args=(server.host, server.port, bodies, child), daemon=True)

  def start(self) -> None:
    self.process.start()

  def since(self, start: float) -> tuple[list[tuple[float, float, int]], list[tuple[float, float, int]]]:
    """The polite client's answers, and the probe's, since `start` (`time.monotonic`, the same in every process)."""
    self._pipe.send(start)
    return self._pipe.recv()

  def stop(self) -> None:
    if self.process.is_alive():
      self._pipe.send(None)
      self.process.join(30)


def _measure(host: str, port: int, bodies: list[bytes], pipe: Any) -> None:
  """`Measured`'s process: its clients run until the pipe says None; each `since` it is asked, it answers."""
  server = types.SimpleNamespace(host=host, port=port)
  polite, live = Polite(server, bodies), Polite(server, [], [LIVE], pause=0.01)
  polite.start()
  live.start()
  while (start := pipe.recv()) is not None:
    pipe.send((polite.since(start), live.since(start)))
  for client in (polite, live):
    client.stop.set()
    client.join(30)


def _head(method: str, path: str, body: bytes, **headers: str) -> bytes:
  lines = [f'{method} {path} HTTP/1.1', 'Host: 127.0.0.1', 'Content-Type: application/json']
  lines += [f'{k}: {v}' for k, v in headers.items()]
  return ('\r\n'.join(lines) + f'\r\nContent-Length: {len(body)}\r\n\r\n').encode() + body


def _held(server: Server, first: bytes, trickle: bytes, count: int, limit: float) -> tuple[int, int, float]:
  """`count` connections that send `first`, then a byte of `trickle` every 0.5 s until the server closes them:
  (tried, held past `limit` seconds, the last close's seconds after its open)."""
  opened, closed, socks = [], [None] * count, []
  for _ in range(count):
    sock = socket.create_connection((server.host, server.port), timeout=60)
    sock.sendall(first)
    sock.setblocking(False)
    socks.append(sock)
    opened.append(time.monotonic())
  deadline, next_byte = time.monotonic() + limit + 5, time.monotonic() + 0.5
  while time.monotonic() < deadline and None in closed:
    time.sleep(0.05)
    send = time.monotonic() >= next_byte
    next_byte += 0.5 if send else 0
    for i, sock in enumerate(socks):
      if closed[i] is not None:
        continue
      try:
        while sock.recv(65536):  # The server's 408, then its close.
          pass
        closed[i] = time.monotonic() - opened[i]
      except BlockingIOError:
        if send:
          try:
            sock.send(trickle)
          except OSError:
            closed[i] = time.monotonic() - opened[i]
      except OSError:
        closed[i] = time.monotonic() - opened[i]
  for sock in socks:
    sock.close()
  times = [c if c is not None else float('inf') for c in closed]
  return count, sum(1 for c in times if c > limit), max(times)


def _shared(server: Server, seconds: float) -> tuple[int, int]:
  """A second polite client for `seconds` (the start position, one request at a time): (tried, wrong: not 200)."""
  other = Polite(server, [b'{}'])
  other.start()
  time.sleep(seconds)
  other.stop.set()
  other.join(30)
  return len(other.answers), sum(1 for _, _, status in other.answers if status != 200)


def _leave(server: Server, request: bytes, count: int, after: float) -> float:
  """`count` clients that send `request` and reset their connection `after` seconds later; the last reset's time."""
  socks = []
  for _ in range(count):
    sock = socket.create_connection((server.host, server.port), timeout=60)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RESET)
    sock.sendall(request)
    socks.append(sock)
  time.sleep(after)
  for sock in socks:
    sock.close()
  return time.monotonic()


def _asked(server: Server, requests: list[bytes], refused: bool) -> tuple[int, int]:
  """(tried, wrong) of `requests` on one connection (again after each close): wrong is a 5xx, no answer, or (when
  each should be `refused`) a 2xx."""
  wrong, connection = 0, None
  for request in requests:
    try:
      connection = connection or Client(server.host, server.port)
      status, _ = connection.post(request)
      if connection.closing:  # A refusal before the body was read closes the connection, as its answer says.
        connection.close()
        connection = None
    except (ConnectionError, OSError, RuntimeError):
      status, connection = 0, None
    if status == 0 or status >= 500 or (refused and status < 300):
      wrong += 1
  return len(requests), wrong


def _fuzz(rng: random.Random, count: int) -> list[bytes]:
  values = [None, True, 0, -1, 2**63, 1.5, 1e308, '', '\x00', [], {}, [[[]]], 'e2e4', ['e2e4'], ['zz'], [1], 'x' * 300]
  values += ['8/8/8/8 w - - 0 1', 'rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1', '1. e4 (1. d4) *', 'hi']
  fields = ['fen', 'moves', 'positions', 'chess960', 'movetime_ms', 'pgn', 'x']
  out = []
  for _ in range(count):
    path = rng.choice(['/v1/analyse', '/v1/analyse', '/v1/play', '/v1/pgn', '/v1/nowhere'])
    kind = rng.random()
    if kind < 0.1:
      body = bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
    elif kind < 0.15:
      body = b'[' * 3000 + b']' * 3000
    else:
      value = {f: rng.choice(values) for f in rng.sample(fields, rng.randrange(3))}
      if 'movetime_ms' in value or path == '/v1/play':  # A valid one searches 5 ms at most (a search of the
        value['movetime_ms'] = rng.choice([0, 1, 5, 'x', 60_001])  # agent's own budget is load: serve.py's).
      if 'positions' in value:
        value['positions'] = [{'fen': rng.choice(values)} for _ in range(rng.choice([0, 2, 300]))]
      body = json.dumps(value).encode()
    out.append(_head('POST', path, body))
  return out


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--checkpoint', default='pretrained')
  parser.add_argument('--slow', type=int, default=200, help='Slow-header and slow-body connections.')
  parser.add_argument('--leavers', type=int, default=100, help='Clients that hang up, on each endpoint.')
  parser.add_argument('--fuzz', type=int, default=3000, help='Fuzzed requests (cross-site: a quarter as many).')
  parser.add_argument('--timeout', type=float, default=2.0, help="The server's --header_timeout and --body_timeout.")
  parser.add_argument('--phase', type=float, default=3.0, help='Seconds of each phase, at least.')
  parser.add_argument('--rounds', type=int, default=2, help='The phases, this many times (RSS: a leak grows each).')
  args = parser.parse_args()
  print(f'load average before: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} CPUs')
  bodies = [json.dumps({'fen': board.fen()}).encode() for board in sample_boards(256)]
  server = Server(args.checkpoint, args.timeout)
  measured = Measured(server, bodies)
  rng = random.Random(7)
  limit = args.timeout + 1
  slow_body = _head('POST', '/v1/analyse', b'').replace(b'Length: 0', b'Length: 1000') + b'{'
  analyse, play = _head('POST', '/v1/analyse', _64(bodies)), _head('POST', '/v1/play', b'{"movetime_ms": 60000}')
  phases = [
    ('shared', lambda: (*_shared(server, args.phase), None)),
    ('slow-header', lambda: (*_held(server, b'POST /v1/analyse HTTP/1.1\r\n', b'X', args.slow, limit)[:2], None)),
    ('slow-body', lambda: (*_held(server, slow_body, b' ', args.slow, limit)[:2], None)),
    ('leave-analyse', lambda: (args.leavers, 0, _leave(server, analyse, args.leavers, 0))),
    ('leave-play', lambda: (args.leavers, 0, _leave(server, play, args.leavers, 0.02))),
    ('cross-site', lambda: (*_asked(server, _cross(args.fuzz // 4, rng), refused=True), None)),
    ('fuzz', lambda: (*_asked(server, _fuzz(rng, args.fuzz), refused=False), None)),
    ('heavy-pgn', lambda: (*_asked(server, [_pgn()] * 20, refused=True), None)),
  ]
  try:
    measured.start()
    start = time.monotonic()
    time.sleep(args.phase)
    idle = [seconds for _, seconds, _ in measured.since(start)[0]]
    idle_p50 = statistics.median(idle)
    rss_start = server.rss_mb()
    print(
      f'idle: polite p50 {1000 * idle_p50:.2f} ms, p99 {1000 * percentile(idle, 0.99):.2f} ms ({len(idle)} answers)'
    )
    head = f'{"phase":14} {"tried":>6} {"wrong":>6} {"p50 ms":>8} {"p99 ms":>8} {"p99/idle":>8} {"RSS MB":>7}'
    print(f'{head} {"queue 0 s":>9} {"done s":>7} {"live max ms":>11}')
    worst = {'wrong': 0, 'ratio': 0.0, 'drain': 0.0, 'live': 0.0, 'shared': 0.0}
    for name, phase in [(n, p) for _ in range(args.rounds) for n, p in phases]:
      rss, begin = server.rss_mb(), time.monotonic()
      tried, wrong, last = phase()
      empty, done = server.drained(last) if last is not None else (float('nan'), float('nan'))
      time.sleep(max(0.0, args.phase - (time.monotonic() - begin)))
      answers, probes = measured.since(begin)
      wrong += sum(1 for _, _, status in answers + probes if status != 200)
      seconds = [s for _, s, _ in answers] or [float('inf')]
      p50, p99 = percentile(seconds, 0.5), percentile(seconds, 0.99)
      live_max = max((s for _, s, _ in probes), default=float('inf'))
      print(
        f'{name:14} {tried:6d} {wrong:6d} {1000 * p50:8.2f} {1000 * p99:8.2f} {p99 / idle_p50:8.2f} '
        f'{server.rss_mb() - rss:+7.1f} {empty:9.3f} {done:7.3f} {1000 * live_max:11.1f}'
      )
      worst['wrong'] += wrong
      key = 'shared' if name == 'shared' else 'ratio'  # The reference, not an abuse.
      worst[key] = max(worst[key], p99 / idle_p50)
      worst['drain'] = max(worst['drain'], 0.0 if empty != empty else empty)
      worst['live'] = max(worst['live'], live_max)
    measured.stop()
    requests = int(sum(v for k, v in server.metrics().items() if k.startswith('searchless_serve_requests_total')))
    growth = server.rss_mb() - rss_start
    print(
      f'all: {worst["wrong"]} wrong (target 0), polite p99 at most {worst["ratio"]:.2f}x idle p50 (target 3),'
      f' RSS {growth:+.1f} MB over {requests} requests (target < 50 MB), queue empty at most {worst["drain"]:.3f} s'
      f' after the last disconnect (target 1 s); /health/live at most {1000 * worst["live"]:.1f} ms;'
      f' a second polite client (shared) {worst["shared"]:.2f}x'
    )
  finally:
    measured.stop()
    server.close()
  print(f'load average after: {os.getloadavg()[0]:.2f} (1 min)')


def _64(bodies: list[bytes]) -> bytes:
  return json.dumps({'positions': [json.loads(body) for body in bodies[:64]]}).encode()


def _pgn() -> bytes:
  """The heaviest /v1/pgn body: 1 MiB of variations (refused at `inputs.MAX_PGN_PLIES` moves)."""
  text = '1. e4 ' + '(1. d4 d5 2. c4 e6 3. Nc3) ' * 36_000 + '*'
  return _head('POST', '/v1/pgn', json.dumps({'pgn': text[: (1 << 20) - 100]}).encode())


def _cross(count: int, rng: random.Random) -> list[bytes]:
  """Requests a page of another site could send: its Origin, a rebinding Host, a text/plain body (no preflight)."""
  body = b'{"movetime_ms": 60000}'
  kinds = [
    _head('POST', '/v1/play', body, Origin='https://evil.example'),
    _head('POST', '/v1/play', body).replace(b'Host: 127.0.0.1', b'Host: rebind.example:8000'),
    _head('POST', '/v1/play', body).replace(b'application/json', b'text/plain'),
  ]
  return [rng.choice(kinds) for _ in range(count)]


if __name__ == '__main__':
  try:
    main()
  except KeyboardInterrupt:
    sys.exit('interrupted: the server it started is stopped')
