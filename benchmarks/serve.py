"""`searchless-serve` under load: positions/s at 1, 8 and 64 concurrent clients against the model's raw batched
throughput, measured in the same run, and each level's p50 and p99 latency.

    .venv/bin/python benchmarks/serve.py                                  # pretrained, 1 / 8 / 64 clients, 10 s each
    .venv/bin/python benchmarks/serve.py --checkpoint pretrained-transformer --seconds 20

* raw: in this process, the served policy's `analyse_many` (what the server's batcher calls: tokens, the model,
  the moves' win probabilities) on batches of 1, 8 and 64 positions, every batch shape compiled first;
* served: a real `searchless-serve` process on 127.0.0.1; each client is a thread with a keep-alive connection
  that POSTs one position to /v1/analyse, waits for its answer, and sends the next. The positions are every 5th
  ply of the shipped sample games (searchless/samples), the same for both. A client is a few lines of HTTP/1.1
  (`Client`: a prepared request out, the answer read by its Content-Length), as a load generator is: the
  standard library's `http.client` parses each answer's headers in about 0.1 ms of the cores the server runs on.

Targets: at 64 clients, at least 80% of the raw throughput at batch 64; at 1 client, a p50 latency of at most
1.2x the raw batch-1 time. The clients share the machine's cores with the server (on 2 cores they cost it).
Prints each level's positions/s, p50, p99, the mean positions per model call (from /metrics), and the ratios.
8 and 64 clients: the medians of `--rounds` rounds, each the raw figure then the served one (the load of a
shared machine moves a single round's ratio by a tenth). 1 client: raw calls and requests alternate in blocks
of `--block` (about 50 ms each) for 1.5x `--seconds`, so that both see the machine of the moment; the ratio is
the p50 of every request against the median of every raw call, and is printed for each of `--rounds` parts of
the run too.
"""

import argparse
import http.client
import importlib.resources
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time

import chess
import chess.pgn

from searchless.play import player as player_lib


def sample_boards(count: int, every: int = 5) -> list[chess.Board]:
  """Every `every`-th position of the shipped sample games (with legal moves), up to `count`."""
  boards: list[chess.Board] = []
  with importlib.resources.files('searchless.samples').joinpath('sample_games.pgn').open() as f:
    while len(boards) < count and (game := chess.pgn.read_game(f)) is not None:
      board = game.board()
      for ply, move in enumerate(game.mainline_moves()):
        board.push(move)
        if ply % every == 0 and any(True for _ in board.legal_moves):
          boards.append(board.copy(stack=False))
  return boards[:count]


def raw_throughput(policy, boards: list[chess.Board], size: int, seconds: float) -> tuple[float, float]:
  """(positions/s, median seconds per call) of `policy.analyse_many` on batches of `size` positions."""
  times, done, start, i = [], 0, time.perf_counter(), 0
  while time.perf_counter() - start < seconds or len(times) < 5:
    batch = [boards[(i + k) % len(boards)] for k in range(size)]
    i += size
    begin = time.perf_counter()
    policy.analyse_many(batch)
    times.append(time.perf_counter() - begin)
    done += size
  return done / sum(times), statistics.median(times)


class Server:
  """`searchless-serve` as a process on a free port."""

  def __init__(self, checkpoint: str, *flags: str):
    argv = [sys.executable, '-m', 'searchless.commands.serve', '--checkpoint', checkpoint, '--port', '0', *flags]
    self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
      first = self.process.stdout.readline()
      host, port = first.split(' at http://', 1)[1].split('/', 1)[0].rsplit(':', 1)
      self.host, self.port = host, int(port)
      ready = self.process.stdout.readline()
      if not ready.startswith('ready: '):
        raise RuntimeError(f'the server did not get ready: {ready!r}')
    except BaseException:  # Ctrl-C or a failed start: the server does not outlive the benchmark.
      self.close()
      raise

  def metric(self, name: str) -> float:
    connection = http.client.HTTPConnection(self.host, self.port)
    connection.request('GET', '/metrics')
    text = connection.getresponse().read().decode()
    connection.close()
    return next((float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + ' ')), 0.0)

  def batches(self) -> tuple[float, float]:
    """The model calls and the positions in them so far (/metrics' batch-size histogram)."""
    return self.metric('searchless_serve_batch_size_count'), self.metric('searchless_serve_batch_size_sum')

  def close(self) -> None:
    self.process.terminate()
    self.process.wait(30)


class Client:
  """A keep-alive HTTP/1.1 connection that sends prepared requests and reads each answer by its Content-Length."""

  _LENGTH = re.compile(rb'\r\ncontent-length: *(\d+)', re.IGNORECASE)

  def __init__(self, host: str, port: int):
    self.sock = socket.create_connection((host, port), timeout=60)
    self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    self.buffer = b''
    self.closing = False  # The last answer said Connection: close.

  @staticmethod
  def request(path: str, body: bytes) -> bytes:
    """A POST of the JSON `body` to `path`, as bytes to send."""
    head = f'POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {len(body)}'
    return head.encode() + b'\r\n\r\n' + body

  def _read(self) -> None:
    chunk = self.sock.recv(1 << 16)
    if not chunk:
      raise ConnectionError('the server closed the connection')
    self.buffer += chunk

  def post(self, request: bytes) -> tuple[int, bytes]:
    """Sends `request` (`Client.request`); the answer's status and body."""
    self.sock.sendall(request)
    while (end := self.buffer.find(b'\r\n\r\n')) < 0:
      self._read()
    head, self.buffer = self.buffer[:end], self.buffer[end + 4 :]
    length = self._LENGTH.search(head)
    if length is None:
      raise RuntimeError(f'an answer without Content-Length: {head[:200]!r}')
    while len(self.buffer) < int(length[1]):
      self._read()
    body, self.buffer = self.buffer[: int(length[1])], self.buffer[int(length[1]) :]
    self.closing = b'\r\nconnection: close' in head.lower()  # The server closes it after this answer.
    return int(head[9:12]), body

  def close(self) -> None:
    self.sock.close()


def served(server: Server, bodies: list[bytes], clients: int, seconds: float) -> tuple[float, list[float], float]:
  """(positions/s, latencies, mean positions per model call) with `clients` concurrent clients for `seconds`."""
  latencies: list[list[float]] = [[] for _ in range(clients)]
  stop = threading.Event()
  barrier = threading.Barrier(clients + 1)

  requests = [Client.request('/v1/analyse', body) for body in bodies]
  failures: list[BaseException] = []

  def client(k: int) -> None:
    try:
      connection = Client(server.host, server.port)
      i = k * 7
      barrier.wait()
      while not stop.is_set():
        request = requests[i % len(requests)]
        i += 1
        begin = time.perf_counter()
        status, body = connection.post(request)
        if status != 200:
          raise RuntimeError(f'client {k}: status {status}: {body[:200]!r}')
        latencies[k].append(time.perf_counter() - begin)
      connection.close()
    except BaseException as error:  # pylint: disable=broad-except  # Ends the level: a figure without it is wrong.
      failures.append(error)
      barrier.abort()
      stop.set()

  threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
  for thread in threads:
    thread.start()
  calls, positions = server.batches()
  try:
    barrier.wait()
  except threading.BrokenBarrierError:
    pass  # A client failed before the start: reported below.
  start = time.perf_counter()
  stop.wait(seconds)
  stop.set()
  for thread in threads:
    thread.join()
  if failures:
    raise RuntimeError(f'{len(failures)} of {clients} clients failed; the first: {failures[0]!r}') from failures[0]
  elapsed = time.perf_counter() - start
  calls_after, positions_after = server.batches()
  calls, positions = calls_after - calls, positions_after - positions
  flat = [x for per in latencies for x in per]
  return len(flat) / elapsed, flat, positions / max(calls, 1)


def lone_client(
  server: Server, policy, boards: list[chess.Board], bodies: list[bytes], seconds: float, block: int
) -> tuple[list[float], list[float], float]:
  """(raw call times, request latencies, mean positions per model call) of 1 client on one keep-alive connection,
  `block` raw batch-1 calls (`policy.analyse_many`) and `block` requests alternating for `seconds`, each block
  on the same positions: both see the machine of the moment (this VM's speed drifts by a tenth from one second to
  the next, which moved the ratio of a raw second and a served second as much)."""
  requests = [Client.request('/v1/analyse', body) for body in bodies]
  connection = Client(server.host, server.port)
  calls, positions = server.batches()
  raw, served_times, i, start = [], [], 0, time.perf_counter()
  while time.perf_counter() - start < seconds:
    for k in range(i, i + block):
      begin = time.perf_counter()
      policy.analyse_many([boards[k % len(boards)]])
      raw.append(time.perf_counter() - begin)
    for k in range(i, i + block):
      begin = time.perf_counter()
      status, body = connection.post(requests[k % len(requests)])
      served_times.append(time.perf_counter() - begin)
      if status != 200:
        raise RuntimeError(f'status {status}: {body[:200]!r}')
    i += block
  connection.close()
  calls_after, positions_after = server.batches()
  calls, positions = calls_after - calls, positions_after - positions
  return raw, served_times, positions / max(calls, 1)


def percentile(values: list[float], q: float) -> float:
  ordered = sorted(values)
  return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def lone(server: Server, policy, boards: list[chess.Board], bodies: list[bytes], args: argparse.Namespace) -> None:
  """The 1-client level (`lone_client`): its figures, and its p50 against the median raw call over the whole
  run and in each of `args.rounds` parts of it."""
  raw, latencies, batch = lone_client(server, policy, boards, bodies, args.seconds * 1.5, args.block)
  raw_call, p50, p99 = statistics.median(raw), percentile(latencies, 0.5), percentile(latencies, 0.99)
  part = len(raw) // args.rounds
  each = ', '.join(
    f'{percentile(latencies[k * part : (k + 1) * part], 0.5) / statistics.median(raw[k * part : (k + 1) * part]):.2f}'
    for k in range(args.rounds)
  )
  print(f'raw batch   1: {len(raw) / sum(raw):8.1f} positions/s, {1000 * raw_call:7.2f} ms a call')
  print(
    f'served   1 client:  {len(latencies) / sum(latencies):8.1f} positions/s, p50 {1000 * p50:7.2f} ms,'
    f' p99 {1000 * p99:7.2f} ms, {batch:5.1f} positions a model call ({len(latencies)} requests, alternating with'
    f' the raw calls in blocks of {args.block})'
  )
  print(
    f'  1 client: p50 / raw batch-1 time = {p50 / raw_call:.2f} (parts: {each}; target <= 1.2: '
    f'{"met" if p50 / raw_call <= 1.2 else "missed"})'
  )


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--checkpoint', default='pretrained')
  parser.add_argument('--clients', type=int, nargs='+', default=[1, 8, 64])
  parser.add_argument('--seconds', type=float, default=10.0, help='Per level, served and raw.')
  parser.add_argument('--max_batch', type=int, default=64)
  parser.add_argument('--positions', type=int, default=512)
  parser.add_argument(
    '--rounds', type=int, default=3, help='Raw then served, this many times a level (each --seconds / rounds).'
  )
  parser.add_argument(
    '--block', type=int, default=20, help='1 client: raw calls and requests alternate in blocks of this many.'
  )
  args = parser.parse_args()
  print(f'load average before: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} CPUs')
  boards = sample_boards(args.positions)
  bodies = [json.dumps({'fen': board.fen()}).encode() for board in boards]
  policy = player_lib.load_policy(args.checkpoint)
  policy.warm_up(args.max_batch)
  server = Server(
    args.checkpoint, '--max_batch', str(args.max_batch), '--max_queue', str(max(1024, 4 * args.max_batch))
  )
  seconds = args.seconds / args.rounds
  try:
    for clients in args.clients:
      served(server, bodies, clients, min(2.0, args.seconds))  # Warm the connections and the code paths.
      if clients == 1:
        lone(server, policy, boards, bodies, args)
        continue
      # Raw then served, round after round, so that both see the machine's load of the moment; the medians of the
      # rounds' figures and ratios (a round's noise on a shared VM is a tenth of the ratio).
      rounds = []
      for _ in range(args.rounds):
        raw_rate, raw_call = raw_throughput(policy, boards, min(clients, args.max_batch), seconds / 2)
        rate, latencies, batch = served(server, bodies, clients, seconds)
        p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
        rounds.append((raw_rate, raw_call, rate, p50, p99, batch, rate / raw_rate, p50 / raw_call))
      raw_rate, raw_call, rate, p50, p99, batch, ratio, latency = (
        statistics.median(r[k] for r in rounds) for k in range(8)
      )
      print(f'raw batch {clients:3d}: {raw_rate:8.1f} positions/s, {1000 * raw_call:7.2f} ms a call')
      print(
        f'served {clients:3d} clients: {rate:8.1f} positions/s ({ratio:.2f}x raw batch {clients}),'
        f' p50 {1000 * p50:7.2f} ms, p99 {1000 * p99:7.2f} ms, {batch:5.1f} positions a model call'
        f' (medians of {args.rounds} rounds)'
      )
      if clients == 64:
        each = ', '.join(f'{r[6]:.2f}' for r in rounds)
        print(
          f'  64 clients: {ratio:.2f} of raw batch 64 (rounds: {each}; target >= 0.80: '
          f'{"met" if ratio >= 0.8 else "missed"})'
        )
  finally:
    server.close()
    close = getattr(policy, 'close', None)
    if close is not None:
      close()
  print(f'load average after: {os.getloadavg()[0]:.2f} (1 min)')


if __name__ == '__main__':
  try:
    main()
  except KeyboardInterrupt:
    sys.exit('interrupted: the server it started is stopped; each level prints its figures as it ends')
