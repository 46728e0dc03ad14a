"""What a downloaded file with no published checksum is checked for: it is the kind of file its name says, whole.

pip and pooch refuse a file whose hash is wrong; where nothing publishes a hash,
the file's own format still says much: `check` reads the file at a path as its
name says and returns what checked it, or raises `BadFormat` saying why not.

* any file: not an HTML, XML or JSON error page (what a proxy or a mirror answers
  with a 200 as readily as with an error status);
* ``.zst``: decompresses to its end, each frame complete, with the frame checksums
  verified where the frames have them (``zstd -t``); a ``.csv.zst`` has its header;
* ``.zip``: every member passes its CRC test (``zipfile.testzip``);
* ``.csv``: the expected header (`CSV_COLUMNS`), and it ends with a whole line;
* ``.bag``, ``.bagz``: opens with ``bagz``, and its index is consistent (record ends
  in order, the last one where the index starts).

`zstd_chunks` is the one frame-by-frame zstd reader that sees a truncated stream
(``zstandard``'s ``stream_reader`` ends silently there); `searchless.data.streams` reads inputs with it.

>>> looks_like_error_page(b'  <!DOCTYPE html><html><body>Not Found</body></html>')
True
>>> looks_like_error_page(b'PuzzleId,FEN,Moves,Rating\\n')
False
"""

from collections.abc import Iterator
import os
from typing import BinaryIO
import zipfile
import zlib

import bagz
import numpy as np
import zstandard

from searchless.plumbing import errors

_CHUNK = 1 << 20  # Bytes read at a time.
_FIRST = 512  # Bytes looked at for an error page, and shown of one.
# The columns a puzzle CSV must have, by its name (as `searchless.data.puzzles` reads it); another CSV: a header.
CSV_COLUMNS = {
  'puzzles.csv': ('PuzzleId', 'PGN', 'Moves', 'Rating'),  # ChessBench's 10k puzzles.
  'lichess_db_puzzle.csv': ('PuzzleId', 'FEN', 'Moves', 'Rating'),  # Lichess's puzzle database.
}
_ERROR_PAGES = (b'<!doctype', b'<html', b'<head', b'<body', b'<?xml', b'{')  # What error answers start with.


class BadFormat(ValueError):
  """A file that is not what its name says, or not whole: the message says why (no path: the caller names it)."""


class CorruptInputError(errors.UserError, OSError):
  """A compressed input ends early or is corrupt; the message names the file."""


def looks_like_error_page(first: bytes) -> bool:
  """Whether a file that starts with `first` is an HTML, XML or JSON document (no data file of ours is one)."""
  start = first.lstrip(b'\xef\xbb\xbf \t\r\n')[:16].lower()
  return start.startswith(_ERROR_PAGES)


def shown(first: bytes, limit: int = 60) -> str:
  """The first bytes of a file, short and on one line, for a message."""
  text = first[:limit].decode('utf-8', 'backslashreplace')
  return repr(' '.join(text.split()) + ('...' if len(first) > limit else ''))


def zstd_chunks(raw: BinaryIO, path: str) -> Iterator[bytes]:
  """The decompressed bytes of the zstd stream `raw` (a binary file), frame by frame, each frame's checksum verified
  where it has one; a `CorruptInputError` naming `path` where the stream is corrupt or ends inside a frame."""
  dctx = zstandard.ZstdDecompressor(max_window_size=2**31)
  dobj = dctx.decompressobj()
  pending = False
  while chunk := raw.read(_CHUNK):
    while chunk:
      try:
        out = dobj.decompress(chunk)
      except zstandard.ZstdError as e:
        raise CorruptInputError(f'{path}: corrupt zstd data: {e}') from None
      pending = True
      if out:
        yield out
      if dobj.eof:
        chunk, dobj, pending = dobj.unused_data, dctx.decompressobj(), False
      else:
        chunk = b''
  if pending:
    raise CorruptInputError(f'{path}: zstd stream is truncated (the file ends inside a frame)')


def check(path: str | os.PathLike, name: str) -> str | None:
  """Checks the file at `path` as its `name` says (see the module's docstring); returns what checked it ('zstd
  frames' ...), None where nothing but the error-page test applies (a .pgn). A `BadFormat` says what is wrong."""
  with open(path, 'rb') as f:
    first = f.read(_FIRST)
  if looks_like_error_page(first):
    raise BadFormat(f'an error page, not the file: {shown(first)}')
  if name.endswith('.zst'):
    return _zstd(path, name.removesuffix('.zst'))
  if name.endswith('.zip'):
    return _zip(path)
  if name.endswith('.csv'):
    with open(path, 'rb') as f:
      _csv_header(f.readline(1 << 16), name)
      f.seek(0, os.SEEK_END)
      f.seek(max(0, f.tell() - 1))
      if f.read(1) != b'\n':
        raise BadFormat('the CSV ends inside a line (cut short)')
    return 'csv header'
  if name.endswith(('.bag', '.bagz')):
    return _bag(path)
  return None


def _csv_header(line: bytes, name: str) -> None:
  columns = line.decode('utf-8', 'replace').strip().split(',')
  wanted = CSV_COLUMNS.get(name)
  if not line.endswith(b'\n') or (wanted and not set(wanted) <= set(columns)) or not all(columns):
    with_columns = f' (with {", ".join(wanted)})' if wanted else ''
    raise BadFormat(f'not the expected CSV header{with_columns}: {shown(line)}')


def _zstd(path: str | os.PathLike, inner: str) -> str:
  head = b''
  with open(path, 'rb') as f:
    try:
      for out in zstd_chunks(f, os.fspath(path)):
        if len(head) < 1 << 16 and inner.endswith('.csv'):
          head += out[: (1 << 16) - len(head)]
    except CorruptInputError as error:
      raise BadFormat(str(error).split(': ', 1)[1]) from None
  if inner.endswith('.csv'):
    _csv_header(head.split(b'\n', 1)[0] + b'\n' if b'\n' in head else head, inner)
  return 'zstd frames read to the end'


def _zip(path: str | os.PathLike) -> str:
  try:
    with zipfile.ZipFile(path) as z:
      bad = z.testzip()
  except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as error:
    raise BadFormat(f'not a whole zip ({error})') from None
  if bad is not None:
    raise BadFormat(f'the zip member {bad} fails its CRC')
  return 'zip CRCs'


def _bag(path: str | os.PathLike) -> str:
  try:
    reader = bagz.Reader(os.fspath(path))
  except ValueError as error:
    raise BadFormat(f'not a bag: {error}') from None
  size = os.path.getsize(path)
  with open(path, 'rb') as f:
    f.seek(size - 8)
    start = int.from_bytes(f.read(8), 'little')  # Where the index starts: its last entry.
    f.seek(start)
    ends = np.frombuffer(f.read(size - start), '<u8')
  if len(ends) != len(reader) or (len(ends) and (bool(np.any(ends[1:] < ends[:-1])) or int(ends[-1]) != start)):
    raise BadFormat('its index is inconsistent (record ends out of order or past the records)')
  return 'bag index'
