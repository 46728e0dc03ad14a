"""Downloads that survive a network: resumed, checked, and all or nothing under the final name.

`download(remotes, root)` fetches `published.Remote`s into ROOT, several at once
(`jobs`) under one progress bar. A file's bytes go to ``NAME.part``; an interrupted
download (a dropped connection, Ctrl-C, a kill) resumes with an HTTP range request
where the server allows one and restarts from zero where it does not. The file is
renamed to NAME only once its size (the server's Content-Length) and its checksum,
where one is published, are right: Lichess's ``sha256sums.txt``, or the MD5 that
Google Cloud Storage sends in ``x-goog-hash``. A zip is then unpacked into a folder
of its name, which appears whole, and removed. Transient errors (a refused or dropped
connection, a 5xx) are retried with backoff (requests + urllib3's `Retry`); anything
else is a `DownloadError`, one line naming the URL or the file. One writer per data
folder, whose filesystem errors (a full disk) name the file and ``--out`` (`outputs.writing`).
"""

import base64
from collections.abc import Callable, Sequence
import dataclasses
import hashlib
import os
import pathlib
import re
import shutil
import threading
from typing import Any, TypeVar
import zipfile

import requests
import requests.adapters
import urllib3.exceptions
from urllib3.util.retry import Retry

from searchless.core import outputs
from searchless.core import progress_bars
from searchless.core import published

CHUNK = 1 << 20  # Bytes read and written at a time.
TIMEOUT = (10.0, 60.0)  # Seconds to connect, and to wait for the next bytes.
BACKOFF = 1.0  # Seconds before the first retry; doubled at each one, at most `BACKOFF_MAX`.
BACKOFF_MAX = 30.0
_T = TypeVar('_T')
_R = TypeVar('_R')


class DownloadError(OSError):
  """A download that cannot succeed as asked: the message (one line) names the URL or the file; `status` is the
  server's HTTP status where it answered with an error."""

  def __init__(self, message: str, status: int | None = None):
    super().__init__(message)
    self.status = status


class _Stopped(Exception):
  """Raised in a worker thread when the download as a whole stops (Ctrl-C, or another file failed)."""


@dataclasses.dataclass
class Job:
  """One file to fetch: its `remote`, the `url` fetched (the mirror's), where it goes, what the server said of it."""

  remote: published.Remote
  url: str
  dest: pathlib.Path  # The final file (a zip to unpack: the zip).
  size: int | None = None  # Content-Length; None: the server did not say.
  md5: str | None = None  # base64 of the MD5 digest (x-goog-hash), if sent.
  sha256: str | None = None  # hex, from a published list ...
  sums_url: str | None = None  # ... at this URL (the mirror's).
  fetched: bool = False  # The file is there (a zip not yet unpacked).
  error: str | None = None  # A dry run's failed look-up.

  @property
  def part(self) -> pathlib.Path:
    return self.dest.with_name(self.dest.name + '.part')


@dataclasses.dataclass
class Result:
  """What `download` did: `jobs` (every file to fetch; their bytes) and `present` (finals already there)."""

  root: pathlib.Path
  jobs: list[Job]
  present: list[published.Remote]

  @property
  def bytes(self) -> int:
    return sum(j.size or 0 for j in self.jobs)


def session(retries: int) -> requests.Session:
  """An HTTP session that retries refused connections and 429/5xx answers `retries` times, with backoff."""
  retry = Retry(
    total=retries,
    backoff_factor=BACKOFF,
    backoff_max=BACKOFF_MAX,
    status_forcelist=(429, 500, 502, 503, 504),
    allowed_methods=('HEAD', 'GET'),
    raise_on_status=False,
  )
  s = requests.Session()
  s.mount('http://', requests.adapters.HTTPAdapter(max_retries=retry))
  s.mount('https://', requests.adapters.HTTPAdapter(max_retries=retry))
  s.headers['Accept-Encoding'] = 'identity'  # The stored bytes, whose size and checksum are published.
  return s


def reason(error: BaseException) -> str:
  """The innermost cause of a requests / urllib3 error, short: '[Errno 111] Connection refused'."""
  while True:
    inner = getattr(error, 'reason', None)
    if not isinstance(inner, BaseException) and error.args and isinstance(error.args[0], BaseException):
      inner = error.args[0]
    if not isinstance(inner, BaseException) or inner is error:
      break
    error = inner
  text = str(error)
  found = re.search(r'\[Errno -?\d+\][^)\'"]*', text)
  return found.group(0).strip() if found else (text.split(': ', 1)[-1] if 'object at 0x' in text else text)


def check_status(response: requests.Response, url: str) -> None:
  if response.status_code >= 400:
    raise DownloadError(f'{url}: HTTP {response.status_code} {response.reason}', response.status_code)


def request(s: requests.Session, method: str, url: str, **kwargs: Any) -> requests.Response:
  """`s.request(method, url)` within `TIMEOUT` (the session's retries included); a server that cannot be reached,
  or that answers with an error, is a `DownloadError` naming `url`."""
  try:
    r = s.request(method, url, timeout=TIMEOUT, **kwargs)
  except (requests.RequestException, urllib3.exceptions.HTTPError) as error:
    raise DownloadError(f'cannot reach {url}: {reason(error)}') from None
  if r.status_code >= 400 and not (method == 'HEAD' and r.status_code in (405, 501)):
    r.close()
    check_status(r, url)
  return r


def backoff(failures: int) -> float:
  """Seconds to wait after `failures` failures in a row: `BACKOFF`, doubled at each one, at most `BACKOFF_MAX`."""
  return min(BACKOFF * 2 ** (failures - 1), BACKOFF_MAX)


def look_up(s: requests.Session, url: str) -> tuple[int | None, str | None]:
  """(size, base64 MD5 or None) of the file at `url`, from its headers (HEAD, or a GET closed at once)."""
  r = request(s, 'HEAD', url, allow_redirects=True)
  if r.status_code in (405, 501):  # No HEAD here: the headers of a GET.
    r = request(s, 'GET', url, stream=True)
    r.close()
  length = r.headers.get('Content-Length')
  md5 = re.search(r'md5=([A-Za-z0-9+/=]+)', r.headers.get('x-goog-hash', ''))
  return (int(length) if length and length.isdigit() else None), (md5.group(1) if md5 else None)


def checksums(s: requests.Session, url: str) -> dict[str, str]:
  """{file name: sha256} of a ``sha256sum``-format list at `url`."""
  r = request(s, 'GET', url)
  found = {}
  for line in r.text.splitlines():
    digest, _, name = line.strip().partition(' ')
    if re.fullmatch(r'[0-9a-f]{64}', digest):
      found[name.strip().lstrip('*')] = digest
  return found


def fetch(
  s: requests.Session, job: Job, on_bytes: Callable[[int], None], stop: threading.Event, *, retries: int
) -> None:
  """Fetches `job` into its ``.part`` file (resuming it), checks it, and renames it to `job.dest`. A write that
  fails (a full disk) is an OSError naming the ``.part`` (`outputs.open_output`)."""
  part, failures = job.part, 0
  part.parent.mkdir(parents=True, exist_ok=True)
  while True:
    have = part.stat().st_size if part.exists() else 0
    if job.size is not None and have > job.size:  # Not a prefix of this file: start again.
      part.unlink()
      on_bytes(-have)
      continue
    if job.size is not None and have == job.size:
      break
    progressed = False
    try:
      headers = {'Range': f'bytes={have}-'} if have else {}
      with s.get(job.url, headers=headers, stream=True, timeout=TIMEOUT) as r:
        if have and r.status_code == 416:  # The range is past the end: what is there is not this file.
          part.unlink()
          on_bytes(-have)
          continue
        check_status(r, job.url)
        if have and r.status_code != 206:  # The server ignored the range: restart from zero.
          on_bytes(-have)
          have = 0
        with outputs.open_output(part, 'ab' if have else 'wb') as f:
          for chunk in r.raw.stream(CHUNK, decode_content=False):
            if stop.is_set():
              raise _Stopped
            f.write(chunk)
            on_bytes(len(chunk))
            progressed = True
      if job.size is None:
        break  # The server gave no length: the body it sent whole is the file.
      if part.stat().st_size < job.size:
        raise urllib3.exceptions.ProtocolError('the connection closed early')
    except (requests.RequestException, urllib3.exceptions.HTTPError) as error:
      failures = 1 if progressed else failures + 1
      if failures > retries:
        raise DownloadError(f'cannot fetch {job.url}: {reason(error)} (after {retries} retries)') from None
      if stop.wait(backoff(failures)):
        raise _Stopped from None
  _verify(job)
  os.replace(part, job.dest)


def _verify(job: Job) -> None:
  """Refuses (and removes) a ``.part`` whose checksum is not the published one."""
  for name, want, published_in in (('sha256', job.sha256, job.sums_url), ('md5', job.md5, 'x-goog-hash')):
    if want is None:
      continue
    with open(job.part, 'rb') as f:
      digest = hashlib.file_digest(f, name)
    got = digest.hexdigest() if name == 'sha256' else base64.b64encode(digest.digest()).decode()
    if got != want:
      job.part.unlink()
      raise DownloadError(
        f'{job.url}: {name} {got} is not the published {want} ({published_in}): removed it; rerun to fetch it again'
      )


def unpack(archive: pathlib.Path, folder: pathlib.Path) -> None:
  """Unpacks the zip `archive` into `folder` (which appears whole), then removes `archive`. A zip holding one
  folder (the published checkpoints: ``9M/<step>/...``) gives that folder's contents."""
  work = folder.with_name(f'.{folder.name}.unpacking')
  shutil.rmtree(work, ignore_errors=True)
  try:
    with zipfile.ZipFile(archive) as z:
      z.extractall(work)
  except (zipfile.BadZipFile, OSError) as error:
    shutil.rmtree(work, ignore_errors=True)
    raise DownloadError(f'cannot unpack {archive}: {error}') from None
  entries = list(work.iterdir())
  inner = entries[0] if len(entries) == 1 and entries[0].is_dir() and not entries[0].name.isdigit() else work
  os.replace(inner, folder)
  shutil.rmtree(work, ignore_errors=True)
  archive.unlink()


def _parallel(fn: Callable[[_T], _R], items: Sequence[_T], jobs: int, stop: threading.Event) -> list[_R]:
  """`fn` over `items` on `jobs` daemon threads, results in order. The first error stops the rest (`stop`) and is
  raised; Ctrl-C in the calling thread stops them too and is raised."""
  results: list[Any] = [None] * len(items)
  errors: list[BaseException] = []
  lock = threading.Lock()
  queue = list(enumerate(items))[::-1]

  def work() -> None:
    while not stop.is_set():
      with lock:
        if not queue:
          return
        i, item = queue.pop()
      try:
        results[i] = fn(item)
      except _Stopped:
        return
      except BaseException as error:  # pylint: disable=broad-except  # Raised again in the calling thread.
        with lock:
          errors.append(error)
        stop.set()

  threads = [threading.Thread(target=work, daemon=True) for _ in range(max(1, min(jobs, len(items))))]
  for t in threads:
    t.start()
  try:
    for t in threads:
      while t.is_alive():
        t.join(0.1)
  except KeyboardInterrupt:
    stop.set()
    for t in threads:
      t.join(2.0)  # Each stops at its next chunk; one waiting on the network is left (a daemon).
    raise
  if errors:
    raise errors[0]
  return results


def download(
  remotes: Sequence[published.Remote],
  root: pathlib.Path,
  *,
  base_url: str | None = None,
  jobs: int = 4,
  retries: int = 5,
  progress: bool = True,
  dry_run: bool = False,
) -> Result:
  """Fetches `remotes` into `root` (at the mirror `base_url`, if given) and returns what was done; with `dry_run`,
  looks up each file's size (HEAD) and fetches nothing. Ctrl-C is a KeyboardInterrupt whose message says what was
  kept."""
  root = pathlib.Path(root)
  s, stop = session(retries), threading.Event()
  present = [r for r in remotes if (root / r.final).exists()]
  todo = [
    Job(r, published.mirrored(r.url, base_url), root / r.path, fetched=(root / r.path).exists())
    for r in remotes
    if r not in present
  ]

  def look(job: Job) -> None:
    if job.fetched:
      return
    try:
      job.size, job.md5 = look_up(s, job.url)
    except DownloadError as error:
      if not dry_run:
        raise
      job.error = 'error: ' + str(error).replace(f'{job.url}: ', '')  # Its line names the URL.

  if dry_run:
    _parallel(look, todo, jobs, stop)
    return Result(root, todo, present)
  with outputs.writing(root, 'searchless-download', '--out'):  # One writer; its filesystem errors name the file.
    _parallel(look, todo, jobs, stop)
    for list_url in dict.fromkeys(j.remote.checksums for j in todo if j.remote.checksums and not j.fetched):
      sums_url = published.mirrored(list_url, base_url)
      sums = checksums(s, sums_url)
      for job in todo:
        if job.remote.checksums == list_url and not job.fetched:
          job.sha256, job.sums_url = sums.get(job.dest.name), sums_url
          if job.sha256 is None:
            raise DownloadError(f'{sums_url} lists no checksum for {job.dest.name}')
    have = sum(j.part.stat().st_size for j in todo if not j.fetched and j.part.exists())
    total = sum(j.size or 0 for j in todo if not j.fetched)
    bar = progress_bars.bar(
      total=total or None, initial=have, unit='B', unit_scale=True, unit_divisor=1024,
      desc=f'{len(todo)} files', disable=not progress or not todo,
    )  # fmt: skip
    lock = threading.Lock()

    def on_bytes(n: int) -> None:
      with lock:
        bar.update(n)

    def get(job: Job) -> None:
      if not job.fetched:
        fetch(s, job, on_bytes, stop, retries=retries)
        job.fetched = True
      if job.remote.unpack:
        unpack(job.dest, root / job.remote.final)

    try:
      _parallel(get, todo, jobs, stop)
    except KeyboardInterrupt:
      done = sum(j.fetched for j in todo)
      raise KeyboardInterrupt(
        f'{done} of {len(todo)} files fetched into {root}, partial downloads kept as .part files: '
        'run the same command again to resume'
      ) from None
    finally:
      bar.close()
  return Result(root, todo, present)
