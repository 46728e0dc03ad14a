"""A file server on 127.0.0.1 for the download and streaming tests: ranges or not, validators (ETag,
Last-Modified) and If-Range or not, a dropped or stalled connection, slow bytes, Google Cloud Storage's checksum
header, HEAD and GET that disagree, error answers, a hook that changes a file between GETs, and a log of what was
asked. It never reaches beyond this machine.

    with FileServer(folder) as server:
      server.url  # 'http://127.0.0.1:PORT'; FOLDER/a/b.bag is at server.url + '/a/b.bag'
"""

import base64
from collections.abc import Callable
import email.utils
import hashlib
import http.server
import pathlib
import re
import sys
import threading
import time

import google_crc32c


class _Server(http.server.ThreadingHTTPServer):
  def handle_error(self, request, client_address) -> None:  # A client that hung up mid-answer: not news.
    if not isinstance(sys.exc_info()[1], ConnectionError):
      super().handle_error(request, client_address)


class FileServer:
  """Serves `folder`, reading each file at each request (a test may change it in between).

  `ranges`: honour Range requests (206); `validators`: send an ETag (of the content) and Last-Modified; `if_range`:
  honour If-Range (a Range whose validator is not the file's gets the whole file); `drop_after`: the first `drops`
  GETs of each file send its full Content-Length but close after that many bytes; `stall_at`: a GET sends the bytes
  before that offset, then nothing (until the server closes); `bytes_per_second`: slow bytes; `goog_hash`: send
  ``x-goog-hash`` with ``md5=`` and ``crc32c=`` (True), or one of them ('md5', 'crc32c'), wrong for the paths in
  `wrong_hash`; `head_lengths`: {path: the Content-Length a HEAD says}; `status`: {path: the status every GET of
  it gets}; `head_status`: the status of every HEAD (405: a server that takes no HEAD); `lengths`: {path: bytes
  more (or fewer) than the file's that a GET's Content-Length declares: a longer one sends the file and closes, a
  shorter one sends that many bytes}; `before_get(path, n)`: called before the n-th GET of `path` (from 0) is
  answered. `log`: (method, path, Range header, If-Range header)."""

  def __init__(self, folder: pathlib.Path, *, ranges: bool = True, validators: bool = True, if_range: bool = True,
               drop_after: int | None = None, drops: int = 1, stall_at: int | None = None,
               bytes_per_second: float | None = None, goog_hash: bool | str = False,
               head_lengths: dict[str, int] | None = None, status: dict[str, int] | None = None,
               head_status: int | None = None, lengths: dict[str, int] | None = None,
               before_get: Callable[[str, int], None] | None = None):  # fmt: skip
    self.folder, self.ranges, self.drop_after = pathlib.Path(folder), ranges, drop_after
    self.validators, self.if_range, self.drops, self.stall_at = validators, if_range, drops, stall_at
    self.bytes_per_second, self.goog_hash = bytes_per_second, goog_hash
    self.head_lengths, self.status, self.before_get = head_lengths or {}, status or {}, before_get
    self.head_status, self.lengths = head_status, lengths or {}
    self.wrong_hash: set[str] = set()
    self.log: list[tuple[str, str, str | None, str | None]] = []
    self._dropped: dict[str, int] = {}
    self._closing = threading.Event()
    self._server = _Server(('127.0.0.1', 0), self._handler())
    self._server.daemon_threads = True
    self.url = f'http://127.0.0.1:{self._server.server_address[1]}'

  def __enter__(self) -> 'FileServer':
    threading.Thread(target=self._server.serve_forever, daemon=True).start()
    return self

  def __exit__(self, *exc) -> None:
    self._closing.set()
    self._server.shutdown()
    self._server.server_close()

  def gets(self, path: str) -> list[str | None]:
    """The Range headers of the GETs of `path` (None: the whole file)."""
    return [r for m, p, r, _ in self.log if m == 'GET' and p == path]

  def if_ranges(self, path: str) -> list[str | None]:
    """The If-Range headers of the GETs of `path`."""
    return [i for m, p, _, i in self.log if m == 'GET' and p == path]

  def _handler(self) -> type:
    server = self

    class Handler(http.server.BaseHTTPRequestHandler):
      protocol_version = 'HTTP/1.1'

      def log_message(self, *args) -> None:  # Quiet.
        pass

      def _headers(self) -> tuple[bytes, int, int] | None:
        server.log.append((self.command, self.path, self.headers.get('Range'), self.headers.get('If-Range')))
        path = server.folder / self.path.lstrip('/')
        if self.command == 'GET' and server.before_get is not None:
          server.before_get(self.path, len(server.gets(self.path)) - 1)
        status = 200 if path.is_file() else 404
        if self.command == 'GET':
          status = server.status.get(self.path, status)
        elif server.head_status is not None:
          status = server.head_status
        if status != 200:
          self.send_response(status)
          self.send_header('Content-Length', '0')
          self.end_headers()
          return None
        data = path.read_bytes()
        etag = f'"{hashlib.sha256(data).hexdigest()[:16]}"'
        modified = email.utils.formatdate(path.stat().st_mtime, usegmt=True)
        start = 0
        wanted = re.fullmatch(r'bytes=(\d+)-', self.headers.get('Range') or '')
        same = self.headers.get('If-Range') in (None, etag, modified) or not server.if_range
        if server.ranges and wanted and self.command == 'GET' and same:
          start = int(wanted.group(1))
          if start >= len(data):
            self.send_response(416)
            self.send_header('Content-Range', f'bytes */{len(data)}')
            self.send_header('Content-Length', '0')
            self.end_headers()
            return None
          self.send_response(206)
          self.send_header('Content-Range', f'bytes {start}-{len(data) - 1}/{len(data)}')
        else:
          self.send_response(200)
        if server.ranges:
          self.send_header('Accept-Ranges', 'bytes')
        if server.validators:
          self.send_header('ETag', etag)
          self.send_header('Last-Modified', modified)
        if server.goog_hash:
          hashed = data if self.path not in server.wrong_hash else data + b'!'
          sums = {
            'crc32c': base64.b64encode(google_crc32c.Checksum(hashed).digest()).decode(),
            'md5': base64.b64encode(hashlib.md5(hashed).digest()).decode(),
          }
          names = sums if server.goog_hash is True else [server.goog_hash]
          self.send_header('x-goog-hash', ', '.join(f'{n}={sums[n]}' for n in names))
        length = len(data) - start
        if self.command == 'HEAD':
          length = server.head_lengths.get(self.path, length)
        else:
          length += server.lengths.get(self.path, 0)
        self.send_header('Content-Length', str(length))
        self.end_headers()
        return data, start, min(len(data), start + length)

      def do_HEAD(self) -> None:
        self._headers()

      def do_GET(self) -> None:
        found = self._headers()
        if found is None:
          return
        data, start, end = found
        if server.drop_after is not None and server._dropped.get(self.path, 0) < server.drops:
          server._dropped[self.path] = server._dropped.get(self.path, 0) + 1
          end = min(end, start + server.drop_after)
        if server.stall_at is not None:
          end = min(end, max(start, server.stall_at))
        step = 1 << 14
        for i in range(start, end, step):
          try:
            self.wfile.write(data[i : min(i + step, end)])
            self.wfile.flush()
          except (BrokenPipeError, ConnectionResetError):
            return
          if server.bytes_per_second:
            time.sleep(step / server.bytes_per_second)
        if server.stall_at is not None and end < len(data):
          server._closing.wait(60)  # Stalled: neither bytes nor a close.
        if end < len(data) or server.lengths.get(self.path, 0) > 0:
          self.close_connection = True

    return Handler
