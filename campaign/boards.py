"""The campaign's boards: every labelled board, one record per position (`searchless.data.distinct`), per split.

The train step trains on the merge of every label folder's train split (the shared chunks' and the campaign's);
the evaluate step measures on the merge of the shared chunks' test splits, fixed so that the curve's points
compare. A merge is rebuilt only when its folders change.
"""

from collections.abc import Sequence
import json
import pathlib
from typing import Any

from searchless.core import atomic
from searchless.data import distinct


def label_folders(shared: pathlib.Path, workdir: pathlib.Path | None = None) -> list[pathlib.Path]:
  """The shared chunks' label folders, then (with `workdir`) the campaign's finished ones, in name order."""
  shared_dirs = sorted(p.parent for p in (shared / 'data' / 'labels').glob('chunk_*/manifest.json'))
  if workdir is None:
    return shared_dirs
  return shared_dirs + sorted(p.parent for p in (workdir / 'labels').glob('*/manifest.json'))


def merge_boards(folders: Sequence[pathlib.Path], out_dir: pathlib.Path, split: str) -> dict[str, Any]:
  """One bag of the distinct boards of `split` in `folders` (`distinct.merge`: first label wins); rebuilt only when
  `folders` change. Returns (and keeps in OUT_DIR/SPLIT.json) the bag's path, the folders and the counts."""
  from searchless.core import bags

  index = out_dir / f'{split}.json'
  names = [str(f) for f in folders]
  if index.exists() and (done := json.loads(index.read_text()))['folders'] == names:
    return done
  path = out_dir / f'{split}_board_value_data.bag'
  counts = distinct.merge([bags.find(str(folder / split), 'board_value') for folder in folders], path)
  done = {'bag': str(path), 'folders': names, **counts}
  atomic.write_text(index, json.dumps(done, indent=2) + '\n')
  return done
