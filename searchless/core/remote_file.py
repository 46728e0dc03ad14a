"""An input at an http(s) URL, read as a stream and stored nowhere (`files.open_read`): a Lichess month need not be
downloaded before `searchless-annotate` or `searchless-import` reads it. A dropped connection resumes with a range
request at the byte reached."""

import io
import time
from typing import Any

import requests
import urllib3.exceptions

from searchless.core import fetch
from searchless.core.fetch import DownloadError


class RemoteFile(io.RawIOBase):
  """The bytes at an http(s) `url`, read as a stream and stored nowhere (an input that need not be downloaded
  first). A dropped connection resumes with a range request at the byte reached, `retries` times with backoff; a
  server without range requests cannot resume, and that is a `DownloadError`."""

  def __init__(self, url: str, *, retries: int = 5):
    super().__init__()
    self.url, self.retries, self._position = url, retries, 0
    self._session = fetch.session(retries)
    self._response = self._open()

  def _open(self) -> requests.Response:
    """The response that streams the file from the byte reached (a range request after the first)."""
    headers = {'Range': f'bytes={self._position}-'} if self._position else {}
    r = fetch.request(self._session, 'GET', self.url, headers=headers, stream=True)
    if self._position and r.status_code != 206:
      r.close()
      raise DownloadError(f'{self.url}: the connection dropped at byte {self._position}, and the server cannot resume')
    return r

  def readable(self) -> bool:
    return True

  def readinto(self, buffer: Any) -> int:
    failures = 0
    while True:
      try:
        data = self._response.raw.read(len(buffer), decode_content=False)
        break
      except (requests.RequestException, urllib3.exceptions.HTTPError) as error:
        failures += 1
        if failures > self.retries:
          raise DownloadError(f'cannot read {self.url}: {fetch.reason(error)} (after {self.retries} retries)') from None
        self._response.close()
        time.sleep(fetch.backoff(failures))
        self._response = self._open()
    buffer[: len(data)] = data
    self._position += len(data)
    return len(data)

  def close(self) -> None:
    if (response := getattr(self, '_response', None)) is not None:  # None yet: the first request failed.
      response.close()
    super().close()
