"""Board records merged across datasets, one per position: what a model trains on when labels overlap.

Games that reach one position (the opening, common endgames) give it one record each, and
labels made in chunks repeat them across chunks. `merge` writes one bag holding the first
record of every position (its FEN without the move clocks, `splits.dedup_key`) in input
order, so a merge of the same inputs is the same bag.

>>> import tempfile, pathlib
>>> from searchless.core import bags
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> for name, clock in (('a', 1), ('b', 9)):
...   _ = bags.write_records(str(folder / f'{name}.bag'), 'board_value',
...                          [(f'8/8/8/8/8/8/8/K1k5 w - - {clock} 70', (), (), 0.5)])
>>> done = merge([str(folder / 'a.bag'), str(folder / 'b.bag')], folder / 'merged.bag')
>>> done['records_read'], done['distinct_boards']
(2, 1)
>>> bags.read_records(str(folder / 'merged.bag'), 'board_value')[0].fen
'8/8/8/8/8/8/8/K1k5 w - - 1 70'
"""

from collections.abc import Sequence
import os
import pathlib
import time
from typing import Any

import bagz

from searchless.core import bags
from searchless.core import records
from searchless.data import splits


def position(record: bytes) -> str:
  """The position a record (of any kind) is of: its FEN without the move clocks."""
  return splits.dedup_key(records.fen_of(record), 'position')


def merge(specs: Sequence[str], out: str | os.PathLike) -> dict[str, Any]:
  """Writes to `out` the first record of each position in the bags `specs` (in order); returns the counts.

  The bag is written under a temporary name of this process and renamed when complete: a failed or interrupted
  merge leaves the previous `out` as it was and no partial file.
  """
  out = pathlib.Path(out)
  out.parent.mkdir(parents=True, exist_ok=True)
  tmp = out.with_name(f'.{out.name}.{os.getpid()}.tmp')
  seen: set[str] = set()
  read = 0
  start = time.time()
  try:
    with bagz.Writer(str(tmp)) as writer:
      for spec in specs:
        for record in bags.reader(spec):
          read += 1
          key = position(record)
          if key not in seen:
            seen.add(key)
            writer.write(record)
    tmp.replace(out)
  finally:
    tmp.unlink(missing_ok=True)
  return {'records_read': read, 'distinct_boards': len(seen), 'seconds': round(time.time() - start, 1)}
