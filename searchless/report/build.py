r"""A run's report: what was run and how well the model does, in one page.

    searchless-analyse-game --run_dir runs/demo   # the sample game (runs the model and Stockfish)
    searchless-report --run_dir runs/demo

`build` reads the artefacts the other commands leave in a run directory (the
layout of `searchless.commands.demo`, i.e. ``make run``; see
`searchless.report.context`) and writes ``RUN_DIR/report/``:

* ``report.html``: the page to open first. It is self-contained: the figures
  are embedded as base64 ``data:`` URIs and the board diagram as inline SVG,
  so the one file can be copied or mailed on its own;
* ``report.md``: the same report in Markdown, linking the files below;
* ``training.png``, ``calibration.png``, ``puzzles_by_rating.png``,
  ``sample_game.png`` and ``sample_game_final.svg``: the figures (each only
  when its artefacts exist).

Sections, each read from its step's output (a missing step is shown as "not
run" with the command that makes it; a section that cannot be built shows the
error, and the report is still written; an artefact of another format or
version, `artefacts.ArtefactError`, stops the report):

=================  ======================================================
Summary            engine and limits, data, model size, training, headline numbers
Dataset            ``data/manifest.json`` (``searchless-annotate``)
Training           ``train/config.json``, ``metrics.jsonl``, ``summary.json`` (``searchless-train``)
Test-set metrics   ``eval/metrics.json``, ``eval/boards.jsonl`` (``searchless-evaluate``)
Puzzles            ``puzzles/summary.json``, ``results.csv``, ``puzzles.csv`` (``searchless-puzzles``)
Match              ``match/results.json``, ``games.pgn`` (``searchless-tournament``)
Beside pretrained  this run's model beside the pretrained one (``eval_pretrained/``,
                   ``puzzles_pretrained/`` and the match's other checkpoint player)
A sample game      ``report/sample_game.json`` (``searchless-analyse-game``)
Play it            commands to play this run's model
=================  ======================================================
"""

from collections.abc import Callable
import dataclasses
import datetime
import os
import pathlib

from searchless.core import artefacts
from searchless.plumbing import errors
from searchless.report import render
from searchless.report.context import REPORT_DIR, Context
from searchless.report.document import Callout, Section
from searchless.report.sections import dataset, game, match, metrics, play, pretrained, puzzles, summary, training

MARKDOWN_FILE = 'report.md'
HTML_FILE = 'report.html'
# Figures the sections write; removed first, so that a figure of an artefact that is gone does not linger.
FIGURES = (training.TRAINING_PNG, metrics.CALIBRATION_PNG, puzzles.PUZZLES_PNG, game.GAME_PNG, game.GAME_SVG)

# The sections after the summary, in order, with the title and anchor an error in one is shown under.
SECTIONS: tuple[tuple[Callable[[Context], Section | None], str, str], ...] = (
  (dataset.dataset_section, 'Dataset', 'dataset'),
  (training.training_section, 'Training', 'training'),
  (metrics.metrics_section, 'Test-set metrics', 'metrics'),
  (puzzles.puzzles_section, 'Puzzles', 'puzzles'),
  (match.match_section, 'Match', 'match'),
  (pretrained.pretrained_section, 'Beside the pretrained model', 'pretrained'),
  (game.sample_game_section, 'A sample game', 'sample-game'),
  (play.play_section, 'Play it', 'play'),
)


@dataclasses.dataclass(frozen=True)
class Report:
  """The files a report was written to."""

  html: pathlib.Path
  markdown: pathlib.Path


def _sections(ctx: Context) -> list[Section]:
  """Every section; one that fails shows its error and leaves no facts or headlines for the summary."""
  sections = []
  for make, title, anchor in SECTIONS:
    facts, headlines = dict(ctx.facts), dict(ctx.headlines)
    try:
      made = make(ctx)
    except artefacts.ArtefactError:
      raise  # An artefact of another format or version: the report would misread it.
    except Exception as error:  # A broken artefact spoils its section, not the report.
      ctx.facts, ctx.headlines = facts, headlines
      made = Section(
        title, anchor, [Callout('error', f'This section could not be built: {type(error).__name__}: {error}')], 'error'
      )
    if made is not None:  # None: an optional section with nothing to show.
      sections.append(made)
  return sections


def build(
  run_dir: str | os.PathLike, *, out_dir: str | os.PathLike | None = None, data_dir: str | os.PathLike | None = None
) -> Report:
  """Writes the report of `run_dir` (report.md, report.html and figures) to `out_dir` (default
  ``RUN_DIR/report``), its annotated data read from `data_dir` (default ``RUN_DIR/data``); returns the
  paths of the HTML and Markdown files."""
  run_dir = pathlib.Path(run_dir)
  if not run_dir.is_dir():
    raise errors.MissingInput(f'run directory {str(run_dir)!r} not found')
  out = pathlib.Path(out_dir) if out_dir is not None else run_dir / REPORT_DIR
  out.mkdir(parents=True, exist_ok=True)
  for name in FIGURES:
    (out / name).unlink(missing_ok=True)
  ctx = Context(run_dir, out, None if data_dir is None else pathlib.Path(data_dir))
  sections = _sections(ctx)
  sections.insert(0, summary.summary_section(ctx, sections))
  from searchless import __version__

  title = 'searchless run report'
  subtitle = f'Run directory `{run_dir}`'
  footer = (
    f'Generated {datetime.datetime.now().strftime("%Y-%m-%d %H:%M")} by `searchless-report` '
    f'(searchless {__version__}). Rebuild: `{ctx.cmds["report"]}`. Figures: `{out}`.'
  )
  report = Report(html=out / HTML_FILE, markdown=out / MARKDOWN_FILE)
  report.markdown.write_text(
    render.render_markdown(title, subtitle, sections) + f'\n---\n\n{footer}\n', encoding='utf-8'
  )
  report.html.write_text(render.render_html(title, subtitle, sections, out, footer), encoding='utf-8')
  return report
