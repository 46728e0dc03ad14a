"""The JSON files one step writes and another reads: typed, versioned, checked on reading.

Each artefact is a frozen dataclass with a format name and version. `write`
stores it with a ``format`` field (``name/version``); `read` refuses a file of
another format or version with one line naming the file, so a report never
misreads an older run.

* `AnnotationManifest` - ``DATA/manifest.json`` (searchless-annotate): how a dataset was made.
* `TrainingSummary`    - ``WORKDIR/summary.json`` (searchless-train): how far a training run got.
* `EvaluationMetrics`  - ``OUT/metrics.json`` (searchless-evaluate): the means over held-out boards.
* `PuzzleSummary`      - ``OUT/summary.json`` (searchless-puzzles): puzzles solved, by rating band.
* `MatchResults`       - ``OUT/results.json`` (searchless-tournament): scores, pairs, Elo.

>>> metrics = PuzzleSummary(agent='a', agent_spec='random', puzzles='p.csv', n=2, solved=1,
...                         accuracy=0.5, band_width=200, bands=[], seconds=0.1)
>>> PuzzleSummary.from_json(metrics.to_json()) == metrics
True
>>> PuzzleSummary.from_json('{"format": "searchless-puzzles/0"}', source='old/summary.json')  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
searchless.core.artefacts.ArtefactError: old/summary.json: format 'searchless-puzzles/0', but this searchless reads ...
"""

import dataclasses
import json
import os
from typing import Any, ClassVar, TypeVar

from searchless.plumbing import atomic
from searchless.plumbing import errors

_A = TypeVar('_A', bound='Artefact')


class ArtefactError(errors.BadInput):
  """A file is not the artefact (or the version of it) its reader expects."""


@dataclasses.dataclass(frozen=True)
class Artefact:
  """Base of the artefacts: JSON with a ``format`` field, checked on reading."""

  FORMAT: ClassVar[str] = ''  # The format's name, e.g. 'searchless-annotate'.
  VERSION: ClassVar[int] = 1  # Bumped on any change a reader of the previous version would misread.
  FILE: ClassVar[str] = ''  # Its usual file name in a step's output directory.

  @classmethod
  def format_id(cls) -> str:
    return f'{cls.FORMAT}/{cls.VERSION}'

  def to_dict(self) -> dict[str, Any]:
    return {'format': self.format_id(), **dataclasses.asdict(self)}

  def to_json(self) -> str:
    return json.dumps(self.to_dict(), indent=2, sort_keys=True) + '\n'

  @classmethod
  def from_dict(cls: type[_A], data: dict[str, Any], source: str = '<json>') -> _A:
    found = data.get('format') if isinstance(data, dict) else None
    if found is None:
      raise ArtefactError(f'{source}: not a {cls.FORMAT} file (no "format" field)')
    if found != cls.format_id():
      raise ArtefactError(f'{source}: format {found!r}, but this searchless reads {cls.format_id()!r}')
    fields = dataclasses.fields(cls)
    missing = [
      f.name
      for f in fields
      if f.name not in data and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    if missing:
      raise ArtefactError(f'{source}: {cls.format_id()} without {", ".join(missing)}')
    return cls(**{f.name: data[f.name] for f in fields if f.name in data})

  @classmethod
  def from_json(cls: type[_A], text: str, source: str = '<json>') -> _A:
    try:
      data = json.loads(text)
    except json.JSONDecodeError as error:
      raise ArtefactError(f'{source}: not JSON ({error})') from None
    return cls.from_dict(data, source)

  @classmethod
  def read(cls: type[_A], path: str | os.PathLike) -> _A:
    """Reads `path` (local, or any Beam filesystem such as gs://), checking its format."""
    path = os.fspath(path)
    if '://' in path:
      from apache_beam.io.filesystems import FileSystems  # Only remote paths need Beam.

      with FileSystems.open(path) as f:
        text = f.read().decode('utf-8')
    else:
      with open(path, encoding='utf-8') as f:
        text = f.read()
    return cls.from_json(text, source=path)

  @classmethod
  def read_or_none(cls: type[_A], path: str | os.PathLike) -> _A | None:
    """`read(path)`, or None when the file does not exist (a step that has not run)."""
    path = os.fspath(path)
    if '://' in path:
      from apache_beam.io.filesystems import FileSystems

      return cls.read(path) if FileSystems.exists(path) else None
    return cls.read(path) if os.path.exists(path) else None

  def write(self, path: str | os.PathLike) -> None:
    """Writes the artefact whole or not at all (`atomic`: a crash leaves the old one)."""
    path = os.fspath(path)
    if '://' not in path:
      os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    atomic.write_text(path, self.to_json())  # A store's (gs://) own atomic create and rename there.


@dataclasses.dataclass(frozen=True)
class AnnotationManifest(Artefact):
  """How an annotated dataset was made and what it holds (``searchless-annotate``)."""

  FORMAT: ClassVar[str] = 'searchless-annotate'
  FILE: ClassVar[str] = 'manifest.json'

  code: dict[str, Any]  # Package version, Python, git commit.
  command: list[str]  # The command line that made it.
  inputs: dict[str, list[str]]  # 'train' (split by game hash) and, with --test_input, 'test' PGN files.
  output_dir: str  # Where the bags are.
  engine: dict[str, Any]  # EngineConfig.describe(), the engine's UCI id ('id') and its binary's sha256.
  games: dict[str, Any]  # read, kept, skipped by reason, corrupt input files, filters.
  split: dict[str, Any]  # test_fraction, by, dedup_by, test boards also in train.
  splits: dict[str, dict[str, int]]  # Per split: boards seen, kept, annotated, failed, terminal, action values.
  engine_restarts: int  # Engine processes restarted after a fault.
  outputs: dict[str, Any]  # Per split, per record kind: bag files.
  timings: dict[str, Any]  # wall_seconds and per-board engine time distributions.


@dataclasses.dataclass(frozen=True)
class ImportManifest(Artefact):
  """How a imported dataset was made and what it holds (``searchless-import``)."""

  FORMAT: ClassVar[str] = 'searchless-import'
  FILE: ClassVar[str] = 'manifest.json'

  code: dict[str, Any]  # Package version, Python, git commit.
  command: list[str]  # The command line that made it.
  inputs: dict[str, list[str]]  # 'games' (dumps with [%eval] comments) and 'eval_db' (lichess_db_eval.jsonl) files.
  output_dir: str  # Where the bags are.
  games: dict[str, Any]  # read, kept (with evals), skipped by reason (no_evals among them), filters.
  lines: dict[str, Any]  # Evaluation-database lines: read, kept, skipped by reason.
  corrupt_input_files: int  # Inputs that ended in a corrupt stream (with --skip_corrupt_inputs).
  sources: dict[str, dict[str, dict[str, int]]]  # Per source: boards by depth and by knodes (powers of ten).
  split: dict[str, Any]  # test_fraction, by, dedup_by.
  splits: dict[str, dict[str, int]]  # Per split: boards before and after merging, move values, best moves.
  outputs: dict[str, Any]  # Per split, per record kind: bag files and records.
  timings: dict[str, Any]  # wall_seconds.


@dataclasses.dataclass(frozen=True)
class TrainingSummary(Artefact):
  """How far a training run got (``searchless-train``, rewritten at the end of every run)."""

  FORMAT: ClassVar[str] = 'searchless-train'
  FILE: ClassVar[str] = 'summary.json'

  step: int  # Optimiser steps done (the latest checkpoint).
  num_steps: int  # Steps the config asks for.
  complete: bool  # step >= num_steps: the run is finished.
  num_params: int  # Trainable parameters of the model.
  num_return_buckets: int  # Value classes of the model's output.
  policy: str  # action_value | state_value | behavioral_cloning.
  batch_size: int  # Global batch size.
  overrides: list[str]  # The config overrides of the last run (key=value).
  wall_seconds: float  # Wall-clock of the last run.


@dataclasses.dataclass(frozen=True)
class EvaluationMetrics(Artefact):
  """A checkpoint's means over held-out boards (``searchless-evaluate``)."""

  FORMAT: ClassVar[str] = 'searchless-evaluate'
  FILE: ClassVar[str] = 'metrics.json'

  boards: int  # Boards evaluated.
  kendall_tau_boards: int  # Boards with a defined tau (two or more distinct values).
  dropped_boards: int  # Boards left out (incomplete action values).
  policy: str  # The checkpoint's policy.
  checkpoint: str  # What was evaluated.
  data: str  # On which records.
  seconds: float  # Wall-clock.
  # The means (searchless.evaluation.metrics.METRICS); None where the policy has no such number.
  action_accuracy: float | None = None  # Fraction of boards where the model's best move is Stockfish's.
  kendall_tau: float | None = None  # Mean per-board Kendall tau-b of model vs Stockfish move values.
  kendall_tau_reference_argsort: float | None = None  # The reference implementation's tau (on argsort permutations).
  log_loss: float | None = None  # Mean value-bucket log-loss in bits (-log2 p; training losses are in nats).
  l2_win_prob: float | None = None  # Mean squared error of win probabilities.
  entropy: float | None = None  # Mean entropy of the predicted bucket distributions (bits).
  consistency: float | None = None  # State-value policies: (board value - best next-board value)^2.


@dataclasses.dataclass(frozen=True)
class PuzzleSummary(Artefact):
  """Puzzles solved by an agent, overall and by rating band (``searchless-puzzles``)."""

  FORMAT: ClassVar[str] = 'searchless-puzzles'
  FILE: ClassVar[str] = 'summary.json'

  agent: str  # The agent's name.
  agent_spec: str  # The agent spec it was made from.
  puzzles: str  # The puzzle CSV.
  n: int  # Puzzles tried.
  solved: int  # Puzzles solved (every solver move right).
  accuracy: float  # solved / n.
  band_width: int  # Rating band width.
  bands: list[dict[str, Any]]  # Per band: lower, upper, n, solved, accuracy.
  seconds: float  # Wall-clock.


@dataclasses.dataclass(frozen=True)
class MatchResults(Artefact):
  """A tournament's games, scores and Elo (``searchless-tournament``)."""

  FORMAT: ClassVar[str] = 'searchless-tournament'
  FILE: ClassVar[str] = 'results.json'

  games_file: str  # The PGN of every game.
  games: int  # Games in it.
  played_this_run: int  # Games this run played (the rest were resumed from the PGN).
  workers: int  # Games played in parallel.
  wall_seconds: float  # Wall-clock of this run.
  games_per_minute: float | None  # Throughput of this run.
  agents: list[dict[str, Any]]  # Entrants: name and spec.
  adjudication: dict[str, Any]  # The adjudication rules.
  scores: dict[str, dict[str, float]]  # Per player: points and games.
  pairs: list[dict[str, Any]]  # Per pair of players: games, wins, draws.
  terminations: dict[str, int]  # How games ended (normal, adjudicated, forfeit, ...).
  endings: dict[str, int]  # Checkmate, repetition, ... counts.
  anchors: dict[str, float]  # Players whose Elo is fixed.
  elo: dict[str, Any] | None  # The BayesElo fit (None when it could not be fitted).
  elo_table: str | None  # The fit as a text table.
  elo_error: str | None  # Why the fit failed.
