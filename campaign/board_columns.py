"""Board records as three compressed columns: a million labelled boards small enough to carry.

A lent GPU machine takes at most 64 MiB of files in a call. The campaign's merged bag of
1M board_value records is 434 MB, 76 MB as xz; as columns (the FENs, the moves, and each
value's return bucket, one byte) it is 38 MB. A model trains on exactly the same targets: the
training data reads only bucket indices (`searchless.data.sequences`, `searchless.data.packing`:
`values.win_probabilities_to_buckets`), and `unpack` writes each value as the centre of its
bucket, which falls in that bucket again. That holds for a model of the same ``num_return_buckets``
as the columns (or one that divides it, whose buckets are unions of theirs); for any other, pack
again with its count. What changes is the value inside a bucket, which an evaluation against these
records would read: evaluate on the original records.

>>> import tempfile, pathlib
>>> tmp = pathlib.Path(tempfile.mkdtemp())
>>> board = records.BoardValue('7k/8/8/8/8/8/8/K7 w - - 0 1', ('a1b1', 'a1a2', 'a1b2'), (0.5, 0.01, 0.999), 0.999)
>>> with bagz.Writer(str(tmp / 'in.bag')) as w:
...   w.write(records.encode(records.BOARD_VALUE, board))
>>> pack(tmp / 'in.bag', tmp / 'columns', num_buckets=4)
{'boards': 1, 'num_buckets': 4, 'values': 4}
>>> unpack(tmp / 'columns', tmp / 'out.bag')
1
>>> back = records.decode(records.BOARD_VALUE, bagz.Reader(str(tmp / 'out.bag'))[0])
>>> back.fen, back.moves
('7k/8/8/8/8/8/8/K7 w - - 0 1', ('a1b1', 'a1a2', 'a1b2'))
>>> back.win_probs, back.state_value
((0.375, 0.125, 0.875), 0.875)
"""

from collections.abc import Sequence
import functools
import json
import lzma
import multiprocessing
import os
import pathlib
import shutil
from typing import Any

import bagz
import numpy as np

from searchless.core import codecs
from searchless.core import records
from searchless.core import values
from searchless.plumbing import errors

COLUMNS = ('fens', 'moves', 'buckets')  # Each DIR/NAME.xz: FENs and moves (space-separated) one line a board; bytes.
META = 'columns.json'  # Boards, buckets and values: what unpack checks the columns against.


def pack(
  src: str | os.PathLike,
  out: str | os.PathLike,
  *,
  num_buckets: int = 128,
  workers: int = 3,
  max_boards: int | None = None,
) -> dict[str, int]:
  """board_value records of the bag `src` (its first `max_boards`, default all) -> the columns in the folder `out`;
  returns its META.

  `num_buckets`: the models' ``num_return_buckets`` (the paper's 128). `workers`: processes compressing the
  columns (one each at most).
  """
  if num_buckets > 256:
    raise errors.BadInput(f'num_buckets={num_buckets}: a bucket is stored in one byte (at most 256)')
  edges, _ = values.uniform_buckets(num_buckets)
  reader = bagz.Reader(str(src))
  fens, moves, buckets = [], [], []
  for i in range(len(reader) if max_boards is None else min(max_boards, len(reader))):
    try:
      (board,) = codecs.decode_boards([reader[i]])
      codecs.check_boards([board])  # NaN or outside [0, 1]: the loader refuses it, so pack does too.
    except codecs.BadRecord as e:
      raise errors.BadInput(f'{src}: record {i}: {e.reason}') from None
    if len(board.win_probs) != len(board.moves):
      raise errors.BadInput(f'{src}: record {i}: {len(board.moves)} moves but {len(board.win_probs)} values')
    if any(m.split(' ') != [m] or not m or '\n' in m for m in board.moves) or '\n' in board.fen:
      raise errors.BadInput(f'{src}: record {i}: a move or FEN with a separator in it (a space or a newline)')
    fens.append(board.fen)
    moves.append(' '.join(board.moves))
    buckets.append(values.win_probabilities_to_buckets([*board.win_probs, board.state_value], edges).astype(np.uint8))
  data = {
    'fens': '\n'.join(fens).encode(),
    'moves': '\n'.join(moves).encode(),
    'buckets': np.concatenate(buckets).tobytes() if buckets else b'',
  }
  out = pathlib.Path(out)
  out.mkdir(parents=True, exist_ok=True)
  items = [(name, data[name]) for name in COLUMNS]
  if workers > 1:
    with multiprocessing.get_context('spawn').Pool(min(workers, len(items))) as pool:
      blobs = pool.map(_compress, items)
  else:
    blobs = [_compress(item) for item in items]
  for name, blob in blobs:
    (out / f'{name}.xz').write_bytes(blob)
  meta = {'boards': len(fens), 'num_buckets': num_buckets, 'values': len(data['buckets'])}
  (out / META).write_text(json.dumps(meta) + '\n')
  return meta


def pack_within(src: str | os.PathLike, out: str | os.PathLike, max_bytes: int, **kwargs: Any) -> dict[str, int]:
  """`pack`, of as many of the first boards of `src` as fit in `max_bytes` (a device call's carry); returns META
  with the folder's ``bytes``. `out` is replaced whole, or left as it was when this fails."""
  out = pathlib.Path(out)
  tmp = out.with_name(out.name + '.tmp')
  shutil.rmtree(tmp, ignore_errors=True)
  size = lambda: sum(f.stat().st_size for f in tmp.iterdir())
  meta = pack(src, tmp, **kwargs)
  while (total := size()) > max_bytes and meta['boards']:  # Columns compress about evenly: scale, with a margin.
    meta = pack(src, tmp, max_boards=int(meta['boards'] * max_bytes / total * 0.98), **kwargs)
  shutil.rmtree(out, ignore_errors=True)
  tmp.rename(out)
  return {**meta, 'bytes': total}


def unpack(src: str | os.PathLike, dst: str | os.PathLike, *, workers: int = 0) -> int:
  """The columns in the folder `src` -> a bag `dst` of board_value records, each value its bucket's centre.

  Returns the number of boards. `workers`: processes encoding records (0: this one).
  """
  src = pathlib.Path(src)
  meta = json.loads((src / META).read_text())
  text = {name: lzma.decompress((src / f'{name}.xz').read_bytes()) for name in COLUMNS}
  fens = text['fens'].decode().split('\n') if meta['boards'] else []
  moves = (
    [tuple(line.split(' ')) if line else () for line in text['moves'].decode().split('\n')] if meta['boards'] else []
  )
  buckets = text['buckets']
  if buckets and max(buckets) >= meta['num_buckets']:
    raise errors.BadInput(
      f'{src}: a bucket {max(buckets)} in buckets.xz, where {META} says {meta["num_buckets"]} buckets'
    )
  if not len(fens) == len(moves) == meta['boards'] or len(buckets) != meta['values']:
    raise errors.BadInput(
      f'{src}: {len(fens)} FENs, {len(moves)} move lines and {len(buckets)} values, where '
      f'{META} says {meta["boards"]} boards and {meta["values"]} values'
    )
  items, pos = [], 0
  for fen, board_moves in zip(fens, moves):
    items.append((fen, board_moves, buckets[pos : pos + len(board_moves) + 1], meta['num_buckets']))
    pos += len(board_moves) + 1
  if pos != len(buckets):
    raise errors.BadInput(f'{src}: the moves need {pos} values, buckets.xz holds {len(buckets)}')
  with bagz.Writer(str(dst)) as writer:
    if workers:
      with multiprocessing.get_context('spawn').Pool(workers) as pool:
        for blob in pool.imap(_encode, items, chunksize=2000):
          writer.write(blob)
    else:
      for item in items:
        writer.write(_encode(item))
  return len(items)


def _compress(item: tuple[str, bytes]) -> tuple[str, bytes]:
  return item[0], lzma.compress(item[1], preset=9)


@functools.cache
def _centres(num_buckets: int) -> np.ndarray:
  return values.uniform_buckets(num_buckets)[1]


def _encode(item: tuple[str, Sequence[str], bytes, int]) -> bytes:
  fen, moves, buckets, num_buckets = item
  centres = _centres(num_buckets)[np.frombuffer(buckets, dtype=np.uint8)]  # [moves + 1]
  return records.encode(
    records.BOARD_VALUE,
    records.BoardValue(fen, tuple(moves), tuple(float(c) for c in centres[:-1]), float(centres[-1])),
  )
