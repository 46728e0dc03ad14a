"""A file server on 127.0.0.1 for the download and streaming tests: ranges or not, a dropped connection, slow
bytes, Google Cloud Storage's MD5 header, and a log of what was asked. It never reaches beyond this machine.

    with FileServer(folder) as server:
      server.url  # 'http://127.0.0.1:PORT'; FOLDER/a/b.bag is at server.url + '/a/b.bag'
"""

import base64
import hashlib
import http.server
import pathlib
import re
import threading
import time


class FileServer:
  """Serves `folder`. `ranges`: honour Range requests (206); `drop_after`: the next GET of each file sends its full
  Content-Length but closes after that many bytes (once per file); `bytes_per_second`: slow bytes; `goog_hash`:
  send ``x-goog-hash: md5=...`` (a wrong one for the files in `wrong_md5`). `log`: (method, path, Range header)."""

  def __init__(self, folder: pathlib.Path, *, ranges: bool = True, drop_after: int | None = None,
               bytes_per_second: float | None = None, goog_hash: bool = False):  # fmt: skip
    self.folder, self.ranges, self.drop_after = pathlib.Path(folder), ranges, drop_after
    self.bytes_per_second, self.goog_hash = bytes_per_second, goog_hash
    self.wrong_md5: set[str] = set()
    self.log: list[tuple[str, str, str | None]] = []
    self._dropped: set[str] = set()
    self._server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), self._handler())
    self._server.daemon_threads = True
    self.url = f'http://127.0.0.1:{self._server.server_address[1]}'

  def __enter__(self) -> 'FileServer':
    threading.Thread(target=self._server.serve_forever, daemon=True).start()
    return self

  def __exit__(self, *exc) -> None:
    self._server.shutdown()
    self._server.server_close()

  def gets(self, path: str) -> list[str | None]:
    """The Range headers of the GETs of `path` (None: the whole file)."""
    return [r for m, p, r in self.log if m == 'GET' and p == path]

  def _handler(self) -> type:
    server = self

    class Handler(http.server.BaseHTTPRequestHandler):
      protocol_version = 'HTTP/1.1'

      def log_message(self, *args) -> None:  # Quiet.
        pass

      def _headers(self) -> tuple[bytes, int, int] | None:
        server.log.append((self.command, self.path, self.headers.get('Range')))
        path = server.folder / self.path.lstrip('/')
        if not path.is_file():
          self.send_response(404)
          self.send_header('Content-Length', '0')
          self.end_headers()
          return None
        data = path.read_bytes()
        start = 0
        wanted = re.fullmatch(r'bytes=(\d+)-', self.headers.get('Range') or '')
        if server.ranges and wanted and self.command == 'GET':
          start = int(wanted.group(1))
          if start >= len(data):
            self.send_response(416)
            self.send_header('Content-Length', '0')
            self.end_headers()
            return None
          self.send_response(206)
          self.send_header('Content-Range', f'bytes {start}-{len(data) - 1}/{len(data)}')
        else:
          self.send_response(200)
        if server.ranges:
          self.send_header('Accept-Ranges', 'bytes')
        if server.goog_hash:
          digest = hashlib.md5(data if self.path not in server.wrong_md5 else data + b'!').digest()
          self.send_header('x-goog-hash', f'crc32c=AAAAAA==, md5={base64.b64encode(digest).decode()}')
        self.send_header('Content-Length', str(len(data) - start))
        self.end_headers()
        return data, start, len(data)

      def do_HEAD(self) -> None:
        self._headers()

      def do_GET(self) -> None:
        found = self._headers()
        if found is None:
          return
        data, start, end = found
        if server.drop_after is not None and self.path not in server._dropped:
          server._dropped.add(self.path)
          end = min(end, start + server.drop_after)
        step = 1 << 14
        for i in range(start, end, step):
          try:
            self.wfile.write(data[i : min(i + step, end)])
            self.wfile.flush()
          except (BrokenPipeError, ConnectionResetError):
            return
          if server.bytes_per_second:
            time.sleep(step / server.bytes_per_second)
        if end < len(data):
          self.close_connection = True

    return Handler
