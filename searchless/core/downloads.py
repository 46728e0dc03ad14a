"""Downloads that survive a network and a server whose files change: resumed only onto the same file, checked,
and all or nothing under the final name.

`download(remotes, root)` fetches `published.Remote`s into ROOT, several at once
(`jobs`) under one progress bar. A file's bytes go to ``NAME.part`` as they arrive
(`fetch.CHUNK` at a time); ``NAME.part.json`` beside it keeps the URL, the size and the
*validator* (the ETag, else the Last-Modified date) of the file they belong to. An
interrupted download (a dropped connection, Ctrl-C, a kill) resumes with a range
request that carries the validator (``If-Range``): a server whose file changed sends
the new file whole, and the download starts again from zero, once, and says so in
one line. A range answer (206) must start where the ``.part`` ends and be of the same
file (its size and validator). A ``.part`` of a file that gave no validator starts
again from zero, unless a published checksum will check the joined file. A file that
changes more than `MAX_CHANGES` times during its download is a `DownloadError`.

The file is renamed to NAME only once its size (the server's Content-Length) and its
checksum, where one is published, are right: Lichess's ``sha256sums.txt``, or the MD5
or CRC32C that Google Cloud Storage sends in ``x-goog-hash`` (through a mirror too,
where it sends them); a file with none is reported `UNVERIFIED`. ``downloads.json``
in ROOT (`RECORD`) keeps each file's URL, size, validator, sha256 (computed here) and
what checked it; a rerun that finds a file there asks the server (HEAD) whether it
changed since, and says so (`Result.changed`). A zip is then unpacked into a folder of
its name, which appears whole, and removed; a zip that will not unpack is removed, to
be fetched again. A checkpoint's folder is there only once it holds a checkpoint
(`published.holds_checkpoint`).

Failures worth another try (`fetch.TRANSIENT`) are tried again `retries` times, in
one layer, with `fetch.backoff` (a server that cannot be reached: reported within
about a minute by default, `fetch.give_up_after`); a download that brings new bytes
starts its count again. Anything else is a `DownloadError`, one line naming the URL
or the file. One writer per data folder, whose filesystem errors (a full disk) name
the file and ``--out`` (`outputs.sole_writer`).
"""

import base64
from collections.abc import Callable, Sequence
import concurrent.futures
import dataclasses
import datetime
import hashlib
import json
import os
import pathlib
import shutil
import sys
import threading
from typing import Any, TypeVar
import zipfile

import google_crc32c
import requests
import tqdm

from searchless.core import published
from searchless.plumbing import fetch
from searchless.plumbing import outputs
from searchless.plumbing import progress_bars
from searchless.plumbing.fetch import DownloadError
from searchless.plumbing.fetch import Head

MAX_CHANGES = 3  # Restarts from zero of one file whose remote changed (or did not continue it) in one run.
RECORD = 'downloads.json'  # In the data folder: what was downloaded, from where, and its sha256.
UNVERIFIED = 'unverified (no checksum published)'
_T = TypeVar('_T')
_R = TypeVar('_R')


class _Stopped(Exception):
  """Raised in a worker thread when the download as a whole stops (Ctrl-C, or another file failed)."""


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


@dataclasses.dataclass
class Result:
  """What `download` did: `jobs` (every file to fetch; their bytes), `present` (finals already there), and
  `changed` (one line for each file there whose remote changed since it was downloaded)."""

  root: pathlib.Path
  jobs: list[Job]
  present: list[published.Remote]
  changed: list[str] = dataclasses.field(default_factory=list)

  @property
  def bytes(self) -> int:
    return sum(j.size or 0 for j in self.jobs)

  @property
  def unverified(self) -> list[Job]:
    """The files fetched that no published checksum checked."""
    return [j for j in self.jobs if j.fetched and j.checked is None]


def _write_json(path: pathlib.Path, data: Any) -> None:
  """Writes `data` to `path` whole or not at all (a temporary file renamed)."""
  work = path.with_name(path.name + '.tmp')
  with outputs.open_output(work, 'w') as f:
    json.dump(data, f, indent=1, sort_keys=True)
  os.replace(work, path)


def _read_meta(job: Job) -> dict | None:
  """The ``.part``'s sidecar, if it is there and readable (of `job`'s file from any mirror: the validator tells)."""
  try:
    meta = json.loads(job.meta.read_text())
  except (OSError, ValueError):
    return None
  return meta if isinstance(meta, dict) else None


def _size_of(path: pathlib.Path) -> int:
  return path.stat().st_size if path.exists() else 0


class _Record:
  """``downloads.json``: {path under the data folder: its URL, size, validator, sha256 and what checked it}. A
  record that cannot be read is started afresh: it says what was done; the files themselves were checked."""

  def __init__(self, root: pathlib.Path):
    self.path, self._lock = root / RECORD, threading.Lock()
    try:
      files = json.loads(self.path.read_text()).get('files', {})
    except (OSError, ValueError, AttributeError):
      files = {}
    self.files: dict[str, dict] = files if isinstance(files, dict) else {}

  def get(self, remote: published.Remote) -> dict | None:
    found = self.files.get(remote.path.as_posix())
    return found if isinstance(found, dict) else None

  def put(self, remote: published.Remote, entry: dict | None) -> None:
    """Records `entry` for `remote`'s file (None: forgets it)."""
    with self._lock:
      if entry is None and self.files.pop(remote.path.as_posix(), None) is None:
        return
      if entry is not None:
        self.files[remote.path.as_posix()] = entry
      _write_json(self.path, {'files': self.files})


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


def _discard(job: Job, on_bytes: Callable[[int], None]) -> None:
  """Removes the ``.part`` (and its sidecar)."""
  on_bytes(-_size_of(job.part))
  job.part.unlink(missing_ok=True)
  job.meta.unlink(missing_ok=True)


def fetch_file(
  s: fetch.Session,
  job: Job,
  on_bytes: Callable[[int], None],
  stop: threading.Event,
  *,
  say: Callable[[str], None],
  record: _Record | None = None,
  live: set[requests.Response] | None = None,
) -> None:
  """Fetches `job` into its ``.part`` (resuming it where that is safe), checks it, renames it to `job.dest` and
  records it (`record`); `live` holds its answer while it streams (`_shut`). Tries again `s.retries` times after
  failures that brought no new byte, and starts again from zero at most `MAX_CHANGES` times (`say` says why, in
  one line); a write that fails (a full disk) is an OSError naming the ``.part`` (`outputs.open_output`)."""
  part, failures, changes, furthest = job.part, 0, 0, 0
  part.parent.mkdir(parents=True, exist_ok=True)

  def again(why: str) -> None:  # The remote does not continue the .part: from zero, a bounded number of times.
    nonlocal changes, furthest, failures
    _discard(job, on_bytes)
    changes, furthest, failures = changes + 1, 0, 0
    if changes > MAX_CHANGES:
      raise DownloadError(f'{job.url} changed {changes} times during its download ({why}): nothing kept; rerun later')
    say(f'{job.dest.name}: {why}: fetching it again from zero')

  live = set() if live is None else live
  while True:
    if stop.is_set():
      raise _Stopped
    have, meta = _size_of(part), _read_meta(job)
    size = meta.get('size') if meta else None  # The file's size, as the answer that started the .part said.
    validator = meta.get('validator') if meta else None
    if have and size is not None and have >= size:
      if have > size:
        again(f'the .part is longer ({have} bytes) than its file ({size})')
        continue
    else:
      checkable = bool(job.sha256 or job.head.md5 or job.head.crc32c)
      resume = have > 0 and meta is not None and bool(validator or checkable)
      if have and not resume:
        if not furthest and not changes:  # A .part an earlier run left.
          say(f'{job.dest.name}: a .part with no validator (ETag, Last-Modified) nor checksum to check it: from zero')
        _discard(job, on_bytes)
        have = 0
      headers = {'Range': f'bytes={have}-'} if have else {}
      if have and validator:
        headers['If-Range'] = validator
      r = None
      try:
        with fetch.attempt(s, 'GET', job.url, allow=(416,), headers=headers, stream=True) as r:
          live.add(r)
          got = fetch.head_of(r)
          if got.md5 or got.crc32c:  # The answer's own checksums: those of the file it sends.
            job.head = job.head._replace(md5=got.md5, crc32c=got.crc32c)
          if have and r.status_code == 200:  # The whole file: the range was not taken, or the file changed.
            if validator and got.validator != validator:
              again(f'the file at {job.url} changed since its .part was fetched ({validator} -> {got.validator})')
            else:
              _discard(job, on_bytes)
            have = 0
          elif have or r.status_code != 200:  # A range answer (206, 416): it must continue the .part.
            start = fetch.content_range(r.headers.get('Content-Range')) if r.status_code == 206 else None
            if start is None or start[0] != have:
              again(f'the server did not continue the .part at byte {have} (HTTP {r.status_code})')
              continue
            if (size is not None and got.size != size) or (validator and got.validator != validator):
              again(f'the file at {job.url} changed since its .part was fetched ({validator}, {size} bytes -> '
                    f'{got.validator}, {got.size} bytes)')  # fmt: skip
              continue
          if not have:
            with outputs.open_output(part, 'wb'):  # Empty before the sidecar names another file.
              pass
            _write_json(job.meta, {'url': job.url, 'size': got.size, 'validator': got.validator})
            size = got.size
          with outputs.open_output(part, 'ab') as f:
            for chunk in r.raw.stream(fetch.CHUNK, decode_content=False):
              if stop.is_set():
                raise _Stopped
              f.write(chunk)
              f.flush()
              on_bytes(len(chunk))
        if size is not None and _size_of(part) < size:
          raise fetch.Transient(f'the connection closed at byte {_size_of(part)} of {size}')
      except fetch.TRANSIENT as error:
        now = _size_of(part)
        failures = 0 if now > furthest else failures + 1  # New bytes: a working connection.
        furthest = max(furthest, now)
        if failures > s.retries:
          raise fetch.gave_up(job.url, error, s.retries, 'fetch') from None
        if stop.wait(fetch.backoff(max(failures, 1))):
          raise _Stopped from None
        continue
      finally:
        live.discard(r)  # type: ignore[arg-type]  # None: no answer.
    digests = _digests(part, job.head.md5 is not None, job.head.crc32c is not None)
    if (wrong := _mismatch(job, digests)) is None:
      break
    if have and changes < MAX_CHANGES:  # Joined onto an earlier .part: perhaps of an older file.
      again(f'{wrong} after resuming')
      continue
    _discard(job, on_bytes)
    raise DownloadError(f'{job.url}: {wrong}: removed it; rerun to fetch it again')
  os.replace(part, job.dest)
  if record is not None:
    meta = _read_meta(job) or {}
    stamp = datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%dT%H:%M:%SZ')
    entry = {'url': job.url, 'size': _size_of(job.dest), 'validator': meta.get('validator'), 'fetched': stamp}
    record.put(job.remote, entry | {'sha256': digests['sha256'], 'checked': job.checked})
  job.meta.unlink(missing_ok=True)


def unpack(archive: pathlib.Path, folder: pathlib.Path, holds: Callable[[pathlib.Path], bool] | None = None) -> None:
  """Unpacks the zip `archive` into `folder` (which appears whole), then removes `archive`. A zip holding one
  folder (the published checkpoints: ``9M/<step>/...``) gives that folder's contents. An archive that is no zip,
  or whose contents fail `holds`, is removed: a `DownloadError` says so."""
  work = folder.with_name(f'.{folder.name}.unpacking')
  shutil.rmtree(work, ignore_errors=True)  # What a killed unpack left.
  try:
    with zipfile.ZipFile(archive) as z:
      z.extractall(work)
    entries = list(work.iterdir())
    inner = entries[0] if len(entries) == 1 and entries[0].is_dir() and not entries[0].name.isdigit() else work
    if holds is not None and not holds(inner):
      raise zipfile.BadZipFile('it holds no checkpoint')
  except zipfile.BadZipFile as error:
    shutil.rmtree(work, ignore_errors=True)
    archive.unlink()
    raise DownloadError(f'cannot unpack {archive}: {error}: removed it; rerun to fetch it again') from None
  if folder.is_dir() and not any(folder.iterdir()):
    folder.rmdir()  # An empty folder an earlier failure left.
  os.replace(inner, folder)
  shutil.rmtree(work, ignore_errors=True)
  archive.unlink()


def _parallel(fn: Callable[[_T], _R], items: Sequence[_T], jobs: int, stop: threading.Event) -> list[_R]:
  """`fn` over `items` on `jobs` threads, results in order. The first error stops the rest (`stop`) and is raised;
  Ctrl-C in the calling thread stops them too (each at its next chunk) and is raised."""

  def run(item: _T) -> _R:
    if stop.is_set():
      raise _Stopped
    return fn(item)

  pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(jobs, len(items))))
  futures = [pool.submit(run, item) for item in items]
  try:
    concurrent.futures.wait(futures, return_when=concurrent.futures.FIRST_EXCEPTION)
  except KeyboardInterrupt:
    stop.set()
    pool.shutdown(wait=False, cancel_futures=True)
    raise
  failed = [e for f in futures if f.done() and not f.cancelled() and (e := f.exception()) is not None]
  if failed:
    stop.set()
    pool.shutdown(wait=True, cancel_futures=True)
    raise next((e for e in failed if not isinstance(e, _Stopped)), failed[0])
  pool.shutdown()
  return [f.result() for f in futures]


def _shut(responses: set[requests.Response]) -> None:
  """Ends the reads of `responses` that are streaming (a Ctrl-C need not wait for a stalled server's timeout)."""
  for r in list(responses):
    try:
      r.raw.shutdown()
    except (OSError, ValueError, RuntimeError):  # Already closed, or released to the pool.
      pass


def _there(root: pathlib.Path, remote: published.Remote) -> bool:
  """Whether `remote` is done: its file there, or (a zip) its folder holding a checkpoint."""
  final = root / remote.final
  return published.holds_checkpoint(final) if remote.unpack else final.is_file()


def _say(line: str) -> None:
  tqdm.tqdm.write(line, file=sys.stderr)


def download(
  remotes: Sequence[published.Remote],
  root: pathlib.Path,
  *,
  base_url: str | None = None,
  jobs: int = 4,
  retries: int = fetch.RETRIES,
  progress: bool = True,
  dry_run: bool = False,
  say: Callable[[str], None] = _say,
) -> Result:
  """Fetches `remotes` into `root` (at the mirror `base_url`, if given) and returns what was done; with `dry_run`,
  looks up each file's size (HEAD) and fetches nothing. `say` gets a line for each restart and each file there whose
  remote changed. Ctrl-C is a KeyboardInterrupt whose message says what was kept."""
  remotes = list(dict.fromkeys(remotes))  # A file named twice is fetched once, by one writer.
  root = pathlib.Path(root)
  s, stop, record = fetch.session(retries), threading.Event(), _Record(root)
  present = [r for r in remotes if _there(root, r)]
  todo = [
    Job(r, published.mirrored(r.url, base_url), root / r.path, fetched=(root / r.path).exists())
    for r in remotes
    if r not in present
  ]
  for job in todo:
    folder = root / job.remote.final
    if job.remote.unpack and folder.is_dir() and any(folder.iterdir()):
      raise DownloadError(f'{folder} is there but holds no checkpoint (no <step>/params_ema): remove it and rerun')
    if job.fetched:
      job.checked = (record.get(job.remote) or {}).get('checked')

  def look(job: Job) -> None:
    if job.fetched:
      return
    try:
      job.head = fetch.look_up(s, job.url)
    except DownloadError as error:
      if not dry_run:
        raise
      job.error = 'error: ' + str(error).replace(f'{job.url}: ', '')  # Its line names the URL.

  def since(remote: published.Remote) -> str | None:  # A file there whose remote changed since: one line.
    entry, url = record.get(remote), published.mirrored(remote.url, base_url)
    if entry is None:
      return None
    try:
      now = fetch.look_up(fetch.session(0), url)
    except DownloadError:
      return None  # Offline: what is there stays, unasked.
    validator = entry.get('validator') if entry.get('url') == url else None
    if (validator and now.validator and now.validator != validator) or (
      now.size is not None and entry.get('size') not in (None, now.size)
    ):
      return (
        f'{remote.final}: the remote changed since it was downloaded on {entry.get("fetched")} '
        f'({validator or ""} {entry.get("size")} bytes -> {now.validator or ""} {now.size} bytes); '
        'kept the downloaded one: remove it and rerun to fetch the new one'
      )
    return None

  if dry_run:
    _parallel(look, todo, jobs, stop)
    changed = [c for c in _parallel(since, present, jobs, stop) if c]
    for line in changed:
      say(line)
    return Result(root, todo, present, changed)
  with outputs.sole_writer(root, 'searchless-download', '--out'):  # One writer; its filesystem errors name the file.
    for r in present:  # What a kill after an unpack left.
      if r.unpack:
        (root / r.path).unlink(missing_ok=True)
        shutil.rmtree(root / r.final.with_name(f'.{r.final.name}.unpacking'), ignore_errors=True)
    changed = [c for c in _parallel(since, present, jobs, stop) if c]
    for line in changed:
      say(line)
    _parallel(look, todo, jobs, stop)
    for list_url in dict.fromkeys(j.remote.checksums for j in todo if j.remote.checksums and not j.fetched):
      sums_url = published.mirrored(list_url, base_url)
      sums = fetch.checksums(s, sums_url)
      for job in todo:
        if job.remote.checksums == list_url and not job.fetched:
          job.sha256, job.sums_url = sums.get(job.dest.name), sums_url
          if job.sha256 is None:
            raise DownloadError(f'{sums_url} lists no checksum for {job.dest.name}')
    have = sum(_size_of(j.part) for j in todo if not j.fetched)
    total = sum(j.size or 0 for j in todo if not j.fetched)
    bar = progress_bars.bar(
      total=total or None, initial=have, unit='B', unit_scale=True, unit_divisor=1024,
      desc=f'{len(todo)} files', disable=not progress or not todo,
    )  # fmt: skip
    lock = threading.Lock()

    def on_bytes(n: int) -> None:
      with lock:
        bar.update(n)

    live: set[requests.Response] = set()

    def get(job: Job) -> None:
      if not job.fetched:
        fetch_file(s, job, on_bytes, stop, say=say, record=record, live=live)
        job.fetched = True
      if job.remote.unpack:
        try:
          unpack(job.dest, root / job.remote.final, published.holds_checkpoint)
        except DownloadError:
          job.fetched = False
          record.put(job.remote, None)
          raise

    try:
      _parallel(get, todo, jobs, stop)
    except KeyboardInterrupt:
      _shut(live)
      done = sum(j.fetched for j in todo)
      raise KeyboardInterrupt(
        f'{done} of {len(todo)} files fetched into {root}, partial downloads kept as .part files: '
        'run the same command again to resume'
      ) from None
    finally:
      bar.close()
  return Result(root, todo, present, changed)
