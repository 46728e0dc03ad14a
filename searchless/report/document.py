"""The report's document model: sections of blocks (text, tables, figures, ...) and number formatting.

Sections build these blocks; `searchless.report.render` writes them as Markdown
and as HTML. Text uses a sliver of Markdown, which both renderers understand:
code in backquotes, ``**bold**`` and ``[text](url)``.

>>> format_percent(0.41875), format_duration(200), format_count(59528)
('41.9%', '3.3 min', '59,528')
>>> plural(1, 'board'), plural(3, 'board'), format_params(402624)
('1 board', '3 boards', '402,624 (0.40M)')
>>> Section('Dataset', 'dataset', [Text('20 games')]).status
'ok'
"""

import dataclasses
import math
from typing import Any, NamedTuple

NOT_RUN = 'not run'  # A section's status when its step has not run.


# --- Formatting -------------------------------------------------------------------------------------


def format_percent(fraction: float | None, digits: int = 1) -> str:
  """0.41875 -> '41.9%'; None or nan -> 'n/a'."""
  if fraction is None or (isinstance(fraction, float) and math.isnan(fraction)):
    return 'n/a'
  return f'{100 * fraction:.{digits}f}%'


def format_count(n: int | float | None) -> str:
  """59528 -> '59,528'."""
  return 'n/a' if n is None else f'{int(n):,}'


def format_number(x: float | None, digits: int = 3) -> str:
  """0.30512 -> '0.305'; None or nan -> 'n/a'."""
  if x is None or (isinstance(x, float) and math.isnan(x)):
    return 'n/a'
  return f'{x:.{digits}f}'


def format_duration(seconds: float | None) -> str:
  """45 -> '45 s', 200 -> '3.3 min', 9000 -> '2.5 h'."""
  if seconds is None:
    return 'n/a'
  if seconds < 100:
    return f'{seconds:.0f} s' if seconds >= 10 else f'{seconds:.1f} s'
  if seconds < 2 * 3600:
    return f'{seconds / 60:.1f} min'
  return f'{seconds / 3600:.1f} h'


def plural(n: int, word: str, many: str | None = None) -> str:
  """(1, 'board') -> '1 board'; (3, 'board') -> '3 boards'."""
  return f'{format_count(n)} {word if n == 1 else many or word + "s"}'


def format_params(n: int | None) -> str:
  """123456 -> '123,456 (0.12M)'; None -> 'n/a'."""
  if n is None:
    return 'n/a'
  return f'{n:,} ({n / 1e6:.2f}M)' if n < 1e9 else f'{n:,} ({n / 1e9:.2f}B)'


# --- Blocks -----------------------------------------------------------------------------------------


class Text(NamedTuple):
  """A paragraph."""

  text: str


class Cell(NamedTuple):
  """A table cell written differently in each format (raw HTML, Markdown)."""

  markdown: str
  html: str


class Table(NamedTuple):
  """A table; cells are str (inline markup), numbers or `Cell`s."""

  header: list[str]
  rows: list[list[Any]]
  numeric: tuple[int, ...] = ()  # Right-aligned columns.
  caption: str = ''


class Image(NamedTuple):
  """A PNG figure in the report directory (linked in Markdown, embedded in HTML)."""

  file: str
  alt: str
  caption: str = ''


class Svg(NamedTuple):
  """An SVG figure: written to `file`, inlined in HTML."""

  file: str
  svg: str
  alt: str


class Code(NamedTuple):
  """A code block (commands to run)."""

  text: str
  language: str = 'sh'


class Callout(NamedTuple):
  """A highlighted paragraph: kind 'not-run', 'note' or 'error'."""

  kind: str
  text: str


class Cards(NamedTuple):
  """Headline numbers: (label, value, detail)."""

  cards: list[tuple[str, str, str]]


class Facts(NamedTuple):
  """What was run: (label, value) pairs."""

  facts: list[tuple[str, str]]


Block = Text | Table | Image | Svg | Code | Callout | Cards | Facts


@dataclasses.dataclass
class Section:
  """A titled part of the report; `status` is 'ok', `NOT_RUN` or 'error'."""

  title: str
  anchor: str
  blocks: list[Block] = dataclasses.field(default_factory=list)
  status: str = 'ok'
