"""Writing the document model out: Markdown, and one self-contained HTML page.

The HTML page's skeleton (``templates/page.html.j2``) and style sheet
(``templates/report.css``) are package data, rendered with Jinja2; the blocks
of each section are written here. PNG figures are embedded as base64 ``data:``
URIs and SVGs inline, so the page can be copied or mailed on its own.

>>> sections = [Section('Summary', 'summary', [Text('**41.9%** of `boards`')])]
>>> print(render_markdown('Report', 'A run', sections))
# Report
<BLANKLINE>
A run
<BLANKLINE>
Contents: [Summary](#summary)
<BLANKLINE>
<a id="summary"></a>
<BLANKLINE>
## Summary
<BLANKLINE>
**41.9%** of `boards`
<BLANKLINE>
>>> inline_html('**41.9%** of `a<b`')
'<strong>41.9%</strong> of <code>a&lt;b</code>'
"""

import base64
from collections.abc import Sequence
import functools
import html
import importlib.resources
import pathlib
import re
from typing import Any

import jinja2
import markupsafe

from searchless.report.document import (
  Block,
  Callout,
  Cards,
  Cell,
  Code,
  Facts,
  Image,
  Section,
  Svg,
  Table,
  Text,
  format_number,
)

_LABELS = {'not-run': 'Not run.', 'error': 'Error.', 'note': 'Note.'}


def inline_html(text: str) -> str:
  """The inline Markdown of `text` (`code`, **bold**, [text](url)) as HTML, everything else escaped."""
  out = []
  for part in re.split(r'(`[^`]*`)', str(text)):
    if len(part) >= 2 and part.startswith('`') and part.endswith('`'):
      out.append(f'<code>{html.escape(part[1:-1])}</code>')
    else:
      s = html.escape(part)
      s = re.sub(r'\*\*(.+?)\*\*', r'<strong>\1</strong>', s)
      s = re.sub(r'\[([^\]]+)\]\(([^)\s]+)\)', r'<a href="\2">\1</a>', s)
      out.append(s)
  return ''.join(out)


def _cell_text(value: Any) -> str:
  return format_number(value) if isinstance(value, float) else str(value)


# --- Markdown ---------------------------------------------------------------------------------------


def _markdown_table(block: Table) -> str:
  def cells(row: Sequence[Any]) -> list[str]:
    return [(c.markdown if isinstance(c, Cell) else _cell_text(c)).replace('|', '\\|') for c in row]

  lines = [f'*{block.caption}*\n'] if block.caption else []
  lines.append('| ' + ' | '.join(cells(block.header)) + ' |')
  lines.append('|' + '|'.join(' ---: ' if i in block.numeric else ' --- ' for i in range(len(block.header))) + '|')
  lines += ['| ' + ' | '.join(cells(row)) + ' |' for row in block.rows]
  return '\n'.join(lines)


def markdown_block(block: Block) -> str:
  """One block as Markdown (figures linked by their file names)."""
  if isinstance(block, Text):
    return block.text
  if isinstance(block, Table):
    return _markdown_table(block)
  if isinstance(block, Image):
    return f'![{block.alt}]({block.file})' + (f'\n\n*{block.caption}*' if block.caption else '')
  if isinstance(block, Svg):
    return f'![{block.alt}]({block.file})'
  if isinstance(block, Code):
    return f'```{block.language}\n{block.text}\n```'
  if isinstance(block, Callout):
    return '> ' + f'**{_LABELS[block.kind]}** {block.text}'.replace('\n', '\n> ')
  if isinstance(block, Cards):
    lines = ['| | |', '| --- | ---: |']
    lines += [
      f'| {label} | **{value}**' + (f' ({detail})' if detail else '') + ' |' for label, value, detail in block.cards
    ]
    return '\n'.join(lines)
  if isinstance(block, Facts):
    return '\n'.join(f'- **{label}:** {value}' for label, value in block.facts)
  raise TypeError(f'unknown block {block!r}')


def render_markdown(title: str, subtitle: str, sections: Sequence[Section]) -> str:
  """The report as Markdown (figures linked by their file names)."""
  out = [f'# {title}', subtitle]
  toc = [f'[{s.title}](#{s.anchor})' + (f' ({s.status})' if s.status != 'ok' else '') for s in sections]
  out.append('Contents: ' + ' · '.join(toc))
  for section in sections:
    out.append(f'<a id="{section.anchor}"></a>\n\n## {section.title}')
    out += [markdown_block(block) for block in section.blocks]
  return '\n\n'.join(out) + '\n'


# --- HTML -------------------------------------------------------------------------------------------


def _html_table(block: Table) -> str:
  def cell(tag: str, i: int, value: Any) -> str:
    cls = ' class="num"' if i in block.numeric else ''
    content = value.html if isinstance(value, Cell) else inline_html(_cell_text(value))
    return f'<{tag}{cls}>{content}</{tag}>'

  rows = ['<table>']
  if block.caption:
    rows.append(f'<caption>{inline_html(block.caption)}</caption>')
  rows.append('<thead><tr>' + ''.join(cell('th', i, h) for i, h in enumerate(block.header)) + '</tr></thead>')
  rows.append('<tbody>')
  rows += ['<tr>' + ''.join(cell('td', i, v) for i, v in enumerate(row)) + '</tr>' for row in block.rows]
  rows.append('</tbody></table>')
  return '\n'.join(rows)


def html_block(block: Block, directory: pathlib.Path) -> str:
  """One block as HTML; an `Image` is read from `directory` and embedded."""
  if isinstance(block, Text):
    return f'<p>{inline_html(block.text)}</p>'
  if isinstance(block, Table):
    return _html_table(block)
  if isinstance(block, Image):
    data = base64.b64encode((directory / block.file).read_bytes()).decode('ascii')
    caption = f'<figcaption>{inline_html(block.caption)}</figcaption>' if block.caption else ''
    return f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(block.alt)}">{caption}</figure>'
  if isinstance(block, Svg):
    return f'<figure class="board">{block.svg}<figcaption>{html.escape(block.alt)}</figcaption></figure>'
  if isinstance(block, Code):
    return f'<pre><code>{html.escape(block.text)}</code></pre>'
  if isinstance(block, Callout):
    text = '<br>'.join(inline_html(line) for line in block.text.split('\n'))
    return f'<div class="callout {block.kind}"><strong>{_LABELS[block.kind]}</strong> {text}</div>'
  if isinstance(block, Cards):
    cards = ''.join(
      f'<div class="card"><div class="label">{html.escape(label)}</div><div class="value">{html.escape(value)}</div>'
      f'<div class="detail">{inline_html(detail)}</div></div>'
      for label, value, detail in block.cards
    )
    return f'<div class="cards">{cards}</div>'
  if isinstance(block, Facts):
    items = ''.join(f'<dt>{html.escape(label)}</dt><dd>{inline_html(value)}</dd>' for label, value in block.facts)
    return f'<dl class="facts">{items}</dl>'
  raise TypeError(f'unknown block {block!r}')


@functools.cache
def _environment() -> jinja2.Environment:
  return jinja2.Environment(
    loader=jinja2.PackageLoader('searchless.report', 'templates'),
    autoescape=True,
    trim_blocks=True,
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
  )


def stylesheet() -> str:
  """The page's CSS (package data ``searchless/report/templates/report.css``)."""
  return (
    importlib.resources.files('searchless.report')
    .joinpath('templates')
    .joinpath('report.css')
    .read_text(encoding='utf-8')
  )


def render_html(
  title: str, subtitle: str, sections: Sequence[Section], directory: pathlib.Path, footer: str = ''
) -> str:
  """The report as one self-contained HTML page (PNGs from `directory` embedded as data URIs)."""
  pages = [
    {
      'title': s.title,
      'anchor': s.anchor,
      'status': s.status,
      'body': markupsafe.Markup('\n'.join(html_block(b, directory) for b in s.blocks)),
    }
    for s in sections
  ]
  return (
    _environment()
    .get_template('page.html.j2')
    .render(
      title=title,
      subtitle=markupsafe.Markup(inline_html(subtitle)),
      sections=pages,
      footer=markupsafe.Markup(inline_html(footer)) if footer else '',
      css=markupsafe.Markup(stylesheet()),
    )
  )
