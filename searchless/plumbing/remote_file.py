"""An input at an http(s) URL, read as a stream and stored nowhere (`files.open_read`): a Lichess month need not be
downloaded before `searchless-annotate` or `searchless-import` reads it. A dropped connection resumes with a range
request at the byte reached, of the same file (``If-Range`` with its validator), or ends in a `DownloadError`."""

import io
import time
from typing import Any

import requests

from searchless.plumbing import fetch
from searchless.plumbing.fetch import DownloadError


class RemoteFile(io.RawIOBase):
  """The bytes at an http(s) `url`, read as a stream and stored nowhere (an input that need not be downloaded
  first). A dropped or stalled connection resumes with a range request at the byte reached, tried `retries` times in
  a row with backoff (`fetch.request`'s one retry layer, not nested in another); a server without range requests
  cannot resume, and that is a `DownloadError`, as is a file that changed since the first byte (its validator)."""

  def __init__(self, url: str, *, retries: int = fetch.RETRIES):
    super().__init__()
    self.url, self.retries, self._position = url, retries, 0
    self._session = fetch.session(retries)
    self._response: requests.Response | None = fetch.request(self._session, 'GET', url, stream=True)
    self._validator = fetch.head_of(self._response).validator

  def _reopen(self) -> requests.Response:
    """One try at the response that streams the file from the byte reached, of the same file."""
    headers = {'Range': f'bytes={self._position}-'}
    if self._validator:
      headers['If-Range'] = self._validator
    r = fetch.attempt(self._session, 'GET', self.url, headers=headers, stream=True)
    start = fetch.content_range(r.headers.get('Content-Range')) if r.status_code == 206 else None
    if start is None or start[0] != self._position:
      r.close()
      raise DownloadError(
        f'{self.url}: the connection dropped at byte {self._position}, and the server cannot resume there'
        + (' (the file changed)' if r.status_code == 200 and self._validator else '')
      )
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
