"""Downloads that survive a network and a server whose files change: resumed only onto the same file, checked,
and all or nothing under the final name.

`download(remotes, root)` fetches `published.Remote`s into ROOT, several at once
(`jobs`) under one progress bar, each by `file_download.FileDownload` (its
``.part``, resumed only onto the same file, renamed to its final name only once
whole and checked: by a published checksum, else by its format). Where a file
has no published checksum it is reported `UNVERIFIED`, format checked.
``downloads.json`` in ROOT (`RECORD`) keeps each file's URL, size, validator,
sha256 (computed here) and what checked it; a rerun that finds a file there asks
the server (HEAD) whether it changed since, and says so (`Result.changed`). A zip
is then unpacked into a folder of its name, which appears whole, and removed; a
zip that will not unpack is removed, to be fetched again. A checkpoint's folder
is there only once it holds a checkpoint (`published.holds_checkpoint`).

Failures worth another try (`fetch.TRANSIENT`) are tried again `retries` times, in
one layer, with `fetch.backoff` (a server that cannot be reached: reported within
about a minute by default, `fetch.give_up_after`); a download that brings new bytes
starts its count again. Anything else is a `DownloadError`, one line naming the URL
or the file. One writer per data folder, whose filesystem errors (a full disk) name
the file and ``--out`` (`outputs.sole_writer`): ``downloads.json``, what is there
and what is still to fetch are read once its lock is held.
"""

from collections.abc import Callable, Sequence
import concurrent.futures
import dataclasses
import json
import os
import pathlib
import shutil
import sys
import threading
from typing import TypeVar
import zipfile

import requests
import tqdm

from searchless.core import file_download
from searchless.core import published
from searchless.core.file_download import Job
from searchless.core.file_download import Stopped
from searchless.plumbing import atomic
from searchless.plumbing import fetch
from searchless.plumbing import outputs
from searchless.plumbing import progress_bars
from searchless.plumbing.fetch import DownloadError

RECORD = 'downloads.json'  # In the data folder: what was downloaded, from where, and its sha256.
UNVERIFIED = 'unverified (no checksum published)'
FORMAT_CHECKED = 'format checked'  # Said of the unverified files whose format check passed (`file_checks`).
_T = TypeVar('_T')
_R = TypeVar('_R')


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
    """Records `entry` for `remote`'s file (None: forgets it), whole or not at all (`atomic`)."""
    with self._lock:
      if entry is None and self.files.pop(remote.path.as_posix(), None) is None:
        return
      if entry is not None:
        self.files[remote.path.as_posix()] = entry
      atomic.write_text(self.path, json.dumps({'files': self.files}, indent=1, sort_keys=True))


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
      raise Stopped
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
    raise next((e for e in failed if not isinstance(e, Stopped)), failed[0])
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


class _Downloads:
  """One `download`: what is there and what to fetch, read when made (under the folder's lock, but for a dry
  run, which writes nothing), then its steps: `look` up each file, say what `changed` since it was kept, read the
  published `checksums`, `fetch` the files."""

  def __init__(
    self, remotes: Sequence[published.Remote], root: pathlib.Path, base_url: str | None, s: fetch.Session, jobs: int,
    say: Callable[[str], None],
  ):  # fmt: skip
    self.root, self.base_url, self.s, self.jobs, self.say = root, base_url, s, jobs, say
    self.stop, self.record = threading.Event(), _Record(root)
    self.present = [r for r in remotes if _there(root, r)]
    self.todo = [
      Job(r, published.mirrored(r.url, base_url), root / r.path, fetched=(root / r.path).exists())
      for r in remotes
      if r not in self.present
    ]
    for job in self.todo:
      folder = root / job.remote.final
      if job.remote.unpack and folder.is_dir() and any(folder.iterdir()):
        raise DownloadError(f'{folder} is there but holds no checkpoint (no <step>/params_ema): remove it and rerun')
      if job.fetched:
        entry = self.record.get(job.remote) or {}
        job.checked, job.format = entry.get('checked'), entry.get('format')

  def look(self, dry_run: bool) -> None:
    """What the server says of each file still to fetch (`Job.head`); a dry run notes a failure in `Job.error`."""

    def look(job: Job) -> None:
      if job.fetched:
        return
      try:
        job.head = fetch.look_up(self.s, job.url)
      except DownloadError as error:
        if not dry_run:
          raise
        job.error = 'error: ' + str(error).replace(f'{job.url}: ', '')  # Its line names the URL.

    _parallel(look, self.todo, self.jobs, self.stop)

  def changed(self) -> list[str]:
    """One line (said, and returned) for each file there whose remote changed since it was downloaded."""
    lines = [c for c in _parallel(self._since, self.present, self.jobs, self.stop) if c]
    for line in lines:
      self.say(line)
    return lines

  def _since(self, remote: published.Remote) -> str | None:
    entry, url = self.record.get(remote), published.mirrored(remote.url, self.base_url)
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

  def checksums(self) -> None:
    """The published sha256 of each file still to fetch whose remote names a list."""
    todo = [j for j in self.todo if j.remote.checksums and not j.fetched]
    for list_url in dict.fromkeys(j.remote.checksums for j in todo if j.remote.checksums):
      sums_url = published.mirrored(list_url, self.base_url)
      sums = fetch.checksums(self.s, sums_url)
      for job in (j for j in todo if j.remote.checksums == list_url):
        job.sha256, job.sums_url = sums.get(job.dest.name), sums_url
        if job.sha256 is None:
          raise DownloadError(f'{sums_url} lists no checksum for {job.dest.name}')

  def fetch(self, progress: bool) -> None:
    """Fetches (and unpacks) every file still to do under one progress bar. Ctrl-C is a KeyboardInterrupt whose
    message says what was kept."""
    todo = self.todo
    have = sum(file_download.size_of(j.part) for j in todo if not j.fetched)
    total = sum(j.size or 0 for j in todo if not j.fetched)
    bar = progress_bars.bar(
      total=total or None, initial=have, unit='B', unit_scale=True, unit_divisor=1024,
      desc=f'{len(todo)} files', disable=not progress or not todo,
    )  # fmt: skip
    lock, live = threading.Lock(), set[requests.Response]()

    def on_bytes(n: int) -> None:
      with lock:
        bar.update(n)

    def get(job: Job) -> None:
      if not job.fetched:
        file_download.FileDownload(self.s, job, on_bytes, self.stop, say=self.say, record=self.record, live=live).run()
        job.fetched = True
      if job.remote.unpack:
        try:
          unpack(job.dest, self.root / job.remote.final, published.holds_checkpoint)
        except DownloadError:
          job.fetched = False
          self.record.put(job.remote, None)
          raise

    try:
      _parallel(get, todo, self.jobs, self.stop)
    except KeyboardInterrupt:
      _shut(live)
      done = sum(j.fetched for j in todo)
      raise KeyboardInterrupt(
        f'{done} of {len(todo)} files fetched into {self.root}, partial downloads kept as .part files: '
        'run the same command again to resume'
      ) from None
    finally:
      bar.close()


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
  root, s = pathlib.Path(root), fetch.session(retries)
  if dry_run:
    run = _Downloads(remotes, root, base_url, s, jobs, say)
    run.look(dry_run=True)
    return Result(root, run.todo, run.present, run.changed())
  with outputs.sole_writer(root, 'searchless-download', '--out'):  # One writer; its filesystem errors name the file.
    run = _Downloads(remotes, root, base_url, s, jobs, say)  # What is there, read under the lock.
    for r in run.present:  # What a kill after an unpack left.
      if r.unpack:
        (root / r.path).unlink(missing_ok=True)
        shutil.rmtree(root / r.final.with_name(f'.{r.final.name}.unpacking'), ignore_errors=True)
    changed = run.changed()
    run.look(dry_run=False)
    run.checksums()
    run.fetch(progress)
  return Result(root, run.todo, run.present, changed)
