"""HTTP for the downloads and the streamed inputs: one retry layer, bounded, and one-line errors.

`request(session(retries), method, url)` tries a request again `retries` times,
after 1, 2, 4, ... s (`backoff`), when it fails in a way worth it (`TRANSIENT`: a
refused, dropped or stalled connection, a 429 or 5xx answer); the session itself
retries nothing, so no layer nests in another. With the defaults (`RETRIES`,
`TIMEOUT`) a server that cannot be reached is reported within about a minute, one
that stops sending within about two (`give_up_after`). What cannot succeed is a
`DownloadError`: one line naming the URL, with the innermost cause (`reason`).
`look_up` reads what a server says of a file (`Head`: its size, validator and
Google Cloud Storage's checksums); `checksums` reads a ``sha256sum`` list.
`searchless.core.downloads` fetches files with them, `searchless.plumbing.remote_file`
streams one.

>>> round(give_up_after(RETRIES, TIMEOUT[0])), round(give_up_after(RETRIES, TIMEOUT[1]))
(61, 121)
"""

from collections.abc import Sequence
import re
import time
from typing import Any, NamedTuple

import requests
import urllib3.exceptions

from searchless.plumbing import errors

CHUNK = 1 << 16  # Bytes read and written at a time: at most this much of a download is lost to a Ctrl-C.
TIMEOUT = (5.0, 15.0)  # Seconds to connect, and to wait for the next bytes.
RETRIES = 5  # Tries again after a failure worth it (`TRANSIENT`): --retries' default.
BACKOFF = 1.0  # Seconds before the first retry; doubled at each one, at most `BACKOFF_MAX`.
BACKOFF_MAX = 30.0
RETRIED_STATUS = (429, 500, 502, 503, 504)  # Answers tried again: too many requests, the server's own failures.


class DownloadError(errors.UserError, OSError):
  """A download that cannot succeed as asked: the message (one line) names the URL or the file; `status` is the
  server's HTTP status where it answered with an error."""

  def __init__(self, message: str, status: int | None = None):
    super().__init__(message)
    self.status = status


class Transient(Exception):
  """A failure worth another try that is no connection error: a 429 or 5xx answer (`status`), a body cut short."""

  def __init__(self, message: str, status: int | None = None):
    super().__init__(message)
    self.status = status


# The failures that `request` and `fetch` try again.
TRANSIENT = (requests.RequestException, urllib3.exceptions.HTTPError, Transient)


class Head(NamedTuple):
  """What a server's headers say of a file: its `size` (None: not said), its `validator` (the ETag, else the
  Last-Modified date; None: neither), and the base64 `md5` and `crc32c` digests of ``x-goog-hash`` (None: not sent)."""

  size: int | None
  validator: str | None = None
  md5: str | None = None
  crc32c: str | None = None


def content_range(value: str | None) -> tuple[int, int | None] | None:
  """(first byte, whole size or None) of a Content-Range header; None for none or another form.

  >>> content_range('bytes 100-199/200'), content_range('bytes 0-9/*'), content_range('bytes */200')
  ((100, 200), (0, None), None)
  """
  unit, _, rest = (value or '').partition(' ')
  span, _, total = rest.partition('/')
  first = span.partition('-')[0]
  if unit != 'bytes' or not first.isdigit():
    return None
  return int(first), (int(total) if total.isdigit() else None)


def head_of(r: requests.Response) -> Head:
  """The `Head` of an answer: a range answer's (206) size is its Content-Range's whole size."""
  if r.status_code == 206:
    size = (content_range(r.headers.get('Content-Range')) or (0, None))[1]
  else:
    length = r.headers.get('Content-Length', '')
    size = int(length) if length.isdigit() else None
  digests = dict(part.strip().partition('=')[::2] for part in r.headers.get('x-goog-hash', '').split(','))
  validator = r.headers.get('ETag') or r.headers.get('Last-Modified')
  return Head(size, validator, digests.get('md5') or None, digests.get('crc32c') or None)


class Session(requests.Session):
  """A session for downloads: the bytes as stored (no content coding) and no retries of its own: `request` tries
  again, `retries` times (the one retry layer)."""

  def __init__(self, retries: int = RETRIES):
    super().__init__()
    self.retries = retries
    self.headers['Accept-Encoding'] = 'identity'  # The stored bytes, whose size and checksum are published.


def session(retries: int = RETRIES) -> Session:
  """A `Session` whose `request`s are tried again `retries` times."""
  return Session(retries)


def backoff(failures: int) -> float:
  """Seconds to wait after `failures` failures in a row: `BACKOFF`, doubled at each one, at most `BACKOFF_MAX`."""
  return min(BACKOFF * 2 ** (failures - 1), BACKOFF_MAX)


def give_up_after(retries: int, wait: float) -> float:
  """The longest a request that fails each time waits before it is reported: `retries` + 1 tries that each wait
  `wait` seconds (a `TIMEOUT`), and the backoff between them."""
  return (retries + 1) * wait + sum(backoff(i) for i in range(1, retries + 1))


def reason(error: BaseException) -> str:
  """Why a request failed, short, from the exception objects (no message is parsed): the innermost OSError's
  number and text, what timed out, or the innermost exception's own words.

  >>> refused = ConnectionRefusedError(111, 'Connection refused')
  >>> reason(requests.ConnectionError(urllib3.exceptions.MaxRetryError(None, 'http://h/', refused)))
  '[Errno 111] Connection refused'
  >>> reason(urllib3.exceptions.ProtocolError('broken', urllib3.exceptions.IncompleteRead(10, 90)))
  'the connection closed 90 bytes before the end'
  """
  chain: list[BaseException] = []
  current: BaseException | None = error
  while current is not None and all(current is not seen for seen in chain):
    chain.append(current)
    inner = getattr(current, 'reason', None)
    if not isinstance(inner, BaseException):
      inner = next((a for a in current.args if isinstance(a, BaseException)), None)
    current = inner or current.__cause__ or current.__context__
  for e in reversed(chain):
    if isinstance(e, OSError) and e.errno is not None and e.strerror:
      return f'[Errno {e.errno}] {e.strerror}'
  for e in reversed(chain):
    if isinstance(e, (urllib3.exceptions.ReadTimeoutError, requests.ReadTimeout)):
      return f'no bytes for {TIMEOUT[1]:g} s'
    if isinstance(e, (urllib3.exceptions.ConnectTimeoutError, requests.ConnectTimeout)):
      return f'no connection within {TIMEOUT[0]:g} s'
    if isinstance(e, urllib3.exceptions.IncompleteRead):
      return f'the connection closed {e.expected} bytes before the end'
  return str(chain[-1]) or type(chain[-1]).__name__


def attempt(s: requests.Session, method: str, url: str, allow: Sequence[int] = (), **kwargs: Any) -> requests.Response:
  """One try of `s.request(method, url)` within `TIMEOUT`. A 429 or 5xx answer is a `Transient`, another error
  status (but those in `allow`) a `DownloadError` naming `url`; a connection that fails raises requests' error."""
  r = s.request(method, url, timeout=TIMEOUT, **kwargs)
  if r.status_code in RETRIED_STATUS:
    r.close()
    raise Transient(f'HTTP {r.status_code} {r.reason}', r.status_code)
  if r.status_code >= 400 and r.status_code not in allow:
    r.close()
    raise DownloadError(f'{url}: HTTP {r.status_code} {r.reason}', r.status_code)
  return r


def gave_up(url: str, error: BaseException, retries: int, doing: str) -> DownloadError:
  after = f' (after {retries} retries)' if retries else ''
  if isinstance(error, Transient) and error.status is not None:
    return DownloadError(f'{url}: {error}{after}', error.status)
  return DownloadError(f'cannot {doing} {url}: {reason(error)}{after}')


def request(s: Session, method: str, url: str, allow: Sequence[int] = (), **kwargs: Any) -> requests.Response:
  """`attempt(s, method, url)`, tried again `s.retries` times with `backoff` after a `TRANSIENT` failure: a server
  that cannot be reached, or that answers with an error, is a `DownloadError` naming `url`."""
  failures = 0
  while True:
    try:
      return attempt(s, method, url, allow, **kwargs)
    except TRANSIENT as error:
      failures += 1
      if failures > s.retries:
        raise gave_up(url, error, s.retries, 'reach') from None
      time.sleep(backoff(failures))


def look_up(s: Session, url: str) -> Head:
  """What the server says of the file at `url` (`Head`): a HEAD's headers, or a GET's (closed at once) where a
  server takes no HEAD."""
  r = request(s, 'HEAD', url, allow=(405, 501), allow_redirects=True)
  if r.status_code in (405, 501):
    r = request(s, 'GET', url, stream=True)
    r.close()
  return head_of(r)


def checksums(s: Session, url: str) -> dict[str, str]:
  """{file name: sha256} of a ``sha256sum``-format list at `url`."""
  r = request(s, 'GET', url)
  found = {}
  for line in r.text.splitlines():
    digest, _, name = line.strip().partition(' ')
    if re.fullmatch(r'[0-9a-f]{64}', digest):
      found[name.strip().lstrip('*')] = digest
  return found
