"""The bounds of a connection that uvicorn lacks: how many are open, and how long a request's head may take.

`protocol` makes uvicorn's HTTP protocol (httptools') with them, for ``uvicorn.Config(http=...)``:

* past `max_connections` open, a new connection is answered 503 (JSON, ``Retry-After``) and closed: a flood of
  connections costs a few bytes each, not the server's memory (uvicorn's own ``limit_concurrency`` answers
  plain text, and only once a request's head is in);
* a request's head (its request line and headers) not received within `header_timeout` seconds of the
  connection, or of the request's first byte on a kept-alive one, is answered 408 and the connection closed
  (a slow-header client, "slowloris"; uvicorn times out idle kept-alive connections, not these); a head over
  `MAX_HEAD_BYTES` (more bytes read without its end) is answered 431 and closed (httptools reads headers of any
  size);
* a request the parser refuses (a bad Content-Length, TLS bytes on the plain port, ...) is answered 400 in JSON,
  as every other error.

The body's time is the app's to bound (`app.read_body`, ``--body_timeout``).
"""

import asyncio

import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

RETRY_AFTER_SECONDS = 1
MAX_HEAD_BYTES = 32 * 1024  # Read without the head's end: 431 (nginx's large_client_header_buffers: 4 x 8 KiB).


def _too_large() -> bytes:
  message = f'the request head is over {MAX_HEAD_BYTES} bytes (its headers too large)'
  return _answer(431, 'Request Header Fields Too Large', message)


def _answer(status: int, reason: str, message: str, *extra: bytes) -> bytes:
  """A whole HTTP/1.1 answer that closes the connection: ``{"error": message}``."""
  body = orjson.dumps({'error': message})
  head = [
    f'HTTP/1.1 {status} {reason}'.encode(),
    b'content-type: application/json',
    b'content-length: %d' % len(body),
    b'connection: close',
    *extra,
  ]
  return b'\r\n'.join(head) + b'\r\n\r\n' + body


class BoundedProtocol(HttpToolsProtocol):
  """uvicorn's httptools protocol with `max_connections` and `header_timeout` (set by `protocol`)."""

  max_connections = 512
  header_timeout = 10.0
  _head_timer: asyncio.TimerHandle | None = None
  _refused = False  # Answered 503 at connection: what the client sends is dropped until it closes (1 s at most).
  _head_bytes = 0  # Of the request head being read: its line and headers as parsed ...
  _head_read = 0  # ... and the bytes read while it is not complete.
  _head_too_large = False

  def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
    full = len(self.connections) >= self.max_connections
    super().connection_made(transport)
    if full:
      message = f'{self.max_connections} connections are open, the most this server takes (--max_connections)'
      retry = b'retry-after: %d' % RETRY_AFTER_SECONDS
      self._refused = True
      transport.write(_answer(503, 'Service Unavailable', message, retry))
      transport.write_eof()  # Not a close: the request it sends meanwhile would be answered by a reset, not this.
      self.loop.call_later(RETRY_AFTER_SECONDS, transport.close)
      return
    self._head_timer = self.loop.call_later(self.header_timeout, self._head_late)

  def data_received(self, data: bytes) -> None:
    if self._refused:
      return
    super().data_received(data)
    if self._head_timer is not None and not self.transport.is_closing():  # A head still incomplete after these.
      self._head_read += len(data)
      if self._head_read > MAX_HEAD_BYTES:
        self._close_with(_too_large())

  def on_url(self, url: bytes) -> None:
    self._count(len(url))
    super().on_url(url)

  def on_header(self, name: bytes, value: bytes) -> None:
    self._count(len(name) + len(value))
    super().on_header(name, value)

  def _count(self, size: int) -> None:
    """Counts a part of the head read; past `MAX_HEAD_BYTES` it stops the parse (`send_400_response`: 431)."""
    self._head_bytes += size
    if self._head_bytes > MAX_HEAD_BYTES:
      self._head_too_large = True
      raise ValueError('the request head is too large')  # The parser's error: uvicorn calls send_400_response.

  def on_message_begin(self) -> None:
    self._head_bytes = self._head_read = 0
    super().on_message_begin()
    if self._head_timer is None:  # A kept-alive connection's next request: its head from its first byte.
      self._head_timer = self.loop.call_later(self.header_timeout, self._head_late)

  def on_headers_complete(self) -> None:
    self._stop_head_timer()
    super().on_headers_complete()

  def connection_lost(self, exc: Exception | None) -> None:
    self._stop_head_timer()
    super().connection_lost(exc)

  def send_400_response(self, msg: str) -> None:
    if self._head_too_large:
      self._close_with(_too_large())
      return
    self._close_with(_answer(400, 'Bad Request', f'{msg.rstrip(".")} (not HTTP/1.1 the server can read)'))

  def _stop_head_timer(self) -> None:
    if self._head_timer is not None:
      self._head_timer.cancel()
      self._head_timer = None

  def _head_late(self) -> None:
    self._head_timer = None
    if not self.transport.is_closing():
      message = f'the request head was not received within {self.header_timeout:g} s (--header_timeout)'
      self._close_with(_answer(408, 'Request Timeout', message))

  def _close_with(self, answer: bytes) -> None:
    self._stop_head_timer()
    if not self.transport.is_closing():
      self.transport.write(answer)
      self.transport.close()


def protocol(*, max_connections: int, header_timeout: float) -> type[BoundedProtocol]:
  """uvicorn's HTTP protocol bounded by `max_connections` open and `header_timeout` seconds for a head."""
  return type('Bounded', (BoundedProtocol,), {'max_connections': max_connections, 'header_timeout': header_timeout})
