"""Input files of any compression: matched by glob, streamed as decompressed chunks or lines.

`match_files` expands globs (local, ``gs://``, ...; a pattern matching nothing, or a
directory, is an error naming the flag); `read_chunks` and `read_lines` decompress
by extension (.zst, .bz2, .gz, plain) in constant memory, and a truncated or corrupt
stream raises `CorruptInputError` naming the file. Remote paths go through Beam's
`FileSystems` (`searchless.plumbing.files`).
"""

import bz2
from collections.abc import Iterator, Sequence
import gzip
import os


from searchless.core import file_checks
from searchless.plumbing import errors
from searchless.plumbing import fetch
from searchless.plumbing import files

_CHUNK = 1 << 20  # Bytes read at a time.


def match_files(patterns: Sequence[str], flag: str = '--input') -> list[str]:
  """The files each glob (local, gs://, ...) matches, sorted per pattern; one matching none is an error."""
  paths = []
  for pattern in patterns:
    if '://' not in pattern and os.path.isdir(pattern):
      raise errors.NotAFile(
        f"{flag} {pattern!r} is a directory: pass its files, e.g. {flag} '{os.path.join(pattern, '*.pgn.zst')}'"
      )
    matched = files.match(pattern)
    if not matched:
      raise errors.MissingInput(f'{flag} {pattern!r} matches no file')
    paths += matched
  return paths


CorruptInputError = file_checks.CorruptInputError  # A compressed input that ends early or is corrupt.


def _stream_chunks(stream, path: str) -> Iterator[bytes]:
  try:
    while chunk := stream.read(_CHUNK):
      yield chunk
  except fetch.DownloadError:  # An http(s) input that cannot be read on: no corrupt file.
    raise
  except (EOFError, OSError, ValueError) as e:  # bz2/gzip truncation or corruption.
    raise CorruptInputError(f'{path}: compressed stream is truncated or corrupt: {e}') from None


def read_chunks(path: str) -> Iterator[bytes]:
  """Yields the decompressed bytes of `path`, chosen by its extension."""
  raw = files.open_read(path)
  with raw:
    lower = path.lower()
    if lower.endswith(('.zst', '.zstd')):
      yield from file_checks.zstd_chunks(raw, path)
    elif lower.endswith('.bz2'):
      yield from _stream_chunks(bz2.BZ2File(raw), path)
    elif lower.endswith('.gz'):
      yield from _stream_chunks(gzip.GzipFile(fileobj=raw), path)
    else:
      yield from _stream_chunks(raw, path)


def read_lines(path: str) -> Iterator[bytes]:
  """Yields the lines of `path` (decompressed by its extension), without their newline."""
  tail = b''
  try:
    for chunk in read_chunks(path):
      lines = (tail + chunk).split(b'\n')
      tail = lines.pop()
      yield from lines
  except CorruptInputError:
    if tail:
      yield tail  # What was decompressed before the corruption is still read.
    raise
  if tail:
    yield tail
