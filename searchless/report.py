r"""A run's report: what was run and how well the model does, in one page.

    searchless-report --run_dir runs/demo

reads the artefacts the other commands leave in a run directory (the layout of
`pipelines.demo`, i.e. ``make run``) and writes ``RUN_DIR/report/``:

* ``report.html``: the page to open first. It is self-contained: the figures
  are embedded as base64 ``data:`` URIs and the board diagram as inline SVG,
  so the one file can be copied or mailed on its own;
* ``report.md``: the same report in Markdown, linking the files below;
* ``training.png``, ``calibration.png``, ``puzzles_by_rating.png``,
  ``sample_game.png`` and ``sample_game_final.svg``: the figures (each only
  when its artefacts exist).

The last stdout line is the path of ``report.html``. Sections, each read from
its step's output (a missing step is shown as "not run" with the command that
makes it, a broken artefact as an error; the report is always written):

=================  ======================================================
Summary            engine and limits, data, model size, training, headline numbers
Dataset            ``data/manifest.json`` (``searchless-annotate``)
Training           ``train/config.json``, ``train/metrics.jsonl`` (``searchless-train``)
Test-set metrics   ``eval/metrics.json``, ``eval/boards.jsonl`` (``searchless-evaluate``)
Puzzles            ``puzzles/summary.json``, ``results.csv``, ``puzzles.csv`` (``searchless-puzzles``)
Match              ``match/results.json``, ``games.pgn`` (``searchless-tournament``)
Beside pretrained  this run's model beside the pretrained one (``eval_pretrained/``,
                   ``puzzles_pretrained/`` and the match's ``pretrained`` player)
A sample game      one game of ``match/games.pgn`` with the model's view of its moves
                   (the checkpoint in ``train/``) and Stockfish's (small node limit)
Play it            commands to play this run's model
=================  ======================================================

Calibration (`calibration_bins`): every (board, move) pair of
``eval/boards.jsonl`` goes to bin k of `num_bins` by its predicted win
probability p, k = floor(p * num_bins) (p = 1.0 in the last bin); each bin
reports its count, mean predicted and mean Stockfish win probability.

>>> [tuple(round(v, 3) for v in b) for b in calibration_bins([0.05, 0.15, 0.95], [0.1, 0.3, 0.9], 2)]
[(0.0, 0.5, 2, 0.1, 0.2), (0.5, 1.0, 1, 0.95, 0.9)]
>>> format_percent(0.41875), format_duration(200), format_count(59528)
('41.9%', '3.3 min', '59,528')
"""

import argparse
import base64
import csv
import dataclasses
import datetime
import html
import json
import math
import os
import pathlib
import re
import shlex
import sys
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import chess
import chess.engine
import chess.pgn
import chess.svg
import numpy as np

from searchless import moves as moves_lib
from searchless import plot as plot_lib

REPORT_DIR = 'report'
MARKDOWN_FILE = 'report.md'
HTML_FILE = 'report.html'
TRAINING_PNG = 'training.png'
CALIBRATION_PNG = 'calibration.png'
PUZZLES_PNG = 'puzzles_by_rating.png'
GAME_PNG = 'sample_game.png'
GAME_SVG = 'sample_game_final.svg'
NOT_RUN = 'not run'
CALIBRATION_BINS = 20
UNIFORM_LOSS = math.log(128)  # Log-loss (nats) of the uniform distribution over 128 value buckets.
# What each `pgn.SKIP_REASONS` reason means, for the dataset's skipped-games table.
SKIP_MEANINGS = {
    'variant': 'a chess variant (chess960, crazyhouse, ...), not standard chess',
    'illegal_move': 'an illegal or ambiguous move in the game text',
    'unparsable': 'not a PGN game (bad FEN tag, no headers and no moves, ...)',
    'bad_encoding': 'bytes that are not UTF-8',
    'truncated': "the game's text ends before its result",
    'filtered_elo': 'outside --min_elo / --max_elo',
    'filtered_speed': 'time control not among --speeds',
    'filtered_bot': 'a BOT account played (--exclude_bots)',
}
MODE_MEANINGS = {'multipv': 'one MultiPV search per board scores every legal move',
                 'per_move': 'one search per legal move (the paper)'}


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


def format_params(n: int) -> str:
  """123456 -> '123,456 (0.12M)'."""
  return f'{n:,} ({n / 1e6:.2f}M)' if n < 1e9 else f'{n:,} ({n / 1e9:.2f}B)'


# --- A small document model, rendered to Markdown and to HTML ----------------------------------------
# Text uses a sliver of Markdown: `code`, **bold** and [text](url); both renderers understand it.


class Text(NamedTuple):
  text: str


class Cell(NamedTuple):
  """A table cell written differently in each format (raw HTML, Markdown)."""

  markdown: str
  html: str


class Table(NamedTuple):
  header: list[str]
  rows: list[list[Any]]  # str (inline markup), number or Cell.
  numeric: tuple[int, ...] = ()  # Right-aligned columns.
  caption: str = ''


class Image(NamedTuple):
  file: str  # Name of the PNG in the report directory.
  alt: str
  caption: str = ''


class Svg(NamedTuple):
  file: str  # Name of the SVG in the report directory.
  svg: str
  alt: str


class Code(NamedTuple):
  text: str
  language: str = 'sh'


class Callout(NamedTuple):
  kind: str  # 'not-run', 'note' or 'error'.
  text: str


class Cards(NamedTuple):
  """Headline numbers: (label, value, detail)."""

  cards: list[tuple[str, str, str]]


class Facts(NamedTuple):
  """What was run: (label, value) pairs."""

  facts: list[tuple[str, str]]


@dataclasses.dataclass
class Section:
  title: str
  anchor: str
  blocks: list = dataclasses.field(default_factory=list)
  status: str = 'ok'  # 'ok', NOT_RUN or 'error'.


def _inline_html(text: str) -> str:
  parts = re.split(r'(`[^`]*`)', str(text))
  out = []
  for part in parts:
    if len(part) >= 2 and part.startswith('`') and part.endswith('`'):
      out.append(f'<code>{html.escape(part[1:-1])}</code>')
    else:
      s = html.escape(part)
      s = re.sub(r'\*\*(.+?)\*\*', r'<strong>\1</strong>', s)
      s = re.sub(r'\[([^\]]+)\]\(([^)\s]+)\)', r'<a href="\2">\1</a>', s)
      out.append(s)
  return ''.join(out)


def _cell_text(value: Any) -> str:
  if isinstance(value, float):
    return format_number(value)
  return str(value)


def _markdown_blocks(blocks: Sequence, out: list[str]) -> None:
  for block in blocks:
    if isinstance(block, Text):
      out.append(block.text)
    elif isinstance(block, Table):
      lines = []
      if block.caption:
        lines.append(f'*{block.caption}*\n')
      cells = lambda row: [(c.markdown if isinstance(c, Cell) else _cell_text(c)).replace('|', '\\|') for c in row]
      lines.append('| ' + ' | '.join(cells(block.header)) + ' |')
      lines.append('|' + '|'.join(' ---: ' if i in block.numeric else ' --- ' for i in range(len(block.header))) + '|')
      lines += ['| ' + ' | '.join(cells(row)) + ' |' for row in block.rows]
      out.append('\n'.join(lines))
    elif isinstance(block, Image):
      out.append(f'![{block.alt}]({block.file})' + (f'\n\n*{block.caption}*' if block.caption else ''))
    elif isinstance(block, Svg):
      out.append(f'![{block.alt}]({block.file})')
    elif isinstance(block, Code):
      out.append(f'```{block.language}\n{block.text}\n```')
    elif isinstance(block, Callout):
      label = {'not-run': '**Not run.**', 'error': '**Error.**', 'note': '**Note.**'}[block.kind]
      out.append('> ' + f'{label} {block.text}'.replace('\n', '\n> '))
    elif isinstance(block, Cards):
      lines = ['| | |', '| --- | ---: |']
      lines += [f'| {label} | **{value}**' + (f' ({detail})' if detail else '') + ' |' for label, value, detail in block.cards]
      out.append('\n'.join(lines))
    elif isinstance(block, Facts):
      out.append('\n'.join(f'- **{label}:** {value}' for label, value in block.facts))
    else:
      raise TypeError(f'unknown block {block!r}')


def render_markdown(title: str, subtitle: str, sections: Sequence[Section]) -> str:
  """The report as Markdown (figures linked by their file names)."""
  out = [f'# {title}', subtitle]
  toc = [f'[{s.title}](#{s.anchor})' + (f' ({s.status})' if s.status != 'ok' else '') for s in sections]
  out.append('Contents: ' + ' · '.join(toc))
  for section in sections:
    out.append(f'<a id="{section.anchor}"></a>\n\n## {section.title}')
    _markdown_blocks(section.blocks, out)
  return '\n\n'.join(out) + '\n'


_CSS = """
:root { --fg: #1f2328; --muted: #656d76; --line: #d0d7de; --bg-soft: #f6f8fa; --accent: #0969da;
        --ok: #1a7f37; --warn-bg: #fff8c5; --warn-line: #d4a72c; --err-bg: #ffebe9; --err-line: #cf222e; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: #fff; line-height: 1.5;
       font: 15px/1.5 -apple-system, BlinkMacSystemFont, "Segoe UI", Helvetica, Arial, sans-serif; }
main { max-width: 1040px; margin: 0 auto; padding: 24px 28px 64px; }
header h1 { margin: 0 0 4px; font-size: 28px; }
header p { margin: 0; color: var(--muted); }
nav { margin: 16px 0 8px; display: flex; flex-wrap: wrap; gap: 6px; }
nav a { padding: 3px 10px; border: 1px solid var(--line); border-radius: 999px; text-decoration: none;
        color: var(--fg); font-size: 13px; background: var(--bg-soft); }
nav a.not-run { color: var(--muted); border-style: dashed; background: #fff; }
nav a.error { color: var(--err-line); border-color: var(--err-line); }
h2 { margin: 40px 0 12px; padding-bottom: 6px; border-bottom: 1px solid var(--line); font-size: 22px; }
h2 .badge { font-size: 12px; font-weight: 600; vertical-align: middle; margin-left: 8px; padding: 2px 8px;
            border-radius: 999px; background: var(--warn-bg); border: 1px solid var(--warn-line); }
h2 .badge.error { background: var(--err-bg); border-color: var(--err-line); }
a { color: var(--accent); }
code { font: 12.5px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: var(--bg-soft);
       padding: 1px 4px; border-radius: 4px; }
pre { background: var(--bg-soft); border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px;
      overflow-x: auto; }
pre code { background: none; padding: 0; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 14px; }
caption { caption-side: top; text-align: left; color: var(--muted); padding-bottom: 4px; }
th, td { border: 1px solid var(--line); padding: 4px 10px; text-align: left; vertical-align: top; }
th { background: var(--bg-soft); font-weight: 600; }
tbody tr:nth-child(even) { background: #fbfcfd; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 12px 0 20px; }
figure img { max-width: 100%; border: 1px solid var(--line); border-radius: 6px; }
figcaption { color: var(--muted); font-size: 13px; margin-top: 4px; }
.callout { border-left: 4px solid var(--warn-line); background: var(--warn-bg); padding: 8px 14px;
           border-radius: 4px; margin: 10px 0; }
.callout.note { border-color: var(--accent); background: #ddf4ff; }
.callout.error { border-color: var(--err-line); background: var(--err-bg); }
.summary { border: 1px solid var(--line); border-radius: 10px; padding: 16px 20px; margin-top: 20px;
           background: linear-gradient(180deg, #f6f8fa, #fff); }
.summary h2 { margin-top: 0; border: none; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(180px, 1fr)); gap: 10px; margin: 6px 0 14px; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px; background: #fff; }
.card .label { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.card .value { font-size: 24px; font-weight: 650; margin: 2px 0; }
.card .detail { color: var(--muted); font-size: 12.5px; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 0; }
dl.facts dt { color: var(--muted); font-weight: 600; }
dl.facts dd { margin: 0; }
.board svg { width: 320px; height: 320px; border-radius: 4px; }
.muted { color: var(--muted); font-size: 12.5px; }
.drop { color: var(--err-line); font-weight: 600; }
footer { margin-top: 48px; color: var(--muted); font-size: 13px; border-top: 1px solid var(--line); padding-top: 8px; }
"""


def _html_blocks(blocks: Sequence, directory: pathlib.Path, out: list[str]) -> None:
  for block in blocks:
    if isinstance(block, Text):
      out.append(f'<p>{_inline_html(block.text)}</p>')
    elif isinstance(block, Table):
      rows = ['<table>']
      if block.caption:
        rows.append(f'<caption>{_inline_html(block.caption)}</caption>')

      def cell(tag, i, value):
        cls = ' class="num"' if i in block.numeric else ''
        content = value.html if isinstance(value, Cell) else _inline_html(_cell_text(value))
        return f'<{tag}{cls}>{content}</{tag}>'

      rows.append('<thead><tr>' + ''.join(cell('th', i, h) for i, h in enumerate(block.header)) + '</tr></thead>')
      rows.append('<tbody>')
      rows += ['<tr>' + ''.join(cell('td', i, v) for i, v in enumerate(row)) + '</tr>' for row in block.rows]
      rows.append('</tbody></table>')
      out.append('\n'.join(rows))
    elif isinstance(block, Image):
      data = base64.b64encode((directory / block.file).read_bytes()).decode('ascii')
      caption = f'<figcaption>{_inline_html(block.caption)}</figcaption>' if block.caption else ''
      out.append(f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(block.alt)}">{caption}</figure>')
    elif isinstance(block, Svg):
      out.append(f'<figure class="board">{block.svg}<figcaption>{html.escape(block.alt)}</figcaption></figure>')
    elif isinstance(block, Code):
      out.append(f'<pre><code>{html.escape(block.text)}</code></pre>')
    elif isinstance(block, Callout):
      label = {'not-run': 'Not run.', 'error': 'Error.', 'note': 'Note.'}[block.kind]
      text = '<br>'.join(_inline_html(line) for line in block.text.split('\n'))
      out.append(f'<div class="callout {block.kind}"><strong>{label}</strong> {text}</div>')
    elif isinstance(block, Cards):
      cards = ''.join(
          f'<div class="card"><div class="label">{html.escape(label)}</div><div class="value">{html.escape(value)}</div>'
          f'<div class="detail">{_inline_html(detail)}</div></div>' for label, value, detail in block.cards)
      out.append(f'<div class="cards">{cards}</div>')
    elif isinstance(block, Facts):
      items = ''.join(f'<dt>{html.escape(label)}</dt><dd>{_inline_html(value)}</dd>' for label, value in block.facts)
      out.append(f'<dl class="facts">{items}</dl>')
    else:
      raise TypeError(f'unknown block {block!r}')


def render_html(title: str, subtitle: str, sections: Sequence[Section], directory: pathlib.Path,
                footer: str = '') -> str:
  """The report as one self-contained HTML page (PNGs from `directory` embedded as data URIs)."""
  out = ['<!DOCTYPE html>', '<html lang="en">', '<head>', '<meta charset="utf-8">',
         '<meta name="viewport" content="width=device-width, initial-scale=1">',
         f'<title>{html.escape(title)}</title>', f'<style>{_CSS}</style>', '</head>', '<body>', '<main>',
         f'<header><h1>{html.escape(title)}</h1><p>{_inline_html(subtitle)}</p></header>']
  links = ''.join(f'<a class="{s.status.replace(" ", "-")}" href="#{s.anchor}">{html.escape(s.title)}'
                  + (f' · {html.escape(s.status)}' if s.status != 'ok' else '') + '</a>' for s in sections)
  out.append(f'<nav>{links}</nav>')
  for i, section in enumerate(sections):
    badge = (f'<span class="badge {section.status.replace(" ", "-")}">{html.escape(section.status)}</span>'
             if section.status != 'ok' else '')
    out.append(f'<section id="{section.anchor}"' + (' class="summary"' if i == 0 else '') + '>')
    out.append(f'<h2>{html.escape(section.title)}{badge}</h2>')
    _html_blocks(section.blocks, directory, out)
    out.append('</section>')
  if footer:
    out.append(f'<footer>{_inline_html(footer)}</footer>')
  out += ['</main>', '</body>', '</html>']
  return '\n'.join(out) + '\n'


# --- Reading artefacts -------------------------------------------------------------------------------


class Artefacts(NamedTuple):
  """The paths of a run directory's artefacts (see the module docstring)."""

  run_dir: pathlib.Path

  @property
  def manifest(self) -> pathlib.Path:
    return self.run_dir / 'data' / 'manifest.json'

  @property
  def train(self) -> pathlib.Path:
    return self.run_dir / 'train'

  @property
  def eval_metrics(self) -> pathlib.Path:
    return self.run_dir / 'eval' / 'metrics.json'

  @property
  def eval_boards(self) -> pathlib.Path:
    return self.run_dir / 'eval' / 'boards.jsonl'

  @property
  def puzzles(self) -> pathlib.Path:
    return self.run_dir / 'puzzles'

  @property
  def match(self) -> pathlib.Path:
    return self.run_dir / 'match'


def _json(path: pathlib.Path) -> dict | None:
  return json.loads(path.read_text()) if path.exists() else None


def _jsonl(path: pathlib.Path) -> list[dict]:
  return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def commands(run_dir: str | os.PathLike) -> dict[str, str]:
  """The command that makes each step's artefacts in `run_dir`: those `pipelines.demo` recorded in
  ``commands.json`` when it ran there, else the demo's defaults."""
  d = str(run_dir)
  q = lambda path: shlex.quote(path)
  model = f'checkpoint:{d}/train,name=searchless'
  defaults = {
      'all': f'python -m pipelines.demo --input data/sample_games.pgn --run_dir {q(d)}   # or: make run RUN_DIR={q(d)}',
      'annotate': (f'searchless-annotate --input data/sample_games.pgn --output_dir {q(d + "/data")} '
                   '--mode multipv --limit nodes=30000 --state_value best_move'),
      'train': (f'searchless-train --config configs/tiny.py --workdir {q(d + "/train")} '
                f'--data {q(d + "/data/train/action_value*")} --eval_data {q(d + "/data/test/action_value*")}'),
      'evaluate': f'searchless-evaluate --checkpoint {q(d + "/train")} --data {q(d + "/data/test")} --out {q(d + "/eval")}',
      'mine': (f'searchless-mine-puzzles --games data/sample_games.pgn --split test '
               f'--out {q(d + "/puzzles/puzzles.csv")}'),
      'puzzles': (f'searchless-puzzles --puzzles {q(d + "/puzzles/puzzles.csv")} --agent {q(model)} '
                  f'--out {q(d + "/puzzles")}'),
      'match': (f'searchless-tournament --agent {q(model)} '
                '--agent stockfish:time=0.05,elo=1350,name=stockfish-elo1350 --gauntlet --make_openings 4 '
                f'--out {q(d + "/match")}'),
      'report': f'searchless-report --run_dir {q(d)}',
  }
  return {**defaults, **(_json(pathlib.Path(run_dir) / 'commands.json') or {})}


def _not_run(section: Section, what: str, *steps: str, cmds: dict[str, str]) -> Section:
  section.status = NOT_RUN
  section.blocks = [Callout('not-run', f'{what} To make it, run:'),
                    Code('\n'.join(cmds[s] for s in steps)),
                    Text(f'(or the whole job: `{cmds["all"]}`)')]
  return section


# --- Calibration --------------------------------------------------------------------------------------


class CalibrationBin(NamedTuple):
  lower: float
  upper: float
  count: int
  mean_predicted: float  # nan for an empty bin.
  mean_stockfish: float


def calibration_bins(predicted: Sequence[float], stockfish: Sequence[float],
                     num_bins: int = 10) -> list[CalibrationBin]:
  """Reliability bins of predicted win probabilities against Stockfish's (see the module docstring)."""
  predicted = np.asarray(predicted, np.float64)
  stockfish = np.asarray(stockfish, np.float64)
  if predicted.shape != stockfish.shape:
    raise ValueError(f'predicted {predicted.shape} and stockfish {stockfish.shape} differ in shape')
  if num_bins < 1:
    raise ValueError(f'num_bins must be >= 1, got {num_bins}')
  index = np.clip(np.floor(predicted * num_bins).astype(np.int64), 0, num_bins - 1)
  bins = []
  for k in range(num_bins):
    mask = index == k
    count = int(mask.sum())
    bins.append(CalibrationBin(k / num_bins, (k + 1) / num_bins, count,
                               float(predicted[mask].mean()) if count else math.nan,
                               float(stockfish[mask].mean()) if count else math.nan))
  return bins


def calibration_error(bins: Sequence[CalibrationBin]) -> float:
  """Count-weighted mean |mean predicted - mean Stockfish| over the bins (expected calibration error)."""
  total = sum(b.count for b in bins)
  if not total:
    return math.nan
  return sum(b.count * abs(b.mean_predicted - b.mean_stockfish) for b in bins if b.count) / total


def move_pairs(boards: Sequence[dict]) -> tuple[np.ndarray, np.ndarray]:
  """(predicted, Stockfish) win probability of every (board, move) pair of boards.jsonl records."""
  predicted = [p for b in boards for p in b['predicted']]
  stockfish = [s for b in boards for s in b['stockfish']]
  return np.asarray(predicted, np.float64), np.asarray(stockfish, np.float64)


# --- Figures (matplotlib Figure objects: no pyplot state) ---------------------------------------------


def _figure(width: float, height: float):
  from matplotlib.figure import Figure
  return Figure(figsize=(width, height), dpi=100, layout='constrained')


def plot_training(records: Sequence[dict], path: pathlib.Path) -> None:
  """Train and eval loss (left) and eval action accuracy (right) against the step."""
  fig = _figure(11, 4)
  loss_ax, acc_ax = fig.subplots(1, 2)
  for key, label, color in (('loss', 'train loss (mean over log window)', 'tab:blue'),
                            ('eval_loss', 'eval loss (EMA params)', 'tab:orange')):
    steps, values = plot_lib.series(records, key)
    if steps:
      loss_ax.plot(steps, values, label=label, color=color, marker='o' if len(steps) <= 30 else None, ms=3)
  loss_ax.axhline(UNIFORM_LOSS, color='grey', ls=':', lw=1, label='uniform over 128 buckets (ln 128)')
  loss_ax.set(xlabel='step', ylabel='log-loss (nats)', title='Loss')
  loss_ax.legend(fontsize=9)
  steps, values = plot_lib.series(records, 'eval_action_accuracy')
  if steps:
    acc_ax.plot(steps, [100 * v for v in values], color='tab:green', marker='o', ms=4)
    acc_ax.set_ylim(0, max(10.0, 100 * max(values) * 1.25))
  else:
    acc_ax.text(0.5, 0.5, 'no evaluation records\n(train with --eval_data)', ha='center', va='center',
                transform=acc_ax.transAxes, color='grey')
  acc_ax.set(xlabel='step', ylabel='action accuracy (%)', title='Eval action accuracy (EMA params)')
  for ax in (loss_ax, acc_ax):
    ax.grid(alpha=0.3)
  fig.savefig(path)


def plot_calibration(predicted: np.ndarray, stockfish: np.ndarray, bins: Sequence[CalibrationBin],
                     path: pathlib.Path) -> None:
  """Reliability curve with per-bin counts (left) and every (board, move) pair (right)."""
  fig = _figure(11, 4.8)
  grid = fig.add_gridspec(2, 2, height_ratios=(3, 1))
  curve = fig.add_subplot(grid[0, 0])
  counts = fig.add_subplot(grid[1, 0], sharex=curve)
  scatter = fig.add_subplot(grid[:, 1])
  full = [b for b in bins if b.count]
  curve.plot([0, 1], [0, 1], color='grey', ls='--', lw=1, label='perfect calibration')
  curve.plot([b.mean_predicted for b in full], [b.mean_stockfish for b in full], color='tab:blue', marker='o',
             label='per-bin means')
  curve.set(ylabel="Stockfish's win prob. (mean)", xlim=(0, 1), ylim=(0, 1),
            title='Reliability (binned by predicted win prob.)')
  curve.legend(fontsize=9, loc='upper left')
  curve.grid(alpha=0.3)
  curve.tick_params(labelbottom=False)
  width = bins[0].upper - bins[0].lower if bins else 0.1
  bars = counts.bar([b.lower + width / 2 for b in bins], [b.count for b in bins], width=width * 0.9, color='tab:blue',
                    alpha=0.5)
  for bar, b in zip(bars, bins):
    if b.count:
      counts.annotate(str(b.count), (bar.get_x() + bar.get_width() / 2, bar.get_height()), xytext=(0, 1),
                      textcoords='offset points', ha='center', va='bottom', fontsize=7)
  counts.set(xlabel="model's predicted win prob.", ylabel='pairs')
  counts.set_ylim(0, max([b.count for b in bins] + [1]) * 1.35)
  counts.grid(alpha=0.3, axis='y')
  alpha = float(np.clip(300 / max(len(predicted), 1), 0.03, 0.6))
  scatter.scatter(predicted, stockfish, s=6, alpha=alpha, color='tab:purple', edgecolors='none')
  scatter.plot([0, 1], [0, 1], color='grey', ls='--', lw=1)
  scatter.set(xlim=(0, 1), ylim=(0, 1), xlabel="model's predicted win prob.", ylabel="Stockfish's win prob.",
              title=f'All {len(predicted):,} (board, move) pairs')
  scatter.set_aspect('equal')
  scatter.grid(alpha=0.3)
  fig.savefig(path)


def plot_game(plies: Sequence[int], model_view: Sequence[float | None], stockfish_view: Sequence[float | None],
              title: str, path: pathlib.Path, opening_plies: int = 0) -> None:
  """The model's side's win probability per position, as the model and as Stockfish see it."""
  fig = _figure(11, 3.6)
  ax = fig.subplots()
  if opening_plies:
    ax.axvspan(0, opening_plies, color='grey', alpha=0.12, label='opening (given)')
  ax.axhline(0.5, color='grey', lw=0.8)
  for view, label, color in ((model_view, "model's view", 'tab:blue'), (stockfish_view, "Stockfish's view", 'tab:red')):
    xs = [x for x, v in zip(plies, view) if v is not None]
    if xs:
      ax.plot(xs, [v for v in view if v is not None], label=label, color=color, marker='.', ms=4, lw=1.4)
  ax.set(xlabel='plies played', ylabel="win prob. of the model's side",
         ylim=(-0.02, 1.02), title=title)
  ax.legend(fontsize=9, loc='best')
  ax.grid(alpha=0.3)
  fig.savefig(path)


# --- Sections -----------------------------------------------------------------------------------------


class Context:
  """What the sections share: paths, commands, headline numbers for the summary, options."""

  def __init__(self, run_dir: pathlib.Path, out_dir: pathlib.Path, *, annotate_game: bool, stockfish_nodes: int):
    self.paths = Artefacts(run_dir)
    self.out_dir = out_dir
    self.cmds = commands(run_dir)
    self.annotate_game = annotate_game
    self.stockfish_nodes = stockfish_nodes
    self.facts: dict[str, str] = {}
    self.headlines: dict[str, tuple[str, str]] = {}
    self.manifest: dict | None = None


def dataset_section(ctx: Context) -> Section:
  section = Section('Dataset', 'dataset')
  manifest = _json(ctx.paths.manifest)
  if manifest is None:
    return _not_run(section, f'No annotated data: `{ctx.paths.manifest}` is missing.', 'annotate', cmds=ctx.cmds)
  ctx.manifest = manifest
  games, engine, split = manifest['games'], manifest['engine'], manifest['split']
  splits = manifest['splits']
  inputs = [p for paths in manifest.get('inputs', {}).values() for p in paths]
  skipped = sum(games.get('skipped', {}).values())
  blocks = section.blocks
  blocks.append(Text(f"**{format_count(games['read'])} games** read, **{format_count(games['kept'])} kept** "
                     f"({format_count(skipped)} skipped) from " + ', '.join(f'`{p}`' for p in inputs) + '; '
                     f"split into train/test by {split.get('by', '?')}"
                     + (f" (test fraction {split['test_fraction']:g})" if split.get('test_fraction') else '')
                     + f", boards de-duplicated by {split.get('dedup_by', '?')} within each split."))
  rows = []
  for name, c in splits.items():
    rows.append([name, format_count(c.get('boards_seen')), format_count(c.get('boards')),
                 format_count(c.get('action_values')), format_count(c.get('terminal_boards')),
                 format_count(c.get('boards_failed'))])
  blocks.append(Table(['split', 'boards seen', 'boards (unique)', 'action-values (board, move)', 'terminal boards',
                       'engine failures'], rows, numeric=(1, 2, 3, 4, 5),
                      caption='Per split: an action-value record is one legal move of one board with its win probability.'))
  limit_meaning = MODE_MEANINGS.get(engine.get('mode'), '')
  ids = engine.get('id') or []
  engine_name = ', '.join(i.get('name', '?') for i in ids) or 'unknown (no id recorded)'
  blocks.append(Facts([
      ('Engine', f"{engine_name}" + (f" (`{engine['path']}`)" if engine.get('path') else '')),
      ('Search', f"`--mode {engine.get('mode', '?')}` ({limit_meaning}), `--limit {engine.get('limit', '?')}`"
                 + (' per board' if engine.get('mode') == 'multipv' else ' per search')),
      ('Board value', f"`--state_value {engine.get('state_value', '?')}`"),
      ('Engine settings', f"{plural(engine.get('threads', 1), 'thread')}, {engine.get('hash_mb', '?')} MiB hash, "
                          f"{plural(manifest.get('engine_restarts', 0), 'restart')}"),
  ]))
  overlap, fraction = split.get('test_boards_in_train', 0), split.get('test_boards_in_train_fraction')
  test_boards = splits.get('test', {}).get('boards')
  if 'test' in splits:
    blocks.append(Text(f"**Test-in-train overlap:** {plural(overlap, 'test board')} also in train"
                       + (f' ({format_percent(fraction)})' if fraction is not None else '')
                       + ('; they were dropped from test (`--drop_test_overlap`).' if split.get('drop_test_overlap')
                          else '; kept, as the paper did (it reports 14.7%).')))
  if skipped:
    blocks.append(Table(['reason', 'games', 'meaning'],
                        [[f'`{r}`', format_count(n), SKIP_MEANINGS.get(r, '')] for r, n in games['skipped'].items()],
                        numeric=(1,), caption='Games skipped, by reason (each listed in `data/skipped.jsonl`).'))
  else:
    blocks.append(Text('No game was skipped.'))
  if games.get('corrupt_input_files'):
    blocks.append(Callout('note', f"{games['corrupt_input_files']} input file(s) were corrupt or truncated; "
                                  'their games up to the damage were kept.'))
  timings = manifest.get('timings', {})
  per_board = timings.get('ms_per_board', {})
  blocks.append(Text(f"Annotation took {format_duration(timings.get('wall_seconds'))}"
                     + (f", {per_board['mean']:.1f} ms of engine time per board on average" if per_board else '')
                     + '.'))
  train_av = splits.get('train', {}).get('action_values')
  ctx.facts['Engine'] = (f"{engine_name}, `--mode {engine.get('mode', '?')} --limit {engine.get('limit', '?')}`"
                         + (' (per board)' if engine.get('mode') == 'multipv' else ' (per move)'))
  ctx.facts['Data'] = (f"{plural(games['kept'], 'game')} → {format_count(splits.get('train', {}).get('boards'))} "
                       f"train boards ({format_count(train_av)} action-values), "
                       f"{format_count(test_boards)} test boards ({format_count(splits.get('test', {}).get('action_values'))})")
  return section


def count_params(config: dict) -> int:
  """Parameters of the predictor an experiment config (config.json) defines (as `model.num_params`)."""
  m = config['model']
  d, layers, w = m['embedding_dim'], m['num_layers'], m.get('widening_factor', 4)
  output = moves_lib.NUM_ACTIONS if config.get('policy') == 'behavioral_cloning' else config.get('num_return_buckets', 128)
  rows = moves_lib.NUM_ACTIONS + 79  # The shared token table + the position table (`model.POSITION_ROWS`).
  per_layer = 4 * d * d + 3 * w * d * d + 2 * 2 * d + (2 * 2 * d if m.get('apply_qk_layernorm') else 0)
  post_ln = 2 * d if m.get('apply_post_ln', True) else 0
  return rows * d + layers * per_layer + post_ln + d * output + output


def training_wall_seconds(records: Sequence[dict], batch_size: int) -> float | None:
  """Training time estimated from the logged throughput (each log window's steps / its examples/s)."""
  total, previous = 0.0, 0
  for r in sorted((r for r in records if r.get('examples_per_s')), key=lambda r: r['step']):
    total += (r['step'] - previous) * batch_size / r['examples_per_s']
    previous = r['step']
  return total or None


def training_section(ctx: Context) -> Section:
  section = Section('Training', 'training')
  train_dir = ctx.paths.train
  config = _json(train_dir / 'config.json')
  metrics_path = train_dir / 'metrics.jsonl'
  if config is None or not metrics_path.exists():
    missing = 'config.json' if config is None else 'metrics.jsonl'
    return _not_run(section, f'No training run: `{train_dir / missing}` is missing.', 'train', cmds=ctx.cmds)
  records = _jsonl(metrics_path)
  train_records = [r for r in records if 'loss' in r]
  eval_records = [r for r in records if 'eval_loss' in r]
  m, batch = config['model'], config['data']['batch_size']
  params = count_params(config)
  steps = max((r['step'] for r in records), default=0)
  num_steps = config['train']['num_steps']
  # timings.json of `pipelines.demo` holds only its last invocation's steps (a resumed run: a part); the
  # throughput log covers every step of every invocation.
  wall = training_wall_seconds(train_records, batch)
  examples = steps * batch
  train_records_total = ((ctx.manifest or {}).get('splits', {}).get('train', {}).get('action_values')
                         if config.get('policy') == 'action_value' else None)
  epochs = f', {examples / train_records_total:.2f} epochs' if train_records_total else ''
  throughput = float(np.median([r['examples_per_s'] for r in train_records[1:] or train_records])) if train_records else None
  mfu = [r['mfu'] for r in train_records[1:] or train_records if r.get('mfu') is not None]
  complete = (train_dir / 'complete.json').exists() or steps >= num_steps
  blocks = section.blocks
  blocks.append(Facts([
      ('Model', f"{config.get('policy', '?')} transformer: {m['num_layers']} layers, d={m['embedding_dim']}, "
                f"{m['num_heads']} heads, SwiGLU ×{m.get('widening_factor', 4)}, "
                f"{config.get('num_return_buckets', 128)} value buckets"),
      ('Parameters', format_params(params)),
      ('Optimiser', f"Adam, learning rate {config['optim']['learning_rate']:g}, batch {batch}, "
                    f"clip {config['optim']['max_grad_norm']:g}, EMA {config['optim']['ema_decay']:g}, "
                    f"loss `{config['loss']['kind']}`"),
      ('Steps', f'{format_count(steps)} of {format_count(num_steps)}' + ('' if complete else ' (not finished: rerun to resume)')
                + f' = {format_count(examples)} examples{epochs}'),
      ('Wall time', f'≈ {format_duration(wall)} (from the logged throughput: steps and evaluations, not start-up)'),
      ('Throughput', (f'{throughput:,.0f} examples/s (median)' if throughput else 'n/a')
                     + (f', MFU {format_percent(float(np.median(mfu)), 2)}' if mfu else '')),
      ('Data', f"`{config['data'].get('train', '')}`; eval: `{config['data'].get('eval', '') or 'none'}`"),
  ]))
  rows = []
  if train_records:
    last = train_records[-1]
    rows.append(['train loss (last log window)', format_number(last['loss']), f"step {last['step']}"])
  if eval_records:
    last = eval_records[-1]
    rows.append(['eval loss', format_number(last['eval_loss']), f"step {last['step']}"])
    if 'eval_action_accuracy' in last:
      best = max(eval_records, key=lambda r: r.get('eval_action_accuracy', -1))
      rows.append(['eval action accuracy', format_percent(last['eval_action_accuracy']),
                   f"step {last['step']} (best {format_percent(best['eval_action_accuracy'])} at step {best['step']}; "
                   f"{last.get('eval_boards', '?')} boards)"])
  if rows:
    blocks.append(Table(['', 'value', 'when'], rows, numeric=(1,)))
  if records:
    plot_training(records, ctx.out_dir / TRAINING_PNG)
    blocks.append(Image(TRAINING_PNG, 'training curves',
                        f'Losses in nats (ln 128 = {UNIFORM_LOSS:.2f} is a uniform guess over the 128 value buckets). '
                        'Evaluation uses the EMA parameters on the first `train.eval_records` test records.'))
  ctx.facts['Model'] = (f"{config.get('policy', '?')} transformer, {m['num_layers']} layers × d={m['embedding_dim']}, "
                        f"{format_params(params)} parameters")
  ctx.facts['Training'] = (f'{format_count(steps)} steps × batch {batch}' + ('' if complete else ' (unfinished)')
                           + f' ({format_count(examples)} examples{epochs}), ≈ {format_duration(wall)}')
  return section


METRIC_MEANINGS = {
    'action_accuracy': ("Action accuracy", "boards where the model's best move is one of Stockfish's best moves"),
    'kendall_tau': ("Kendall's tau-b", "rank agreement of the model's move values with Stockfish's, tau-b on the "
                    "values (ties handled), mean over boards where it is defined"),
    'kendall_tau_reference_argsort': ("Kendall's tau (reference argsort variant)",
                                      "what the reference code computes (tau between argsort permutations); "
                                      "shown only to compare with the paper's numbers"),
    'log_loss': ('Log-loss (bits)', "mean −log2 p(Stockfish's value bucket) per move"),
    'l2_win_prob': ('L2 win prob.', 'mean squared error of the predicted vs Stockfish win probability per move'),
    'entropy': ('Entropy (bits)', "mean entropy of the model's bucket distribution per move"),
    'consistency': ('Consistency', '(board value − best next-board value)², state-value policy'),
}


def metrics_section(ctx: Context) -> Section:
  section = Section('Test-set metrics', 'metrics')
  summary = _json(ctx.paths.eval_metrics)
  if summary is None:
    return _not_run(section, f'No evaluation: `{ctx.paths.eval_metrics}` is missing.', 'evaluate', cmds=ctx.cmds)
  blocks = section.blocks
  blocks.append(Text(f"Policy `{summary.get('policy', '?')}` on **{format_count(summary.get('boards'))} test boards** "
                     f"(every legal move scored by Stockfish; {format_count(summary.get('dropped_boards', 0))} "
                     "boards dropped because their records were not exactly their legal moves)."))
  rows = []
  for key, (name, meaning) in METRIC_MEANINGS.items():
    if key not in summary:
      continue
    value = summary[key]
    text = format_percent(value) if key == 'action_accuracy' else format_number(value, 4 if key == 'l2_win_prob' else 3)
    if key == 'kendall_tau' and 'kendall_tau_boards' in summary:
      meaning += f" ({format_count(summary['kendall_tau_boards'])} boards)"
    rows.append([name, text, meaning])
  blocks.append(Table(['metric', 'value', 'meaning'], rows, numeric=(1,)))
  if 'action_accuracy' in summary:
    ctx.headlines['Action accuracy'] = (format_percent(summary['action_accuracy']),
                                        f"{format_count(summary.get('boards'))} test boards")
  if 'kendall_tau' in summary:
    ctx.headlines["Kendall's tau-b"] = (format_number(summary['kendall_tau']),
                                        f"argsort variant {format_number(summary.get('kendall_tau_reference_argsort'))}")
  if not ctx.paths.eval_boards.exists():
    blocks.append(Callout('note', f'No calibration plot: `{ctx.paths.eval_boards}` is missing.'))
    return section
  if summary.get('policy') == 'behavioral_cloning':
    blocks.append(Text('No calibration plot: a behavioral-cloning policy predicts move probabilities, not win probabilities.'))
    return section
  predicted, stockfish = move_pairs(_jsonl(ctx.paths.eval_boards))
  if not len(predicted):
    return section
  bins = calibration_bins(predicted, stockfish, CALIBRATION_BINS)
  plot_calibration(predicted, stockfish, bins, ctx.out_dir / CALIBRATION_PNG)
  blocks.append(Text('**Calibration.** Is a predicted win probability of 70% worth 70% to Stockfish? Every '
                     f'(board, move) pair ({format_count(len(predicted))}) is binned by the predicted win probability; '
                     "points on the diagonal are calibrated, points above it mean the model underrates those moves. "
                     f'Expected calibration error (count-weighted |gap|): **{format_number(calibration_error(bins))}**.'))
  blocks.append(Image(CALIBRATION_PNG, 'calibration: predicted vs Stockfish win probability'))
  blocks.append(Table(['predicted win prob.', 'pairs', 'mean predicted', 'mean Stockfish'],
                      [[f'{b.lower:.2f}–{b.upper:.2f}', format_count(b.count), format_number(b.mean_predicted),
                        format_number(b.mean_stockfish)] for b in bins if b.count],
                      numeric=(1, 2, 3), caption='Calibration bins (empty bins left out).'))
  return section


def _read_csv(path: pathlib.Path) -> list[dict]:
  with open(path, newline='', encoding='utf-8') as f:
    return list(csv.DictReader(f))


def puzzles_section(ctx: Context) -> Section:
  section = Section('Puzzles', 'puzzles')
  directory = ctx.paths.puzzles
  summary = _json(directory / 'summary.json')
  if summary is None:
    steps = ('puzzles',) if (directory / 'puzzles.csv').exists() else ('mine', 'puzzles')
    return _not_run(section, f'No puzzle evaluation: `{directory / "summary.json"}` is missing.', *steps, cmds=ctx.cmds)
  from searchless import puzzle_eval  # No JAX: the band plot and its types.

  results = _read_csv(directory / 'results.csv') if (directory / 'results.csv').exists() else []
  puzzle_rows = _read_csv(directory / 'puzzles.csv') if (directory / 'puzzles.csv').exists() else []
  themes = {t for row in (puzzle_rows or results) for t in (row.get('Themes') or '').split()}
  blocks = section.blocks
  accuracy = format_percent(summary['accuracy'])
  blocks.append(Text(f"**{accuracy}** of {format_count(summary['n'])} puzzles solved ({summary['solved']}/{summary['n']}) "
                     f"by `{summary.get('agent', '?')}`; puzzles from `{summary.get('puzzles', '?')}`. "
                     "A puzzle is solved when every one of the agent's moves is the solution's (any mate in one counts)."))
  if 'mined' in themes:
    blocks.append(Callout('note', 'These puzzles were mined from games by `searchless-mine-puzzles` (their Themes contain '
                                  '`mined`), from games the model was not trained on (the shipped `data/sample_puzzles.csv`, or '
                                  'the test split\'s games). Their ratings are a proxy set by '
                                  'the miner, not Lichess ratings: accuracies per band are not comparable with the '
                                  'paper\'s Lichess puzzle results.'))
  bands = [puzzle_eval.Band(**b) for b in summary.get('bands', [])]
  if bands:
    blocks.append(Table(['rating', 'puzzles', 'solved', 'accuracy'],
                        [[f'{b.lower}–{b.upper - 1}', format_count(b.n), format_count(b.solved), format_percent(b.accuracy)]
                         for b in bands], numeric=(1, 2, 3), caption='Accuracy per rating band.'))
    puzzle_eval.plot_bands(bands, ctx.out_dir / PUZZLES_PNG,
                           f"{summary.get('agent', '?')}: {summary['solved']}/{summary['n']} puzzles solved")
    blocks.append(Image(PUZZLES_PNG, 'puzzle accuracy by rating', 'Bars: accuracy per rating band; n = puzzles in the band.'))
  missed = [r for r in results if r.get('solved') == '0'][:5]
  if missed:
    blocks.append(Table(['puzzle', 'rating', 'solution (agent moves)', 'played'],
                        [[f"`{r['PuzzleId']}`", r['Rating'], f"`{r['expected']}`", f"`{r['played']}`"] for r in missed],
                        numeric=(1,), caption=f'Some missed puzzles (all in `{directory / "results.csv"}`).'))
  ctx.headlines['Puzzle accuracy'] = (accuracy, f"{summary['solved']}/{summary['n']} puzzles"
                                      + (' (mined)' if 'mined' in themes else ''))
  return section


PRETRAINED_NAME = 'pretrained'  # The pretrained model's player name in `pipelines.demo`'s match.


def _model_names(results: dict | None, names: Sequence[str]) -> set[str]:
  """Players that are this run's model: checkpoint agents (not the pretrained one, when this run's is
  there too), else names starting with 'searchless'."""
  if results and results.get('agents'):
    found = {a['name'] for a in results['agents'] if str(a.get('spec', '')).startswith('checkpoint:')}
    if len(found) > 1:
      found.discard(PRETRAINED_NAME)
    if found:
      return found
  return {n for n in names if n.startswith('searchless')}


def match_section(ctx: Context) -> Section:
  section = Section('Match', 'match')
  results = _json(ctx.paths.match / 'results.json')
  if results is None:
    return _not_run(section, f'No match: `{ctx.paths.match / "results.json"}` is missing.', 'match', cmds=ctx.cmds)
  names = [a['name'] for a in results.get('agents', [])] or sorted(results.get('scores', {}))
  models = _model_names(results, names)
  blocks = section.blocks
  rows, points_total, games_total, opponents = [], 0.0, 0, []
  for p in results.get('pairs', []):
    a, b, aw, bw = p['a'], p['b'], p['a_wins'], p['b_wins']
    if b in models and a not in models:
      a, b, aw, bw = b, a, bw, aw
    points = aw + p['draws'] / 2
    rows.append([a, b, format_count(p['games']), aw, p['draws'], bw, f"{points:g}/{p['games']}",
                 format_percent(points / p['games'])])
    if a in models:
      points_total, games_total = points_total + points, games_total + p['games']
      opponents.append(b)
  blocks.append(Table(['player', 'opponent', 'games', 'W', 'D', 'L', 'score', 'score %'], rows,
                      numeric=(2, 3, 4, 5, 6, 7), caption='Results from the model\'s side (W/D/L: its wins, draws, losses).'))
  anchors = results.get('anchors') or {}
  elo = results.get('elo')
  specs = {a['name']: a.get('spec', '') for a in results.get('agents', [])}
  if elo:
    confidence = format_percent(elo.get('confidence', 0.95), 0)
    rows = []
    for p in elo['players']:
      anchored = p['name'] in anchors
      rows.append([f"**{p['name']}**" if p['name'] in models else p['name'], f"{p['elo']:.0f}",
                   'fixed (anchor)' if anchored else f"± {p['plus_minus']:.0f}",
                   '' if anchored else f"{p['lower']:.0f} – {p['upper']:.0f}", format_count(p['games']),
                   format_percent(p['score'], 0), f"`{specs.get(p['name'], '')}`"])
    blocks.append(Table(['player', 'Elo', '±', f'{confidence} interval', 'games', 'score', 'agent'], rows,
                        numeric=(1, 2, 3, 4, 5), caption=f'BayesElo ratings ({confidence} intervals).'))
    if anchors:
      anchor_text = ', '.join(f'`{n}` = {v:g}' for n, v in anchors.items())
      blocks.append(Text(f"Ratings are anchored to {anchor_text}: Stockfish playing with `UCI_LimitStrength` at "
                         "that `UCI_Elo`, which Stockfish calibrates against CCRL-like rating lists at its own time "
                         "control. Treat the model's rating as a rough estimate on that scale, with the interval "
                         "above (few games give wide intervals)."))
    else:
      blocks.append(Text('No anchor (no Stockfish with a `UCI_Elo` among the players): ratings have mean 0 and '
                         'only their differences mean something.'))
    model_ratings = [p for p in elo['players'] if p['name'] in models]
    if model_ratings:
      r = model_ratings[0]
      ctx.headlines['Elo'] = (f"{r['elo']:.0f} ± {r['plus_minus']:.0f}",
                              f"{confidence} interval; " + (f"anchor {', '.join(f'{n}={v:g}' for n, v in anchors.items())}"
                                                            if anchors else 'mean 0, no anchor'))
  elif results.get('elo_error'):
    blocks.append(Callout('note', f"Elo not fitted: {results['elo_error']}"))
  if games_total:
    against = f'vs {opponents[0]}' if len(set(opponents)) == 1 else f'vs {len(set(opponents))} opponents'
    ctx.headlines['Match score'] = (f'{points_total:g}/{games_total}',
                                    f'{format_percent(points_total / games_total)} {against}')
  endings = results.get('endings') or results.get('terminations') or {}
  if endings:
    blocks.append(Table(['how games ended', 'games'], [[k, v] for k, v in sorted(endings.items(), key=lambda kv: -kv[1])],
                        numeric=(1,)))
  adjudication = results.get('adjudication') or {}
  if adjudication:
    blocks.append(Text(f"Adjudication: a draw after {adjudication.get('max_plies')} plies from the opening; "
                       + (f"a win when an evaluating Stockfish ({adjudication.get('eval_limit')}) sees a mate or more than "
                          f"{adjudication['win_cp']} cp" if adjudication.get('eval') and adjudication.get('win_cp') else
                          'no evaluation adjudication')
                       + f". {format_count(results.get('games'))} games in `{ctx.paths.match / 'games.pgn'}`"
                       + (f", played in {format_duration(results['wall_seconds'])}" if results.get('wall_seconds') else '')
                       + '.'))
  games = _read_games(ctx.paths.match / 'games.pgn')
  if games:
    rows = []
    for g in games[:30]:
      h = g.headers
      rows.append([h.get('Round', '?'), h.get('White', '?'), h.get('Black', '?'), f"**{h.get('Result', '*')}**",
                   h.get('PlyCount', '?'), h.get('Opening', ''), g.end().comment or h.get('Termination', '')])
    blocks.append(Table(['round', 'White', 'Black', 'result', 'plies', 'opening', 'ending'], rows, numeric=(0, 4),
                        caption='The games' + (' (first 30)' if len(games) > 30 else '') + '.'))
  return section


def _json_or_none(path: pathlib.Path) -> dict | None:
  """The JSON at `path`, or None when it is missing or broken (its own section reports that)."""
  try:
    return _json(path)
  except (OSError, ValueError):
    return None


def pretrained_section(ctx: Context) -> Section | None:
  """This run's model beside the pretrained one, on the same test boards, puzzles and opponents;
  None (no section) when the run did not include the pretrained model (``--pretrained ''``)."""
  section = Section('Beside the pretrained model', 'pretrained')
  run = ctx.paths.run_dir
  evals = [_json_or_none(run / d / 'metrics.json') for d in ('eval', 'eval_pretrained')]
  puzzles = [_json_or_none(run / d / 'summary.json') for d in ('puzzles', 'puzzles_pretrained')]
  results = _json_or_none(ctx.paths.match / 'results.json')
  names = [a['name'] for a in (results or {}).get('agents', [])]
  if evals[1] is None and puzzles[1] is None and PRETRAINED_NAME not in names:
    return None
  rows = []
  for key, label in (('action_accuracy', 'Action accuracy (test boards)'), ('kendall_tau', "Kendall's tau-b")):
    if any(e and key in e for e in evals):
      fmt = format_percent if key == 'action_accuracy' else format_number
      rows.append([label, *[fmt(e[key]) if e and key in e else '-' for e in evals]])
  if any(puzzles):
    rows.append(['Puzzles solved', *[f"{format_percent(q['accuracy'])} ({q['solved']}/{q['n']})" if q else '-'
                                     for q in puzzles]])
  model = next(iter(_model_names(results, names)), None) if results else None
  if results and model:
    for opponent in [n for n in names if n not in (model, PRETRAINED_NAME)]:
      cells = []
      for player in (model, PRETRAINED_NAME):
        pair = next((p for p in results['pairs'] if {p['a'], p['b']} == {player, opponent}), None)
        if pair is None:
          cells.append('-')
          continue
        wins, losses = (pair['a_wins'], pair['b_wins']) if pair['a'] == player else (pair['b_wins'], pair['a_wins'])
        cells.append(f"+{wins} ={pair['draws']} -{losses} ({format_percent((wins + pair['draws'] / 2) / pair['games'])})")
      rows.append([f'Against `{opponent}`', *cells])
    head = next((p for p in results['pairs'] if {p['a'], p['b']} == {model, PRETRAINED_NAME}), None)
    if head:
      wins = head['a_wins'] if head['a'] == model else head['b_wins']
      losses = head['b_wins'] if head['a'] == model else head['a_wins']
      rows.append(['Head to head', f"+{wins} ={head['draws']} -{losses}", f"+{losses} ={head['draws']} -{wins}"])
    if results.get('elo'):
      ratings = {p['name']: p for p in results['elo']['players']}
      rows.append(['Elo (BayesElo)', *[f"{ratings[n]['elo']:.0f} ± {ratings[n]['plus_minus']:.0f}" if n in ratings
                                       else '-' for n in (model, PRETRAINED_NAME)]])
  section.blocks.append(Text("The model this run trained beside the pretrained one shipped in the package "
                             "(`Player.load('pretrained')`; how it was made: its model card, "
                             "`searchless/pretrained/MODEL_CARD.md`), on the same test boards, puzzles and opponents."))
  section.blocks.append(Table(['', 'this run', 'pretrained'], rows, numeric=(1, 2)))
  return section


def _read_games(path: pathlib.Path) -> list[chess.pgn.Game]:
  if not path.exists():
    return []
  games = []
  with open(path, encoding='utf-8') as f:
    while (game := chess.pgn.read_game(f)) is not None:
      games.append(game)
  return games


def pick_game(games: Sequence[chess.pgn.Game], models: set[str]) -> chess.pgn.Game | None:
  """The model's longest win, else the longest game it played, else the longest game."""
  def plies(g):
    return sum(1 for _ in g.mainline_moves())

  def won(g):
    h = g.headers
    return (h.get('White') in models and h.get('Result') == '1-0') or (h.get('Black') in models and h.get('Result') == '0-1')

  played = [g for g in games if g.headers.get('White') in models or g.headers.get('Black') in models]
  for pool in ([g for g in played if won(g)], played, list(games)):
    if pool:
      return max(pool, key=plies)  # max keeps the first of equals: the earliest round.
  return None


class GamePly(NamedTuple):
  ply: int  # 0-based index of the move in the game.
  san: str
  color: chess.Color
  book: bool  # Part of the given opening.
  by_model: bool
  model_move_prob: float | None  # The model's win probability for the move it played (its own view).
  model_best: str | None  # The model's preferred move (SAN) when it differs from the move played.


def _model_view(train_dir: pathlib.Path, boards: Sequence[chess.Board]) -> list[Any]:
  """The checkpoint's analysis of each board (None for boards without legal moves)."""
  from searchless import player as player_lib  # JAX only here.

  player = player_lib.Player.load(str(train_dir))
  live = [i for i, b in enumerate(boards) if any(b.legal_moves)]
  out: list[Any] = [None] * len(boards)
  for start in range(0, len(live), 16):
    chunk = live[start:start + 16]
    for i, analysis in zip(chunk, player.policy.analyse_many([boards[i] for i in chunk])):
      out[i] = analysis
  return out


def _stockfish_view(boards: Sequence[chess.Board], color: chess.Color, nodes: int) -> list[float | None]:
  """Stockfish's win probability for `color` of each board (terminal boards by the rules)."""
  from searchless import engine as engine_lib
  from searchless import values

  path = engine_lib.find_stockfish()
  if path is None:
    raise FileNotFoundError('Stockfish not found')
  out: list[float | None] = []
  with chess.engine.SimpleEngine.popen_uci(path) as engine:
    engine.configure({k: v for k, v in {'Threads': 1, 'Hash': 16}.items() if k in engine.options})
    for board in boards:
      if board.is_checkmate():
        out.append(0.0 if board.turn == color else 1.0)
      elif board.is_game_over():
        out.append(0.5)
      else:
        info = engine.analyse(board, chess.engine.Limit(nodes=nodes), info=chess.engine.INFO_SCORE)
        out.append(values.score_to_win_probability(info['score'].pov(color)))
  return out


def sample_game_section(ctx: Context) -> Section:
  section = Section('A sample game', 'sample-game')
  results = _json(ctx.paths.match / 'results.json')
  games = _read_games(ctx.paths.match / 'games.pgn')
  if not games:
    return _not_run(section, f'No games: `{ctx.paths.match / "games.pgn"}` is missing or empty.', 'match', cmds=ctx.cmds)
  names = sorted({g.headers.get(side, '?') for g in games for side in ('White', 'Black')})
  models = _model_names(results, names)
  game = pick_game(games, models)
  h = game.headers
  model_color = chess.WHITE if h.get('White') in models else chess.BLACK if h.get('Black') in models else None
  blocks = section.blocks
  blocks.append(Text(f"Round {h.get('Round', '?')}: **{h.get('White', '?')}** (White) vs **{h.get('Black', '?')}** (Black), "
                     f"**{h.get('Result', '*')}** after {h.get('PlyCount', '?')} plies"
                     + (f", opening {h['Opening']}" if h.get('Opening') else '')
                     + (f"; {game.end().comment}" if game.end().comment else '') + '. '
                     + ('Chosen as the model\'s longest win.' if h.get('Result') == {chess.WHITE: '1-0', chess.BLACK: '0-1'}.get(model_color)
                        else 'Chosen as the longest game (the model won none).')))
  # Positions before each move, then the final one; the book ends at the node commented 'end of opening'.
  boards, plies, book_end = [], [], 0
  node = game
  while node.variations:
    nxt = node.variation(0)
    board = node.board()
    boards.append(board)
    plies.append((board.san(nxt.move), board.turn))
    if nxt.comment.strip() == 'end of opening':
      book_end = len(plies)
    node = nxt
  boards.append(node.board())

  analyses: list[Any] = [None] * len(boards)
  notes = []
  if model_color is not None and ctx.annotate_game:
    try:
      analyses = _model_view(ctx.paths.train, boards)
    except Exception as error:  # No checkpoint, no JAX, ...: the game is shown without the model's view.
      notes.append(f"The model's view is missing: the checkpoint in `{ctx.paths.train}` could not be analysed "
                   f'({type(error).__name__}: {error}).')
  stockfish: list[float | None] = [None] * len(boards)
  if model_color is not None and ctx.stockfish_nodes > 0:
    try:
      stockfish = _stockfish_view(boards, model_color, ctx.stockfish_nodes)
    except Exception as error:  # No Stockfish: the game is shown without its view.
      notes.append(f"Stockfish's view is missing ({type(error).__name__}: {error}).")

  def model_value(i: int) -> float | None:
    """The model's win probability for the side to move at board i: its best move's value."""
    a = analyses[i]
    return None if a is None or a.value is None else float(a.value)

  moves = list(game.mainline_moves())
  rows: list[GamePly] = []
  for i, (san, color) in enumerate(plies):
    by_model = color == model_color and i >= book_end
    prob, best = None, None
    a = analyses[i]
    if by_model and a is not None:
      played = moves[i]
      index = a.moves.index(played) if played in a.moves else None
      if index is not None:
        prob = float(a.win_probs[index] if a.win_probs is not None else a.scores[index])
      top = a.best_move()
      if top is not None and top != played:
        best = boards[i].san(top)
    rows.append(GamePly(i, san, color, i < book_end, by_model, prob, best))

  blocks.append(Text("How to read the moves: the model's moves are **bold**, the given opening's in italics. After each "
                     "model move: `model` = the win probability the model predicted for the move it played (in brackets "
                     "its top-scored move when the play rules chose another); `SF` = Stockfish's win probability for "
                     f"the model's side after the move ({ctx.stockfish_nodes:,} nodes per position); `−N pts` = how much "
                     "that dropped with the move, when 10 points or more."))
  for note in notes:
    blocks.append(Callout('note', note))
  blocks.append(_move_table(rows, stockfish, model_color))
  # The model's view where it is to move: its own position, as it judges it (the value of its best move).
  curve_model = [model_value(i) if boards[i].turn == model_color else None for i in range(len(boards))]
  if any(v is not None for v in curve_model + stockfish):
    side = chess.COLOR_NAMES[model_color]
    plot_game(list(range(len(boards))), curve_model, stockfish,
              f"{h.get('White', '?')} – {h.get('Black', '?')} {h.get('Result', '*')}: win probability of the model ({side})",
              ctx.out_dir / GAME_PNG, opening_plies=book_end)
    blocks.append(Image(GAME_PNG, 'win probability over the game',
                        "Blue: the model's view of its position when it is to move (its best move's predicted win "
                        "probability); red: Stockfish's, before every ply."))
  final = boards[-1]
  last = final.move_stack[-1] if final.move_stack else None
  svg = chess.svg.board(final, size=320, lastmove=last, orientation=model_color if model_color is not None else chess.WHITE)
  (ctx.out_dir / GAME_SVG).write_text(svg)
  blocks.append(Svg(GAME_SVG, svg, f'Final position ({h.get("Result", "*")}): {final.fen()}'))
  return section


def _move_table(rows: Sequence[GamePly], stockfish: Sequence[float | None], model_color: chess.Color | None) -> Table:
  """Full moves as rows: number, White's move, Black's move, each with the model's and Stockfish's numbers."""

  def cell(p: GamePly | None) -> Cell:
    if p is None:
      return Cell('', '')
    md_move, html_move = (f'**{p.san}**', f'<strong>{html.escape(p.san)}</strong>') if p.by_model else (
        (f'*{p.san}*', f'<em>{html.escape(p.san)}</em>') if p.book else (p.san, html.escape(p.san)))
    notes, drop_text = [], ''
    if p.by_model:
      if p.model_move_prob is not None:
        notes.append(f'model {format_percent(p.model_move_prob, 0)}' + (f' [{p.model_best}]' if p.model_best else ''))
      before, after = stockfish[p.ply], stockfish[p.ply + 1]
      if after is not None:
        notes.append(f'SF {format_percent(after, 0)}')
        if before is not None and before - after >= 0.1:
          drop_text = f'−{100 * (before - after):.0f} pts'
    text = ' · '.join(notes + ([drop_text] if drop_text else []))
    html_notes = html.escape(' · '.join(notes)) + (f' · <span class="drop">{drop_text}</span>' if drop_text else '')
    return Cell(md_move + (f' ({text})' if text else ''),
                html_move + (f' <span class="muted">{html_notes}</span>' if text else ''))

  by_number: dict[int, list[GamePly | None]] = {}
  # Rows by full move: a game from a FEN with Black to move starts with an empty White cell.
  start_black = rows[0].color == chess.BLACK if rows else False
  for p in rows:
    k = (p.ply + (1 if start_black else 0)) // 2
    by_number.setdefault(k, [None, None])[0 if p.color == chess.WHITE else 1] = p
  table_rows = [[k + 1, cell(w), cell(b)] for k, (w, b) in sorted(by_number.items())]
  return Table(['#', 'White', 'Black'], table_rows, numeric=(0,))


def play_section(ctx: Context) -> Section:
  section = Section('Play it', 'play')
  train = str(ctx.paths.train)
  if not (ctx.paths.train / 'checkpoints').exists():
    return _not_run(section, f'No checkpoint to play: `{ctx.paths.train / "checkpoints"}` is missing.', 'train',
                    cmds=ctx.cmds)
  q = shlex.quote
  blocks = section.blocks
  blocks.append(Text('**In a chess GUI** (Arena, Cute Chess, BanksiaGUI, ...): add a UCI engine whose command is'))
  blocks.append(Code(f'searchless-uci --checkpoint {q(train)}'))
  blocks.append(Text('**From Python**, through UCI with python-chess, or directly with the player API:'))
  blocks.append(Code(
      'import chess, chess.engine\n\n'
      f'engine = chess.engine.SimpleEngine.popen_uci(["searchless-uci", "--checkpoint", {json.dumps(train)}])\n'
      'board = chess.Board()\n'
      'print(engine.play(board, chess.engine.Limit(time=1.0)).move)\n'
      'engine.quit()\n\n'
      'from searchless.player import Player\n'
      f'player = Player.load({json.dumps(train)})\n'
      'print(player.win_probabilities(board))  # {move: win probability}, best first\n'
      'print(player.play(board))', 'python'))
  blocks.append(Text('**Puzzles** (any Lichess puzzle CSV) and **a ladder of Stockfish opponents** for a sharper Elo:'))
  blocks.append(Code(
      f'searchless-puzzles --puzzles lichess_db_puzzle.csv --agent {q("checkpoint:" + train)} --num 1000 '
      f'--out {q(str(ctx.paths.run_dir / "puzzles-lichess"))}\n'
      f'searchless-tournament --agent {q("checkpoint:" + train + ",name=searchless")} '
      '--agent stockfish:nodes=1000,elo=1350 --agent stockfish:nodes=1000,elo=1500 --gauntlet '
      f'--make_openings 10 --out {q(str(ctx.paths.run_dir / "ladder"))}'))
  return section


def summary_section(ctx: Context, sections: Sequence[Section]) -> Section:
  section = Section('Summary', 'summary')
  order = ('Action accuracy', "Kendall's tau-b", 'Puzzle accuracy', 'Match score', 'Elo')
  cards = [(label, *ctx.headlines[label]) for label in order if label in ctx.headlines]
  if cards:
    section.blocks.append(Cards(cards))
  facts = [(label, ctx.facts[label]) for label in ('Engine', 'Data', 'Model', 'Training') if label in ctx.facts]
  if facts:
    section.blocks.append(Facts(facts))
  incomplete = [f'{s.title} ({s.status})' for s in sections if s.status != 'ok']
  if incomplete:
    section.blocks.append(Callout('note', 'Incomplete: ' + ', '.join(incomplete) + '. Run the missing steps '
                                  f'(`{ctx.cmds["all"]}` runs or continues everything), then `{ctx.cmds["report"]}`.'))
  return section


# --- Building ----------------------------------------------------------------------------------------


SECTIONS: tuple[Callable[[Context], Section], ...] = (
    dataset_section, training_section, metrics_section, puzzles_section, match_section, pretrained_section,
    sample_game_section, play_section)
_TITLES = {dataset_section: ('Dataset', 'dataset'), training_section: ('Training', 'training'),
           metrics_section: ('Test-set metrics', 'metrics'), puzzles_section: ('Puzzles', 'puzzles'),
           match_section: ('Match', 'match'), pretrained_section: ('Beside the pretrained model', 'pretrained'),
           sample_game_section: ('A sample game', 'sample-game'),
           play_section: ('Play it', 'play')}


def build(run_dir: str | os.PathLike, *, annotate_game: bool = True, stockfish_nodes: int = 10_000,
          out_dir: str | os.PathLike | None = None) -> pathlib.Path:
  """Writes the report of `run_dir` (report.md, report.html and figures); returns report.html's path.

  `annotate_game`: load the checkpoint to show the model's view of the sample
  game; `stockfish_nodes`: Stockfish's node limit per position of that game
  (0: no Stockfish). `out_dir` defaults to ``RUN_DIR/report``.
  """
  run_dir = pathlib.Path(run_dir)
  if not run_dir.is_dir():
    raise FileNotFoundError(f'run directory {str(run_dir)!r} not found')
  out = pathlib.Path(out_dir) if out_dir is not None else run_dir / REPORT_DIR
  out.mkdir(parents=True, exist_ok=True)
  for name in (TRAINING_PNG, CALIBRATION_PNG, PUZZLES_PNG, GAME_PNG, GAME_SVG):
    (out / name).unlink(missing_ok=True)  # Figures of artefacts that are gone must not linger.
  ctx = Context(run_dir, out, annotate_game=annotate_game, stockfish_nodes=stockfish_nodes)
  sections = []
  for make in SECTIONS:
    try:
      made = make(ctx)
      if made is not None:  # An optional section with nothing to show.
        sections.append(made)
    except Exception as error:  # A broken artefact spoils its section, not the report.
      title, anchor = _TITLES[make]
      sections.append(Section(title, anchor, [Callout('error', f'This section could not be built: '
                                                               f'{type(error).__name__}: {error}')], 'error'))
  sections.insert(0, summary_section(ctx, sections))
  from searchless import __version__
  title = 'searchless run report'
  subtitle = f'Run directory `{run_dir}`'
  footer = (f'Generated {datetime.datetime.now().strftime("%Y-%m-%d %H:%M")} by `searchless-report` '
            f'(searchless {__version__}). Rebuild: `{ctx.cmds["report"]}`. Figures: `{out}`.')
  (out / MARKDOWN_FILE).write_text(render_markdown(title, subtitle, sections) + f'\n---\n\n{footer}\n', encoding='utf-8')
  path = out / HTML_FILE
  path.write_text(render_html(title, subtitle, sections, out, footer), encoding='utf-8')
  return path


def main(argv: Sequence[str] | None = None) -> None:
  p = argparse.ArgumentParser(prog='searchless-report', description=__doc__.split('\n\n')[0])
  p.add_argument('--run_dir', required=True, help='the run directory (data/, train/, eval/, puzzles/, match/)')
  p.add_argument('--out', default=None, help='output directory (default: RUN_DIR/report)')
  p.add_argument('--no_model', action='store_true', help="don't load the checkpoint for the sample game's annotations")
  p.add_argument('--stockfish_nodes', type=int, default=10_000,
                 help="Stockfish's nodes per position of the sample game (0: no Stockfish)")
  args = p.parse_args(argv)
  try:
    path = build(args.run_dir, annotate_game=not args.no_model, stockfish_nodes=args.stockfish_nodes, out_dir=args.out)
  except (FileNotFoundError, ValueError) as e:
    sys.exit(f'error: {e}')
  print(f'markdown: {path.parent / MARKDOWN_FILE}')
  print(path)


if __name__ == '__main__':
  main()
