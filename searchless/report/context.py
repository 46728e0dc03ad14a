"""Where a run's artefacts are, how to read the untyped ones, and what the report's sections share.

A run directory has the layout of `searchless.commands.demo` (``make run``):
``data/`` (annotation; or a data directory of its own, ``--data_dir``), ``train/``, ``eval/``, ``puzzles/``,
``match/``, the pretrained model's ``eval_pretrained/`` and ``puzzles_pretrained/``, and
``commands.json`` (each step's command line, as the demo ran it). The typed
artefacts (`searchless.core.artefacts`) are read with their own classes; this
module reads the rest (JSON lines, CSV, PGN) and knows which match player is
this run's model.

>>> paths = RunPaths(pathlib.Path('runs/demo'))
>>> str(paths.eval_metrics), str(paths.sample_game)
('runs/demo/eval/metrics.json', 'runs/demo/report/sample_game.json')
>>> commands('/no/such/run')['report']  # No commands.json there: the generic hint.
'searchless-report --run_dir /no/such/run'
"""

from collections.abc import Sequence
import csv
import json
import os
import pathlib
import shlex
from typing import Any, NamedTuple

import chess.pgn

from searchless.core import artefacts
from searchless.report.document import NOT_RUN, Callout, Code, Section, Text

REPORT_DIR = 'report'  # The report's directory in the run (the sample-game analysis is written there too).
COMMANDS_FILE = 'commands.json'  # Each step's command line, recorded by the demo job.


class RunPaths(NamedTuple):
  """The paths of a run directory's artefacts."""

  run_dir: pathlib.Path
  data_dir: pathlib.Path | None = None  # The annotated data (None: RUN_DIR/data).

  @property
  def data(self) -> pathlib.Path:
    return self.data_dir if self.data_dir is not None else self.run_dir / 'data'

  @property
  def manifest(self) -> pathlib.Path:
    return self.data / artefacts.AnnotationManifest.FILE

  @property
  def train(self) -> pathlib.Path:
    return self.run_dir / 'train'

  @property
  def training_summary(self) -> pathlib.Path:
    return self.train / artefacts.TrainingSummary.FILE

  @property
  def eval_metrics(self) -> pathlib.Path:
    return self.run_dir / 'eval' / artefacts.EvaluationMetrics.FILE

  @property
  def eval_boards(self) -> pathlib.Path:
    return self.run_dir / 'eval' / 'boards.jsonl'

  @property
  def puzzles(self) -> pathlib.Path:
    return self.run_dir / 'puzzles'

  @property
  def match(self) -> pathlib.Path:
    return self.run_dir / 'match'

  @property
  def match_results(self) -> pathlib.Path:
    return self.match / artefacts.MatchResults.FILE

  @property
  def games(self) -> pathlib.Path:
    return self.match / 'games.pgn'

  @property
  def pretrained_eval_metrics(self) -> pathlib.Path:
    return self.run_dir / 'eval_pretrained' / artefacts.EvaluationMetrics.FILE

  @property
  def pretrained_puzzles(self) -> pathlib.Path:
    return self.run_dir / 'puzzles_pretrained'

  @property
  def sample_game(self) -> pathlib.Path:
    return self.run_dir / REPORT_DIR / 'sample_game.json'


# --- Untyped files ----------------------------------------------------------------------------------


def read_json(path: pathlib.Path) -> Any:
  """The JSON at `path`, or None when it does not exist."""
  return json.loads(path.read_text()) if path.exists() else None


def read_jsonl(path: pathlib.Path) -> list[dict]:
  """The records of a JSON-lines file."""
  return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def read_csv(path: pathlib.Path) -> list[dict]:
  """The rows of a CSV file with a header, or [] when it does not exist."""
  if not path.exists():
    return []
  with open(path, newline='', encoding='utf-8') as f:
    return list(csv.DictReader(f))


def read_games(path: pathlib.Path) -> list[chess.pgn.Game]:
  """The games of a PGN file, or [] when it does not exist."""
  if not path.exists():
    return []
  games = []
  with open(path, encoding='utf-8') as f:
    while (game := chess.pgn.read_game(f)) is not None:
      games.append(game)
  return games


def commands(run_dir: str | os.PathLike, data_dir: str | os.PathLike | None = None) -> dict[str, str]:
  """The command that makes each step's artefacts in `run_dir` (its data in `data_dir`, default RUN_DIR/data):
  the one the demo recorded in ``commands.json`` when it ran there, else a generic hint (placeholders in
  capitals)."""
  d = str(run_dir)
  data = str(data_dir) if data_dir is not None else d + '/data'
  q = shlex.quote
  model = f'checkpoint:{d}/train,name=searchless'
  hints = {
    'all': f'python -m searchless.commands.demo --run_dir {q(d)}   # or: make run RUN_DIR={q(d)}',
    'annotate': f'searchless-annotate --input GAMES.pgn --out {q(data)}',
    'train': (
      f'searchless-train --config CONFIG --workdir {q(d + "/train")} '
      f'--data {q(data + "/train/action_value*")} --eval_data {q(data + "/test/action_value*")}'
    ),
    'evaluate': f'searchless-evaluate --checkpoint {q(d + "/train")} --data {q(data + "/test")} --out {q(d + "/eval")}',
    'mine': f'searchless-mine-puzzles --games TEST_GAMES.pgn --out {q(d + "/puzzles/puzzles.csv")}',
    'puzzles': (
      f'searchless-puzzles --puzzles {q(d + "/puzzles/puzzles.csv")} --agent {q(model)} --out {q(d + "/puzzles")}'
    ),
    'match': f'searchless-tournament --agent {q(model)} --agent OPPONENT --out {q(d + "/match")}',
    'analyse_game': f'searchless-analyse-game --run_dir {q(d)}',
    'report': f'searchless-report --run_dir {q(d)}',
  }
  return {**hints, **(read_json(pathlib.Path(run_dir) / COMMANDS_FILE) or {})}


# --- Which player is this run's model ---------------------------------------------------------------


def _checkpoint(spec: str) -> str | None:
  """The checkpoint of a ``checkpoint:PATH,...`` agent spec, else None."""
  kind, _, rest = str(spec).partition(':')
  return rest.split(',')[0] if kind == 'checkpoint' and rest else None


def model_names(results: artefacts.MatchResults | None, names: Sequence[str], train_dir: pathlib.Path) -> set[str]:
  """The match players that are this run's model: checkpoint agents of `train_dir`; else the only checkpoint
  agent; else players whose name starts with 'searchless'."""
  checkpoints = {
    a['name']: path for a in (results.agents if results else []) if (path := _checkpoint(a.get('spec', ''))) is not None
  }
  here = os.path.abspath(train_dir)
  found = {name for name, path in checkpoints.items() if os.path.abspath(path) == here}
  if not found and len(checkpoints) == 1:
    found = set(checkpoints)
  return found or {n for n in names if n.startswith('searchless')}


def other_model(results: artefacts.MatchResults | None, models: set[str]) -> str | None:
  """The match's other checkpoint agent (the model this run's is compared with), if any."""
  return next(
    (
      a['name']
      for a in (results.agents if results else [])
      if _checkpoint(a.get('spec', '')) is not None and a['name'] not in models
    ),
    None,
  )


# --- What the sections share ------------------------------------------------------------------------


class Context:
  """The sections' shared state: paths, commands, and the facts and headline numbers for the summary."""

  def __init__(self, run_dir: pathlib.Path, out_dir: pathlib.Path, data_dir: pathlib.Path | None = None):
    self.paths = RunPaths(run_dir, data_dir)
    self.out_dir = out_dir
    self.cmds = commands(run_dir, data_dir)
    self.facts: dict[str, str] = {}  # Summary facts: 'Engine', 'Data', 'Model', 'Training'.
    self.headlines: dict[str, tuple[str, str]] = {}  # Summary cards: label -> (value, detail).
    self.manifest: artefacts.AnnotationManifest | None = None  # Set by the dataset section.

  def not_run(self, section: Section, what: str, *steps: str) -> Section:
    """Marks `section` as not run: why, and the commands of `steps` that make its artefacts."""
    section.status = NOT_RUN
    section.blocks = [
      Callout('not-run', f'{what} To make it, run:'),
      Code('\n'.join(self.cmds[s] for s in steps)),
      Text(f'(or the whole job: `{self.cmds["all"]}`)'),
    ]
    return section
