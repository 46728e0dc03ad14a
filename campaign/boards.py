"""The campaign's boards: every labelled board, one record per position (`searchless.data.distinct`), per split.

The train step trains on the merge of every label folder's train split (the shared chunks' and the campaign's);
the evaluate step measures on the merge of the shared chunks' test splits, fixed so that the curve's points
compare; the pack step packs the train merge as columns (`campaign.board_columns`) for the next lent-GPU call.
A merge, and its columns, are rebuilt only when its folders change.
"""

from collections.abc import Sequence
import json
import pathlib
from typing import Any

from searchless.data import distinct
from searchless.plumbing import atomic


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


# What a device call may carry: 64 MiB in all, less the checkout's tracked files (~15 MiB) and the wheels the
# GPU playbook installs (~20 MiB; `benchmarks/gpu_playbook.py`).
DEVICE_DATA_MIB = 28


def pack_for_device(merged: dict[str, Any], out_dir: pathlib.Path, max_mib: float = DEVICE_DATA_MIB) -> dict[str, Any]:
  """The train merge `merged` (`merge_boards`) as columns in OUT_DIR/data, as many boards as fit in `max_mib`: the
  next lent-GPU call's ``--data``. Repacked only when the merge's folders or the budget change; returns (and keeps in
  OUT_DIR/data.json) the columns' counts and size."""
  from campaign import board_columns

  index = out_dir / 'data.json'
  wanted = {'folders': merged['folders'], 'max_mib': max_mib}
  if index.exists():
    done = json.loads(index.read_text())
    if {k: done.get(k) for k in wanted} == wanted:
      return done
  out_dir.mkdir(parents=True, exist_ok=True)
  meta = board_columns.pack_within(merged['bag'], out_dir / 'data', int(max_mib * 2**20), workers=1)
  done = {**wanted, 'data': str(out_dir / 'data'), **meta, 'distinct_boards': merged['distinct_boards']}
  atomic.write_text(index, json.dumps(done, indent=2) + '\n')
  return done
