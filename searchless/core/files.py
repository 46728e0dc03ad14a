"""Paths, local or remote: local ones through the OS, remote ones (``gs://``, ``s3://``, ...) through Beam.

Only a remote path imports Apache Beam (its ``FileSystems``, with the matching
Beam extra installed), so reading local data needs no Beam.

>>> import os, tempfile
>>> folder = tempfile.mkdtemp()
>>> _ = open(join(folder, 'b.txt'), 'w').write('x'); _ = open(join(folder, 'a.txt'), 'w').write('y')
>>> [os.path.basename(p) for p in match(join(folder, '*.txt'))], exists(join(folder, 'c.txt'))
(['a.txt', 'b.txt'], False)
"""

import glob
import os
from typing import Any, BinaryIO


def is_remote(path: str) -> bool:
  return '://' in path


def _filesystems() -> Any:
  from apache_beam.io.filesystems import FileSystems  # Remote paths only.

  return FileSystems


def join(directory: str, name: str) -> str:
  return _filesystems().join(directory, name) if is_remote(directory) else os.path.join(directory, name)


def exists(path: str) -> bool:
  return _filesystems().exists(path) if is_remote(path) else os.path.exists(path)


def match(pattern: str) -> list[str]:
  """The paths the glob `pattern` matches, sorted (a pattern without wildcards: itself, if it exists)."""
  if is_remote(pattern):
    return sorted(m.path for m in _filesystems().match([pattern])[0].metadata_list)
  return sorted(glob.glob(pattern))


def open_read(path: str) -> BinaryIO:
  """`path`'s bytes as they are stored (no decompression)."""
  if is_remote(path):
    from apache_beam.io.filesystem import CompressionTypes

    return _filesystems().open(path, compression_type=CompressionTypes.UNCOMPRESSED)
  return open(path, 'rb')
