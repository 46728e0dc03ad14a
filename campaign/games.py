"""The campaign's games: the shared game files (`sources.json`), cut into chunks of at most 500 games to label.

Chunk i of a file holds its games i, i + n, i + 2n, ... with n = games // 500 + 1, exactly as
``shared/data/labels/make_chunks.py`` cut the 46k file, so the shared label folders are its first chunks.
Games are read with the library's PGN reader (`searchless.data.pgn`, through `searchless.data.streams`:
plain or zstd).
"""

from collections.abc import Sequence
import dataclasses
import json
import pathlib

from searchless.data import pgn
from searchless.plumbing import atomic
from searchless.plumbing import errors

SOURCES_FILE = pathlib.Path(__file__).with_name('sources.json')  # The campaign's own data, beside its code.


@dataclasses.dataclass(frozen=True)
class Source:
  """A shared game file and the chunks of it this campaign labels."""

  name: str  # Chunk files and label folders are named NAME_NNN.
  path: str  # The game file, relative to --shared.
  shared_labels: int = 0  # Its first N chunks are labelled in --shared/data/labels (chunk_NNN): never labelled again.


def read_sources(path: pathlib.Path = SOURCES_FILE) -> tuple[list[Source], int]:
  """The game files to label, in order, and the games per chunk, from a sources file (`sources.json`)."""
  data = json.loads(path.read_text())
  try:
    return [Source(**s) for s in data['sources']], int(data['games_per_chunk'])
  except (KeyError, TypeError) as error:
    raise errors.BadInput(
      f'{path}: not a sources file ({error}); expected "sources": [{{"name", "path"}}, ...] and "games_per_chunk"'
    ) from None


def chunk_texts(games: Sequence[str], games_per_chunk: int) -> list[str]:
  """The chunks' PGN texts: chunk i holds games i, i + n, ... (n = len // games_per_chunk + 1).

  >>> chunk_texts(['a ', 'b', 'c'], games_per_chunk=2)
  ['a\\n\\nc\\n\\n', 'b\\n\\n']
  """
  stride = len(games) // games_per_chunk + 1
  return [''.join(g.strip() + '\n\n' for g in games[i::stride]) for i in range(stride)]


def write_games(
  shared: pathlib.Path, games_dir: pathlib.Path, sources: Sequence[Source], games_per_chunk: int
) -> list[pathlib.Path]:
  """Writes every source's chunks not yet written (atomically); returns the chunks to label, in order."""
  games_dir.mkdir(parents=True, exist_ok=True)
  todo = []
  for source in sources:
    index = games_dir / f'{source.name}.json'
    if not index.exists():
      games = [game.text for game in pgn.iter_raw_games(str(shared / source.path))]
      texts = chunk_texts(games, games_per_chunk)
      for i, text in enumerate(texts):
        atomic.write_text(games_dir / f'{source.name}_{i:03d}.pgn', text, durable=False)
      atomic.write_text(
        index,
        json.dumps({'source': source.path, 'chunks': len(texts), 'games': len(games)}, indent=2) + '\n',
        durable=False,
      )
    chunks = json.loads(index.read_text())['chunks']
    todo += [games_dir / f'{source.name}_{i:03d}.pgn' for i in range(source.shared_labels, chunks)]
  return todo
