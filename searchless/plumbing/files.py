"""Paths, local or remote: local ones through the OS, remote ones (``gs://``, ``s3://``, ...) through Beam, and
``http(s)://`` inputs streamed as they are read (`remote_file.RemoteFile`: nothing stored, a drop resumed).

Only a remote path imports Apache Beam (its ``FileSystems``, with the matching
Beam extra installed), so reading local data needs no Beam. An http(s) URL names
one file (no wildcards).

>>> import os, tempfile
>>> folder = tempfile.mkdtemp()
>>> _ = open(join(folder, 'b.txt'), 'w').write('x'); _ = open(join(folder, 'a.txt'), 'w').write('y')
>>> [os.path.basename(p) for p in match(join(folder, '*.txt'))], exists(join(folder, 'c.txt'))
(['a.txt', 'b.txt'], False)
"""

import glob
import io
import os
from typing import Any, BinaryIO

from searchless.plumbing import errors
from searchless.plumbing import fetch
from searchless.plumbing import remote_file


def is_remote(path: str) -> bool:
  return '://' in path


def is_http(path: str) -> bool:
  return path.startswith(('http://', 'https://'))


def _filesystems() -> Any:
  from apache_beam.io.filesystems import FileSystems  # Remote paths only.

  return FileSystems


def join(directory: str, name: str) -> str:
  return _filesystems().join(directory, name) if is_remote(directory) else os.path.join(directory, name)


def exists(path: str) -> bool:
  if is_http(path):
    try:
      fetch.look_up(fetch.session(retries=2), path)
    except fetch.DownloadError as error:
      if error.status == 404:
        return False
      raise
    return True
  return _filesystems().exists(path) if is_remote(path) else os.path.exists(path)


def size(path: str) -> int:
  """`path`'s size in bytes, as stored (an http(s) server that gives no Content-Length: 0)."""
  if is_http(path):
    return fetch.look_up(fetch.session(retries=2), path)[0] or 0
  if is_remote(path):
    return sum(m.size_in_bytes for m in _filesystems().match([path])[0].metadata_list)
  return os.path.getsize(path)


def match(pattern: str) -> list[str]:
  """The paths the glob `pattern` matches, sorted (a pattern without wildcards: itself, if it exists)."""
  if is_http(pattern):
    if any(c in pattern for c in '*?['):
      raise errors.BadInput(f'{pattern}: an http(s) URL names one file; wildcards need a local or gs:// path')
    return [pattern] if exists(pattern) else []
  if is_remote(pattern):
    return sorted(m.path for m in _filesystems().match([pattern])[0].metadata_list)
  return sorted(glob.glob(pattern))


def open_read(path: str) -> BinaryIO:
  """`path`'s bytes as they are stored (no decompression)."""
  if is_http(path):
    return io.BufferedReader(remote_file.RemoteFile(path), fetch.CHUNK)
  if is_remote(path):
    from apache_beam.io.filesystem import CompressionTypes

    return _filesystems().open(path, compression_type=CompressionTypes.UNCOMPRESSED)
  return open(path, 'rb')
