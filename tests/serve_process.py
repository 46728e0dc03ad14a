"""`searchless-serve` as a process for the tests: started on a free port of 127.0.0.1, ready, stopped.

with Served(checkpoint, '--max_batch', '8') as served:
  served.post('/v1/analyse', {'moves': ['e2e4']})  # (status, headers, JSON)
"""

import contextlib
import http.client
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from typing import Any


def reset_on_close(sock: socket.socket) -> None:
  """Makes `sock`'s close() send a reset (SO_LINGER on, 0 s): a client that hangs up at once."""
  sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))


def serve_argv(checkpoint, *args: str) -> list[str]:
  """The command line of `searchless-serve` on `checkpoint`, from this interpreter, on a free port."""
  return [sys.executable, '-m', 'searchless.commands.serve', '--checkpoint', str(checkpoint), '--port', '0', *args]


class Served:
  """The server as a process; `url` once it prints it, `lines` what it printed; `stop()` ends it (SIGTERM)."""

  def __init__(self, checkpoint, *args: str, startup_seconds: float = 600, headers: dict | None = None):
    self.headers = headers or {}  # Sent with every request (a token's Authorization).
    self.process = subprocess.Popen(
      serve_argv(checkpoint, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    self.lines: list[str] = []
    self.stderr: list[str] = []
    self._ready_line = threading.Event()
    threading.Thread(target=self._read_stderr, daemon=True).start()
    first = self.process.stdout.readline()
    if not first.startswith('serving '):
      self.process.kill()
      raise AssertionError(f'no URL from searchless-serve: {first!r} {"".join(self.stderr)[-3000:]}')
    self.lines.append(first.rstrip('\n'))
    address = first.split(' at http://', 1)[1].split('/', 1)[0]
    self.host, port = address.rsplit(':', 1)
    self.port = int(port)
    self.url = f'http://{address}/'
    threading.Thread(target=self._read_stdout, daemon=True).start()
    self.startup_seconds = startup_seconds

  def _read_stdout(self) -> None:
    for line in self.process.stdout:
      self.lines.append(line.rstrip('\n'))
      if line.startswith('ready: '):
        self._ready_line.set()

  def _read_stderr(self) -> None:
    for line in self.process.stderr:
      self.stderr.append(line)

  def wait_ready(self) -> None:
    """Waits for the "ready" line (every batch shape compiled)."""
    if not self._ready_line.wait(self.startup_seconds):
      raise AssertionError(f'searchless-serve not ready: {"".join(self.stderr)[-3000:]}')

  def request(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None, timeout=120):
    """(status, headers as a dict of lower-case names, body bytes) of one request on a new connection."""
    connection = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
    try:
      connection.request(method, path, body=body, headers={**self.headers, **(headers or {})})
      response = connection.getresponse()
      return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
      connection.close()

  def get(self, path: str) -> tuple[int, dict, Any]:
    status, headers, body = self.request('GET', path)
    return status, headers, json.loads(body) if headers.get('content-type', '').startswith('application/json') else body

  def post(
    self, path: str, value: Any = None, *, raw: bytes | None = None, headers: dict | None = None
  ) -> tuple[int, dict, Any]:
    """A JSON POST (``Content-Type: application/json`` unless `headers` say otherwise): (status, headers, JSON)."""
    body = json.dumps(value).encode() if raw is None else raw
    sent = {'Content-Type': 'application/json', **(headers or {})}
    status, answer_headers, answer = self.request('POST', path, body, sent)
    return status, answer_headers, json.loads(answer)

  def metric(self, name: str, **labels: str) -> float:
    """The value of one sample of /metrics (0 when absent)."""
    _, _, text = self.request('GET', '/metrics')
    wanted = name + ('{' + ','.join(f'{k}="{v}"' for k, v in labels.items()) + '}' if labels else '')
    for line in text.decode().splitlines():
      if line.startswith(wanted + ' '):
        return float(line.split()[-1])
    return 0.0

  def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
    """Sends `sig`, waits for the exit; its status."""
    with contextlib.suppress(ProcessLookupError):
      os.kill(self.process.pid, sig)
    return self.process.wait(timeout)

  def __enter__(self) -> 'Served':
    return self

  def __exit__(self, *exc) -> None:
    if self.process.poll() is None:
      self.stop()
    if self.process.poll() is None:
      self.process.kill()
      self.process.wait()


def concurrently(calls: list, *, start: threading.Barrier | None = None) -> list:
  """The results of `calls` (functions of no argument), each run on a thread of its own, all started together."""
  barrier = start or threading.Barrier(len(calls))
  results: list = [None] * len(calls)

  def run(i: int) -> None:
    barrier.wait()
    try:
      results[i] = calls[i]()
    except Exception as error:  # pylint: disable=broad-except  # The test reads it.
      results[i] = error

  threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
  for thread in threads:
    thread.start()
  for thread in threads:
    thread.join(300)
  return results


def wait_for(predicate, seconds: float = 30) -> bool:
  deadline = time.monotonic() + seconds
  while time.monotonic() < deadline:
    if predicate():
      return True
    time.sleep(0.02)
  return False
