"""An input at an http(s) URL, read as a stream and stored nowhere (`files.open_read`): a Lichess month need not be
downloaded before `searchless-annotate` or `searchless-import` reads it. A dropped connection resumes as a download
does (`searchless.core.file_download`): only onto the same file, which needs a validator (ETag, Last-Modified).
Without one, or where the server sends another file or another byte, it is a `DownloadError`."""

import io
import time
from typing import Any

import requests

from searchless.plumbing import fetch
from searchless.plumbing.fetch import DownloadError


class RemoteFile(io.RawIOBase):
  """The bytes at an http(s) `url`, read as a stream and stored nowhere (an input that need not be downloaded
  first). A dropped or stalled connection, or a body shorter than its Content-Length, resumes with a range request
  at the byte reached, with ``If-Range`` and the validator of the first answer, tried `retries` times in a row with
  backoff (`fetch.request`'s one retry layer, not nested in another). The answer must be a 206 that starts at that
  byte, of the same file (its validator and size). A server that sent no validator cannot resume safely: its
  dropped connection is a `DownloadError`, as is a server without range requests, or a file that changed."""

  def __init__(self, url: str, *, retries: int = fetch.RETRIES):
    super().__init__()
    self.url, self.retries, self._position = url, retries, 0
    self._session = fetch.session(retries)
    self._response: requests.Response | None = fetch.request(self._session, 'GET', url, stream=True)
    self._head = fetch.head_of(self._response)  # The file's size and validator, as its first answer said.

  def _cannot_resume(self, why: str) -> DownloadError:
    return DownloadError(f'{self.url}: the connection dropped at byte {self._position}, and {why}')

  def _reopen(self) -> requests.Response:
    """One try at the response that streams the file from the byte reached, of the same file."""
    validator = self._head.validator
    if not validator:
      raise self._cannot_resume('the server sent no validator (ETag, Last-Modified): it cannot resume safely')
    headers = {'Range': f'bytes={self._position}-', 'If-Range': validator}
    r = fetch.attempt(self._session, 'GET', self.url, headers=headers, stream=True)
    got = fetch.head_of(r)
    start = fetch.content_range(r.headers.get('Content-Range')) if r.status_code == 206 else None
    changed = got.validator != validator or (self._head.size is not None and got.size != self._head.size)
    if start is None or start[0] != self._position or changed:
      r.close()
      said = ' (the file changed)' if r.status_code == 200 or (r.status_code == 206 and changed) else ''
      raise self._cannot_resume(f'the server cannot resume there{said}')
    return r

  def readable(self) -> bool:
    return True

  def readinto(self, buffer: Any) -> int:
    failures = 0
    while True:
      try:
        if self._response is None:
          self._response = self._reopen()
        data = self._response.raw.read(len(buffer), decode_content=False)
        size = self._head.size
        if not data and len(buffer) and size is not None and self._position < size:  # Ended early, unnoticed.
          raise fetch.Transient(f'the connection closed at byte {self._position} of {size}')
        break
      except fetch.TRANSIENT as error:
        failures += 1
        if failures > self.retries:
          raise DownloadError(f'cannot read {self.url}: {fetch.reason(error)} (after {self.retries} retries)') from None
        if self._response is not None:
          self._response.close()
        self._response = None
        time.sleep(fetch.backoff(failures))
    buffer[: len(data)] = data
    self._position += len(data)
    return len(data)

  def close(self) -> None:
    if (response := getattr(self, '_response', None)) is not None:  # None yet: the first request failed.
      response.close()
    super().close()
