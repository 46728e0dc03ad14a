"""The published files: ChessBench's checkpoints and data, Lichess's dumps. Where each comes from, where it lands.

A *target* names one source's files (`TARGETS`); its *items* choose among them.
`remotes(target, items)` lists the files as `Remote`s: the URL, the path under
the data folder, how it is checked and whether it is unpacked. A path mirrors the
URL's, under the source's folder::

    https://storage.googleapis.com/searchless_chess/checkpoints/270M.zip -> DATA/chessbench/checkpoints/270M/
    https://database.lichess.org/standard/lichess_db_standard_rated_2024-01.pgn.zst
                                           -> DATA/lichess/standard/lichess_db_standard_rated_2024-01.pgn.zst

DATA is `data_root()`: ``$SEARCHLESS_DATA``, else the user's cache folder. A
downloaded checkpoint goes by a name wherever a checkpoint goes (`checkpoint_folder`):

>>> [r.url.rsplit('/', 1)[1] for r in remotes('chessbench-checkpoints', ['270M'])]
['270M.zip']
>>> checkpoint_folder('chessbench-270M').relative_to(data_root()).as_posix()
'chessbench/checkpoints/270M'
>>> mirrored('https://storage.googleapis.com/searchless_chess/data/puzzles.csv', 'http://127.0.0.1:8000/')
'http://127.0.0.1:8000/searchless_chess/data/puzzles.csv'
>>> select_shards('0-2,10', 2148)
[0, 1, 2, 10]
"""

from collections.abc import Sequence
import dataclasses
import os
import pathlib
import re
import urllib.parse

from searchless.plumbing import errors

DATA_ENV = 'SEARCHLESS_DATA'  # The data folder (default: the user's cache folder, `data_root`).
BASE_URL_ENV = 'SEARCHLESS_BASE_URL'  # A mirror for every target (`mirrored`): `--base_url`'s default.
CHESSBENCH = 'https://storage.googleapis.com/searchless_chess'  # The reference's bucket (its download.sh files).
LICHESS = 'https://database.lichess.org'
# The source of each URL prefix -> the folder under the data folder its files land in.
_SOURCES = {CHESSBENCH: 'chessbench', LICHESS: 'lichess'}

# The published checkpoints (the reference's checkpoints/download.sh) -> the policy each was trained for.
CHECKPOINTS = {
  '9M': 'action_value',
  '9M_state_value': 'state_value',
  '9M_behavioral_cloning': 'behavioral_cloning',
  '136M': 'action_value',
  '270M': 'action_value',
}
NAME_PREFIX = 'chessbench-'  # A downloaded checkpoint's name: 'chessbench-270M'.
TRAIN_SHARDS = 2148  # The action-value training set's bag files (1.1 TB in all).
_BAGS = ('action_value', 'behavioral_cloning', 'state_value')
# chessbench-data's items -> their paths under the bucket's data/ (train: `TRAIN_SHARDS` shards, `--shards`).
DATA_ITEMS = {
  'puzzles': ['puzzles.csv'],  # The paper's 10k Lichess puzzles.
  'openings': ['eco_openings.pgn'],
  'test': [f'test/{bag}_data.bag' for bag in _BAGS],
  'train': [],
  'train_behavioral_cloning': ['train/behavioral_cloning_data.bag'],
  'train_state_value': ['train/state_value_data.bag'],
}
DEFAULT_DATA_ITEMS = ('puzzles', 'openings', 'test')  # What evaluation needs: 150 MB.
LICHESS_SUMS = 'standard/sha256sums.txt'  # Lichess's checksum list of the monthly game dumps.
_MONTH = re.compile(r'\d{4}-(0[1-9]|1[0-2])')

# Each target -> what its items are (for --help and errors).
TARGETS = {
  'chessbench-checkpoints': f'the published models: {", ".join(CHECKPOINTS)} (no item: all)',
  'chessbench-data': f'{", ".join(DATA_ITEMS)} (no item: {" ".join(DEFAULT_DATA_ITEMS)}; train takes --shards)',
  'lichess-games': 'months YYYY-MM of Lichess standard rated games (checked against Lichess sha256sums.txt)',
  'lichess-puzzles': 'the Lichess puzzle database (lichess_db_puzzle.csv.zst); no items',
  'lichess-evals': "Lichess's evaluation database (lichess_db_eval.jsonl.zst, for searchless-import); no items",
}


@dataclasses.dataclass(frozen=True)
class Remote:
  """One published file: `url` (as published), `path` (relative to the data folder), `checksums` (the URL of a
  ``sha256  name`` list that names it, or None), `unpack` (a zip unpacked into the folder `path` less ``.zip``)."""

  url: str
  path: pathlib.PurePosixPath
  checksums: str | None = None
  unpack: bool = False

  @property
  def final(self) -> pathlib.PurePosixPath:
    """What is there once done: the file, or the folder a zip unpacks into."""
    return self.path.with_suffix('') if self.unpack else self.path


def data_root() -> pathlib.Path:
  """The data folder: ``$SEARCHLESS_DATA``, else ``$XDG_CACHE_HOME/searchless``, else ``~/.cache/searchless``."""
  if folder := os.environ.get(DATA_ENV):
    return pathlib.Path(folder).expanduser().resolve()
  cache = os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')
  return pathlib.Path(cache).resolve() / 'searchless'


def mirrored(url: str, base_url: str | None) -> str:
  """`url` with its scheme and host replaced by `base_url`'s (its path kept); `url` itself when None or ''."""
  if not base_url:
    return url
  base = urllib.parse.urlsplit(base_url)
  if base.scheme not in ('http', 'https') or not base.netloc:
    raise errors.BadInput(f'--base_url {base_url!r} is not an http(s):// URL')
  return base_url.rstrip('/') + urllib.parse.urlsplit(url).path


def _remote(url: str, **kwargs) -> Remote:
  prefix = next(p for p in _SOURCES if url.startswith(p + '/'))
  return Remote(url, pathlib.PurePosixPath(_SOURCES[prefix], url[len(prefix) + 1 :]), **kwargs)


def select_shards(text: str, total: int = TRAIN_SHARDS) -> list[int]:
  """`--shards`: a count N (the first N) or ranges ``A-B`` (inclusive) and indices, comma-separated."""
  parts = [p.strip() for p in text.split(',') if p.strip()]
  if len(parts) == 1 and parts[0].isdigit() and '-' not in text:
    count = int(parts[0])
    if not 0 < count <= total:
      raise errors.BadInput(f'--shards {text}: a count from 1 to {total}')
    return list(range(count))
  chosen: set[int] = set()
  for part in parts:
    first, dash, last = part.partition('-')
    if not first.isdigit() or (dash and not last.isdigit()):
      raise errors.BadInput(f'--shards {text!r}: expected a count N, or ranges such as 0-99,200-299')
    lo, hi = int(first), int(last) if dash else int(first)
    if not lo <= hi < total:
      raise errors.BadInput(f'--shards {text!r}: {part} is not a range within 0-{total - 1}')
    chosen.update(range(lo, hi + 1))
  if not chosen:
    raise errors.BadInput(f'--shards {text!r}: no shard')
  return sorted(chosen)


def remotes(target: str, items: Sequence[str] = (), *, shards: str | None = None) -> list[Remote]:
  """The files `target` (a key of `TARGETS`) names with `items` (none: its default), in order."""
  if target not in TARGETS:
    raise errors.BadInput(f'unknown target {target!r}: expected one of {", ".join(TARGETS)}')
  if shards is not None and (target != 'chessbench-data' or 'train' not in items):
    raise errors.BadInput('--shards chooses the shards of the chessbench-data item train: name train')
  unknown = lambda known: [i for i in items if i not in known]
  if target == 'chessbench-checkpoints':
    if bad := unknown(CHECKPOINTS):
      raise errors.BadInput(f'{target}: unknown item(s) {bad}; expected {", ".join(CHECKPOINTS)}')
    return [_remote(f'{CHESSBENCH}/checkpoints/{m}.zip', unpack=True) for m in dict.fromkeys(items or CHECKPOINTS)]
  if target == 'chessbench-data':
    if bad := unknown(DATA_ITEMS):
      raise errors.BadInput(f'{target}: unknown item(s) {bad}; expected {", ".join(DATA_ITEMS)}')
    found = []
    for item in dict.fromkeys(items or DEFAULT_DATA_ITEMS):
      paths = DATA_ITEMS[item]
      if item == 'train':
        chosen = select_shards(shards) if shards is not None else range(TRAIN_SHARDS)
        paths = [f'train/action_value-{i:05d}-of-{TRAIN_SHARDS:05d}_data.bag' for i in chosen]
      found += [_remote(f'{CHESSBENCH}/data/{p}') for p in paths]
    return found
  if target == 'lichess-games':
    if not items:
      raise errors.BadInput('lichess-games: name the months to fetch, e.g. lichess-games 2024-01 2024-02')
    if bad := [m for m in items if not _MONTH.fullmatch(m)]:
      raise errors.BadInput(f'lichess-games: {bad} are not months YYYY-MM')
    sums = f'{LICHESS}/{LICHESS_SUMS}'
    return [
      _remote(f'{LICHESS}/standard/lichess_db_standard_rated_{m}.pgn.zst', checksums=sums) for m in dict.fromkeys(items)
    ]
  if items:
    raise errors.BadInput(f'{target} takes no items (got {list(items)})')
  name = {'lichess-puzzles': 'lichess_db_puzzle.csv.zst', 'lichess-evals': 'lichess_db_eval.jsonl.zst'}[target]
  return [_remote(f'{LICHESS}/{name}')]


def checkpoint_model(name: str) -> str | None:
  """The published model a checkpoint name designates ('chessbench-270M' -> '270M'); None for any other string."""
  model = name[len(NAME_PREFIX) :] if name.startswith(NAME_PREFIX) else None
  return model if model in CHECKPOINTS else None


def checkpoint_folder(name: str, root: pathlib.Path | None = None) -> pathlib.Path | None:
  """Where `searchless-download chessbench-checkpoints` puts the model `name` designates (None: no such name)."""
  model = checkpoint_model(name)
  if model is None:
    return None
  return (root or data_root()) / 'chessbench' / 'checkpoints' / model


def holds_checkpoint(folder: pathlib.Path) -> bool:
  """Whether `folder` holds a checkpoint to load, as a published model's unpacks: a step folder (digits) whose
  ``params_ema`` or ``params`` has its orbax metadata. A look at the layout; no weight is read."""
  if not folder.is_dir():
    return False
  return any(
    step.name.isdigit() and (step / item / marker).is_file()
    for step in folder.iterdir()
    for item in ('params_ema', 'params')
    for marker in ('_CHECKPOINT_METADATA', '_METADATA', 'checkpoint')
  )


def download_command(name: str) -> str:
  """The command that fetches the checkpoint `name` (a `checkpoint_model` name)."""
  return f'searchless-download chessbench-checkpoints {checkpoint_model(name)}'
