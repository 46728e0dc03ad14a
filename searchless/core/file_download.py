"""One file's download: its bytes into ``NAME.part`` as they arrive, resumed only onto the same file, and renamed to
NAME only once it is whole and checked. `searchless.core.downloads` runs several at once (`download`).

A file's bytes go to ``NAME.part`` as they arrive (`fetch.CHUNK` at a time);
``NAME.part.json`` beside it keeps the URL, the size and the *validator* (the
ETag, else the Last-Modified date) of the file they belong to. An interrupted
download (a dropped connection, Ctrl-C, a kill) resumes with a range request
that carries the validator (``If-Range``): a server whose file changed sends the
new file whole, and the download starts again from zero, once, and says so in
one line. A range answer (206) must start where the ``.part`` ends and be of the
same file (its size and validator); a server that has no byte past the ``.part``
of the same file (416) declared a length it does not have: an error. A ``.part``
of a file that gave no validator starts again from zero, unless a published
checksum will check the joined file; a ``.part`` already whole is kept only if
the server's validator is still its own. A file that changes more than
`MAX_CHANGES` times during its download is a `DownloadError`.

The file is renamed to NAME only once it is as long as its answer's
Content-Length said (a body cut short is tried again, never kept as whole) and
its checksum, where one is published, is right: Lichess's ``sha256sums.txt``, or
the MD5 or CRC32C that Google Cloud Storage sends in ``x-goog-hash``. A file with
none is checked for what its name says it is (`file_checks.check`: an error
page, a cut ``.zst``, a ``.zip`` that fails a CRC, a ``.csv`` without its header,
a bag whose index is wrong are errors, and nothing of them is kept).
"""

import base64
from collections.abc import Callable
import dataclasses
import datetime
import hashlib
import json
import os
import pathlib
import threading
from typing import Any, Protocol

import google_crc32c
import requests

from searchless.core import file_checks
from searchless.core import published
from searchless.plumbing import atomic
from searchless.plumbing import fetch
from searchless.plumbing import outputs
from searchless.plumbing.fetch import DownloadError
from searchless.plumbing.fetch import Head

MAX_CHANGES = 3  # Restarts from zero of one file whose remote changed (or did not continue it) in one run.


class Stopped(Exception):
  """Raised in a worker thread when the download as a whole stops (Ctrl-C, or another file failed)."""


class _TryAgain(Exception):
  """The ``.part`` is ready for another request (after a restart from zero, or a failure worth another try)."""


class Record(Protocol):
  """Where a kept file is recorded (``downloads.json``)."""

  def put(self, remote: published.Remote, entry: dict | None) -> None: ...


@dataclasses.dataclass
class Job:
  """One file to fetch: its `remote`, the `url` fetched (the mirror's), where it goes, what the server said of it."""

  remote: published.Remote
  url: str
  dest: pathlib.Path  # The final file (a zip to unpack: the zip).
  head: Head = Head(None)  # What the server says of the file.
  sha256: str | None = None  # hex, from a published list ...
  sums_url: str | None = None  # ... at this URL (the mirror's).
  fetched: bool = False  # The file is there (a zip not yet unpacked).
  checked: str | None = None  # What checked it ('sha256 (URL)', 'md5 (x-goog-hash)'); None: nothing published.
  format: str | None = None  # With no checksum: what its format check found ('zstd frames read to the end').
  error: str | None = None  # A dry run's failed look-up.

  @property
  def size(self) -> int | None:
    """The file's size as the server said it; None: it did not say."""
    return self.head.size

  @property
  def part(self) -> pathlib.Path:
    return self.dest.with_name(self.dest.name + '.part')

  @property
  def meta(self) -> pathlib.Path:
    """The ``.part``'s sidecar: the URL, size and validator of the file its bytes are from."""
    return self.dest.with_name(self.dest.name + '.part.json')

  @property
  def checkable(self) -> bool:
    """Whether a published checksum will check the file (so that a join of bytes without a validator is safe)."""
    return bool(self.sha256 or self.head.md5 or self.head.crc32c)


def read_meta(job: Job) -> dict:
  """The ``.part``'s sidecar, if it is there and readable (of `job`'s file from any mirror: the validator tells)."""
  try:
    meta = json.loads(job.meta.read_text())
  except (OSError, ValueError):
    return {}
  return meta if isinstance(meta, dict) else {}


def size_of(path: pathlib.Path) -> int:
  return path.stat().st_size if path.exists() else 0


def _digests(path: pathlib.Path, md5: bool, crc32c: bool) -> dict[str, str]:
  """The sha256 (hex) of the file at `path`, and its MD5 and CRC32C (base64, as ``x-goog-hash`` has them) where
  asked, in one read."""
  hashers: dict[str, Any] = {'sha256': hashlib.sha256()}
  if md5:
    hashers['md5'] = hashlib.md5()
  if crc32c:
    hashers['crc32c'] = google_crc32c.Checksum()
  with open(path, 'rb') as f:
    while block := f.read(1 << 20):
      for h in hashers.values():
        h.update(block)
  return {
    name: h.hexdigest() if name == 'sha256' else base64.b64encode(h.digest()).decode() for name, h in hashers.items()
  }


def _mismatch(job: Job, digests: dict[str, str]) -> str | None:
  """What is wrong with the ``.part`` whose `digests` these are (None: nothing), and sets `job.checked`."""
  published_as = (
    ('sha256', job.sha256, job.sums_url),
    ('md5', job.head.md5, 'x-goog-hash'),
    ('crc32c', job.head.crc32c, 'x-goog-hash'),
  )
  checked = []
  for name, want, where in published_as:
    if want is None:
      continue
    if digests[name] != want:
      return f'{name} {digests[name]} is not the published {want} ({where})'
    checked.append(f'{name} ({where})')
  job.checked = ', '.join(checked) or None
  return None


def discard(job: Job, on_bytes: Callable[[int], None]) -> None:
  """Removes the ``.part`` (and its sidecar)."""
  on_bytes(-size_of(job.part))
  job.part.unlink(missing_ok=True)
  job.meta.unlink(missing_ok=True)


class FileDownload:
  """Fetches `job` into its ``.part`` (resuming it where that is safe), checks it, renames it to `job.dest` and
  records it (`record`); `live` holds its answer while it streams (for a Ctrl-C to end it). Tries again
  `s.retries` times after failures that brought no new byte, and starts again from zero at most `MAX_CHANGES`
  times (`say` says why, in one line); a write that fails (a full disk) is an OSError naming the ``.part``
  (`outputs.open_output`)."""

  def __init__(
    self,
    s: fetch.Session,
    job: Job,
    on_bytes: Callable[[int], None],
    stop: threading.Event,
    *,
    say: Callable[[str], None],
    record: Record | None = None,
    live: set[requests.Response] | None = None,
  ):
    self.s, self.job, self.on_bytes, self.stop, self.say, self.record = s, job, on_bytes, stop, say, record
    self.live = set() if live is None else live
    self.changes = 0  # Restarts from zero: the remote did not continue the .part.
    self.failures = 0  # Failures in a row that brought no new byte.
    self.furthest = 0  # The most bytes the .part has held since the last restart.
    self.sha256 = ''  # The kept file's, once checked.

  def run(self) -> None:
    self.job.part.parent.mkdir(parents=True, exist_ok=True)
    while True:
      if self.stop.is_set():
        raise Stopped
      try:
        self._check(resumed=self._fill())
      except _TryAgain:
        continue
      break
    self._keep()

  def _restart(self, why: str) -> None:
    """The remote does not continue the ``.part``: drops it, to fetch the file from zero, a bounded number of
    times."""
    discard(self.job, self.on_bytes)
    self.changes, self.furthest, self.failures = self.changes + 1, 0, 0
    if self.changes > MAX_CHANGES:
      raise DownloadError(
        f'{self.job.url} changed {self.changes} times during its download ({why}): nothing kept; rerun later'
      )
    self.say(f'{self.job.dest.name}: {why}: fetching it again from zero')

  def _fill(self) -> bool:
    """Brings the ``.part`` to the whole file (one request, or none where it is whole already); returns whether
    its bytes join onto bytes that an earlier request brought."""
    job = self.job
    have, meta = size_of(job.part), read_meta(job)
    size, validator = meta.get('size'), meta.get('validator')
    if have and not (meta and (validator or job.checkable)):  # Nothing tells that the server still has its file.
      if not self.furthest and not self.changes:  # A .part an earlier run left.
        self.say(
          f'{job.dest.name}: a .part with no validator (ETag, Last-Modified) nor checksum to check it: from zero'
        )
      discard(job, self.on_bytes)
      have = 0
    if have and size is not None and have >= size:
      if have > size:
        self._restart(f'the .part is longer ({have} bytes) than its file ({size})')
      elif validator and job.head.validator != validator:  # Whole, from an earlier run: of the file there now?
        self._restart(
          f'the file at {job.url} changed since its .part was fetched ({validator} -> {job.head.validator})'
        )
      else:
        return True
      raise _TryAgain
    try:
      return self._get(have, size, validator)
    except fetch.TRANSIENT as error:
      self._failed(error)
      raise _TryAgain from None

  def _get(self, have: int, size: int | None, validator: str | None) -> bool:
    """One GET of the rest of the file (from byte `have`, of the file `validator` names) onto the ``.part``;
    returns whether it joined onto bytes the ``.part`` held."""
    job = self.job
    headers = {'Range': f'bytes={have}-'} if have else {}
    if have and validator:
      headers['If-Range'] = validator
    r = None
    try:
      with fetch.attempt(self.s, 'GET', job.url, allow=(416,), headers=headers, stream=True) as r:
        self.live.add(r)
        got = fetch.head_of(r)
        if got.md5 or got.crc32c:  # The answer's own checksums: those of the file it sends.
          job.head = job.head._replace(md5=got.md5, crc32c=got.crc32c)
        if have:
          have = self._continues(r, got, have, size, validator)
        if not have:
          with outputs.open_output(job.part, 'wb'):  # Empty before the sidecar names another file.
            pass
          atomic.write_text(job.meta, json.dumps({'url': job.url, 'size': got.size, 'validator': got.validator}))
          size = got.size
        with outputs.open_output(job.part, 'ab') as f:
          for chunk in r.raw.stream(fetch.CHUNK, decode_content=False):
            if self.stop.is_set():
              raise Stopped
            f.write(chunk)
            f.flush()
            self.on_bytes(len(chunk))
    finally:
      self.live.discard(r)  # type: ignore[arg-type]  # None: no answer.
    if size is not None and (now := size_of(job.part)) != size:
      if now < size:  # A body that ended early (urllib3 saw no error): never a whole file.
        raise fetch.Transient(f'the connection closed at byte {now} of {size}')
      discard(job, self.on_bytes)
      raise DownloadError(f'{job.url}: {now} bytes, more than the {size} its Content-Length declared: nothing kept')
    return have > 0

  def _continues(self, r: requests.Response, got: Head, have: int, size: int | None, validator: str | None) -> int:
    """Where the answer `r` to a range request from byte `have` continues the ``.part``: `have`; 0 where it is the
    whole file (the range not taken, or the file changed: the ``.part`` is dropped). Anything else drops the
    ``.part`` and tries again (`_TryAgain`), or is an error."""
    job = self.job
    if r.status_code == 200:  # The whole file: the range was not taken, or the file changed.
      if validator and got.validator != validator:
        self._restart(f'the file at {job.url} changed since its .part was fetched ({validator} -> {got.validator})')
      else:
        discard(job, self.on_bytes)
      return 0
    if r.status_code == 416 and validator and size is not None:  # The same file has no byte past the .part.
      discard(job, self.on_bytes)
      raise DownloadError(
        f'{job.url}: the server has {have} bytes of the file, not the {size} its Content-Length declared: nothing kept'
      )
    start = fetch.content_range(r.headers.get('Content-Range')) if r.status_code == 206 else None
    if start is None or start[0] != have:
      self._restart(f'the server did not continue the .part at byte {have} (HTTP {r.status_code})')
      raise _TryAgain
    if (size is not None and got.size != size) or (validator and got.validator != validator):
      self._restart(
        f'the file at {job.url} changed since its .part was fetched ({validator}, {size} bytes -> '
        f'{got.validator}, {got.size} bytes)'
      )
      raise _TryAgain
    return have

  def _failed(self, error: BaseException) -> None:
    """After a failure worth another try: waits (`fetch.backoff`), or gives up after `s.retries` failures in a row
    that brought no new byte."""
    now = size_of(self.job.part)
    self.failures = 0 if now > self.furthest else self.failures + 1  # New bytes: a working connection.
    self.furthest = max(self.furthest, now)
    if self.failures > self.s.retries:
      raise fetch.gave_up(self.job.url, error, self.s.retries, 'fetch') from None
    if self.stop.wait(fetch.backoff(max(self.failures, 1))):
      raise Stopped from None

  def _check(self, resumed: bool) -> None:
    """Checks the whole ``.part``: its published checksums, else its format (`file_checks.check`). A join that
    fails its checksum starts again from zero; any other failure drops the ``.part`` and is a `DownloadError`."""
    job = self.job
    digests = _digests(job.part, job.head.md5 is not None, job.head.crc32c is not None)
    if (wrong := _mismatch(job, digests)) is not None:
      if resumed and self.changes < MAX_CHANGES:  # Joined onto an earlier .part: perhaps of an older file.
        self._restart(f'{wrong} after resuming')
        raise _TryAgain
      discard(job, self.on_bytes)
      raise DownloadError(f'{job.url}: {wrong}: removed it; rerun to fetch it again')
    if job.checked is None:
      try:
        job.format = file_checks.check(job.part, job.dest.name)
      except file_checks.BadFormat as error:
        discard(job, self.on_bytes)
        raise DownloadError(f'{job.url}: {error}: nothing kept') from None
    self.sha256 = digests['sha256']

  def _keep(self) -> None:
    """Renames the checked ``.part`` to its final name and records it."""
    job = self.job
    os.replace(job.part, job.dest)
    if self.record is not None:
      stamp = datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%dT%H:%M:%SZ')
      entry = {'url': job.url, 'size': size_of(job.dest), 'validator': read_meta(job).get('validator')}
      entry |= {'fetched': stamp, 'sha256': self.sha256, 'checked': job.checked, 'format': job.format}
      self.record.put(job.remote, entry)
    job.meta.unlink(missing_ok=True)
