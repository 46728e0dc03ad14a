"""Paired comparisons of two evaluations of models on the same boards, puzzles and games.

Two checkpoints evaluated on the same 2,000 held-out boards differ by less than either's
own interval, yet most of that spread is the boards', shared by both: the per-board
difference has a far narrower interval. The same holds for the dev puzzles (each solved
by one, both or neither) and for matches played from the same openings (game N of one
match starts where game N of the other does).

An evaluation folder is what `searchless.evaluation.strength.measure` writes
(``searchless-strength measure``): ``heldout/boards.jsonl`` (`searchless.evaluation.evaluate`),
``puzzles/results.csv`` (`searchless.evaluation.puzzles`) and ``match/games.pgn``
(`searchless.evaluation.tournament`); a part missing from either folder is left out.

>>> mean_difference([0.5, 1.0, 0.0], [0.0, 1.0, 0.0])
Difference(n=3, mean=0.16666666666666666, half_width_95=0.3266666666666667)
"""

import csv
import json
import math
import pathlib
from typing import Any, NamedTuple

import chess.pgn

from searchless.plumbing import errors

HELDOUT_METRICS = ('log_loss', 'action_accuracy', 'kendall_tau')  # Per board, in boards.jsonl's `metrics`.
PLAYER = 'searchless'  # The measured model's name in a match's PGN (`strength.measure` plays it under this name).
Z95 = 1.96  # Two-sided 95% normal quantile: the intervals below are mean +- Z95 standard errors.


class Difference(NamedTuple):
  """The mean of paired differences (new - base) and the half-width of its 95% interval."""

  n: int  # Pairs.
  mean: float
  half_width_95: float  # Z95 times the standard error of the mean (sample standard deviation / sqrt(n)).


def mean_difference(new: list[float], base: list[float]) -> Difference:
  """The paired difference new - base, element by element."""
  if len(new) != len(base):
    raise ValueError(f'paired lists differ in length: {len(new)} and {len(base)}')
  if not new:
    raise ValueError('nothing to compare: no pairs')
  d = [a - b for a, b in zip(new, base)]
  mean = sum(d) / len(d)
  var = sum((x - mean) ** 2 for x in d) / (len(d) - 1) if len(d) > 1 else 0.0
  return Difference(len(d), mean, Z95 * math.sqrt(var / len(d)))


def _heldout(folder: pathlib.Path) -> dict[str, dict[str, Any]]:
  with open(folder / 'boards.jsonl') as f:
    return {r['fen']: r['metrics'] for r in map(json.loads, f)}


def heldout(base: pathlib.Path, new: pathlib.Path) -> dict[str, Difference]:
  """Per-metric paired differences over the boards both evaluated (a board's metric left out where either is
  null, as tau-b is on a board of one move)."""
  a, b = _heldout(new), _heldout(base)
  out = {}
  for name in HELDOUT_METRICS:
    pairs = [
      (a[fen][name], b[fen][name])
      for fen in a.keys() & b.keys()
      if a[fen].get(name) is not None and b[fen].get(name) is not None
    ]
    pairs.sort()  # Sets have no order; the sums must not depend on it.
    out[name] = mean_difference([p[0] for p in pairs], [p[1] for p in pairs])
  return out


class Puzzles(NamedTuple):
  """The puzzles both solved or failed: counts, and those only one of them solved."""

  n: int  # Puzzles in both.
  base_solved: int
  new_solved: int
  new_only: int  # Solved by new, failed by base.
  base_only: int

  @property
  def z(self) -> float:
    """McNemar's statistic: (new_only - base_only) / sqrt(new_only + base_only), normal under no difference.

    >>> round(Puzzles(1500, 418, 409, 31, 40).z, 2)
    -1.07
    """
    discordant = self.new_only + self.base_only
    return (self.new_only - self.base_only) / math.sqrt(discordant) if discordant else 0.0

  @property
  def difference(self) -> Difference:
    """The solved rate's paired difference new - base (each puzzle +1, -1 or 0) and its 95% interval.

    >>> d = Puzzles(1500, 418, 409, 31, 40).difference
    >>> round(d.mean, 4), round(d.half_width_95, 4)
    (-0.006, 0.011)
    """
    if not self.n:
      raise errors.BadInput('nothing to compare: no puzzles in both')
    mean = (self.new_only - self.base_only) / self.n
    squares = self.new_only + self.base_only - self.n * mean**2
    var = squares / (self.n - 1) if self.n > 1 else 0.0
    return Difference(self.n, mean, Z95 * math.sqrt(var / self.n))


def _puzzles(path: pathlib.Path) -> dict[str, bool]:
  with open(path, newline='') as f:
    return {row['PuzzleId']: row['solved'] == '1' for row in csv.DictReader(f)}


def puzzles(base: pathlib.Path, new: pathlib.Path) -> Puzzles:
  """The puzzles in both ``results.csv`` files, paired by PuzzleId."""
  a, b = _puzzles(new), _puzzles(base)
  ids = a.keys() & b.keys()
  return Puzzles(
    len(ids),
    sum(b[i] for i in ids),
    sum(a[i] for i in ids),
    sum(a[i] and not b[i] for i in ids),
    sum(b[i] and not a[i] for i in ids),
  )


class Match(NamedTuple):
  """Two matches paired game by game (by the PGN's Round)."""

  games: int  # Rounds played in both.
  base_score: float  # The player's points in those games.
  new_score: float
  per_game: Difference  # new - base, points a game.
  new_better: int  # Games the new one scored more in.
  new_worse: int


def _scores(path: pathlib.Path, player: str) -> dict[int, float]:
  scores = {}
  with open(path) as f:
    while (game := chess.pgn.read_game(f)) is not None:
      h = game.headers
      if player not in (h.get('White'), h.get('Black')):
        raise errors.BadInput(
          f'{path}, round {h.get("Round")}: {player!r} did not play (White {h.get("White")!r}, '
          f'Black {h.get("Black")!r})'
        )
      white = {'1-0': 1.0, '0-1': 0.0, '1/2-1/2': 0.5}.get(h.get('Result', '*'))
      if white is None:
        continue  # Unfinished.
      scores[int(h['Round'])] = white if h['White'] == player else 1.0 - white
  return scores


def match(base: pathlib.Path, new: pathlib.Path, player: str = PLAYER) -> Match:
  """`player`'s games in two match PGN files, paired by round (the same opening and colour in each)."""
  a, b = _scores(new, player), _scores(base, player)
  rounds = sorted(a.keys() & b.keys())
  new_scores, base_scores = [a[r] for r in rounds], [b[r] for r in rounds]
  return Match(
    len(rounds),
    sum(base_scores),
    sum(new_scores),
    mean_difference(new_scores, base_scores),
    sum(x > y for x, y in zip(new_scores, base_scores)),
    sum(x < y for x, y in zip(new_scores, base_scores)),
  )


def compare(base: pathlib.Path, new: pathlib.Path) -> dict[str, Any]:
  """Every part two evaluation folders both hold: {'heldout': ..., 'puzzles': ..., 'match': ...}."""
  out: dict[str, Any] = {}
  if (base / 'heldout' / 'boards.jsonl').exists() and (new / 'heldout' / 'boards.jsonl').exists():
    out['heldout'] = heldout(base / 'heldout', new / 'heldout')
  if (base / 'puzzles' / 'results.csv').exists() and (new / 'puzzles' / 'results.csv').exists():
    out['puzzles'] = puzzles(base / 'puzzles' / 'results.csv', new / 'puzzles' / 'results.csv')
  if (base / 'match' / 'games.pgn').exists() and (new / 'match' / 'games.pgn').exists():
    out['match'] = match(base / 'match' / 'games.pgn', new / 'match' / 'games.pgn')
  if not out:
    raise errors.MissingInput(
      f'{base} and {new} share no evaluation (heldout/boards.jsonl, puzzles/results.csv, match/games.pgn)'
    )
  return out
