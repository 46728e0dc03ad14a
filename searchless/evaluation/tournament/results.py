"""A tournament's results: scores, pair results, Elo anchors and fit, ``OUT/results.json`` and its summary.

`tally` turns the games (`pgn_file.Record`s) into the content of
``results.json``: per-player scores, per-pair results, how games ended and the
BayesElo ratings (`searchless.evaluation.elo`) with the anchors of
`resolve_anchor`; `summary` is its text for a terminal.

>>> Game = collections.namedtuple('Game', 'white black result')
>>> games = [Game('A', 'B', '1-0'), Game('B', 'A', '1/2-1/2')]
>>> [(p['a'], p['b'], p['a_wins'], p['draws'], p['a_score']) for p in pair_results(games, ['B', 'A'])]
[('B', 'A', 0, 1, 0.25)]
>>> score_line(scores(games), ['A', 'B'])
'A: 1.5/2 | B: 0.5/2'
"""

import collections
from collections.abc import Iterable, Sequence
import dataclasses
import os
from typing import Any

from searchless.core import artefacts
from searchless.evaluation import elo as elo_lib
from searchless.evaluation.tournament import games as games_lib
from searchless.evaluation.tournament import pgn_file
from searchless.evaluation.tournament import scheduling
from searchless.plumbing import errors

RESULTS_FILE = artefacts.MatchResults.FILE


def points(result: str) -> tuple[float, float]:
  """White's and Black's points of a result."""
  return {'1-0': (1.0, 0.0), '0-1': (0.0, 1.0), '1/2-1/2': (0.5, 0.5)}[result]


def scores(records: Iterable[Any]) -> dict[str, list[float]]:
  """{name: [points, games]} of records with white, black and result."""
  table: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0])
  for r in records:
    add_score(table, r)
  return table


def add_score(table: dict[str, list[float]], record: Any) -> None:
  """Adds one game (white, black, result) to a `scores` table."""
  for name, won in zip((record.white, record.black), points(record.result)):
    table[name][0] += won
    table[name][1] += 1


def score_line(table: dict[str, list[float]], names: Sequence[str]) -> str:
  """'A: 1.5/2 | B: 0.5/2': the scores of `names` that played."""
  return ' | '.join(f'{n}: {table[n][0]:g}/{table[n][1]}' for n in names if n in table)


def pair_results(records: Iterable[Any], order: Sequence[str]) -> list[dict]:
  """Per pair of players (in `order`, then first seen): games, wins, draws and the first's score."""
  rank = {name: i for i, name in enumerate(order)}
  pairs: dict[tuple[str, str], dict] = {}
  for r in records:
    a, b = sorted((r.white, r.black), key=lambda n: (rank.get(n, len(rank)), n))
    entry = pairs.setdefault((a, b), {'a': a, 'b': b, 'games': 0, 'a_wins': 0, 'draws': 0, 'b_wins': 0})
    entry['games'] += 1
    won = points(r.result)[0 if r.white == a else 1]
    entry['a_wins' if won == 1 else 'b_wins' if won == 0 else 'draws'] += 1
  out = []
  for entry in pairs.values():
    entry['a_score'] = (entry['a_wins'] + entry['draws'] / 2) / entry['games']
    out.append(entry)
  return out


def resolve_anchor(anchor: str | None, entrants: Sequence[scheduling.Entrant]) -> dict[str, float]:
  """The fixed ratings of ``NAME[=ELO]`` (ELO default 0), ``ladder`` (UCI_Elo agents), ``none``/None (mean 0)
  or ``auto`` (ladder when some agent has a UCI_Elo, else none).

  >>> resolve_anchor('auto', [scheduling.Entrant('sf', 'stockfish:nodes=1,elo=1350', 1350)])
  {'sf': 1350.0}
  >>> resolve_anchor('sf=2000', [scheduling.Entrant('sf', 'stockfish:nodes=1')])
  {'sf': 2000.0}
  """
  ladder = {e.name: float(e.elo) for e in entrants if e.elo is not None}
  if anchor is None or anchor == 'none':
    return {}
  if anchor == 'auto':
    return ladder
  if anchor == 'ladder':
    if not ladder:
      raise errors.BadInput('--anchor ladder needs agents with a UCI_Elo, e.g. stockfish:nodes=1000,elo=1350')
    return ladder
  names = {e.name for e in entrants}
  name, eq, value = anchor.rpartition('=')
  if eq and name in names:
    try:
      return {name: float(value)}
    except ValueError:
      pass
  if anchor in names:
    return {anchor: 0.0}
  raise errors.BadInput(f'--anchor {anchor!r}: expected NAME[=ELO], ladder or none with NAME one of {sorted(names)}')


def _kind(termination: str) -> str:
  """'max plies (400)' -> 'max plies', 'adjudication: draw' -> 'adjudication'."""
  return termination.split(':')[0].split(' (')[0]


def tally(
  records: Sequence[pgn_file.Record],
  entrants: Sequence[scheduling.Entrant],
  *,
  games_file: str,
  played: int,
  workers: int,
  wall_seconds: float,
  adjudication: games_lib.Adjudication,
  anchors: dict[str, float],
  confidence: float = 0.95,
) -> dict:
  """The content of results.json: scores, pairs, endings and the Elo fit (or why it failed) of `records`."""
  names = [e.name for e in entrants]
  results = {
    'games_file': games_file,
    'games': len(records),
    'played_this_run': played,
    'workers': workers,
    'wall_seconds': round(wall_seconds, 3),
    'games_per_minute': round(60 * played / wall_seconds, 2) if played and wall_seconds > 0 else None,
    'agents': [e._asdict() for e in entrants],
    'adjudication': dataclasses.asdict(adjudication),
    'scores': {n: {'points': p, 'games': g} for n, (p, g) in scores(records).items()},
    'pairs': pair_results(records, names),
    'terminations': dict(collections.Counter(_kind(r.termination) for r in records)),
    'endings': dict(
      collections.Counter(r.reason if r.termination == 'normal' else _kind(r.termination) for r in records)
    ),
    'anchors': anchors,
    'elo': None,
    'elo_table': None,
    'elo_error': None,
  }
  try:
    ratings = elo_lib.fit(
      [elo_lib.Game(r.white, r.black, r.result) for r in records], anchors=anchors or None, confidence=confidence
    )
    results['elo'], results['elo_table'] = ratings.to_dict(), ratings.table()
  except ValueError as error:
    results['elo_error'] = str(error)
  return results


def write_results(out_dir: str, results: dict) -> str:
  """Writes ``out_dir/results.json``; returns its path."""
  path = os.path.join(out_dir, RESULTS_FILE)
  artefacts.MatchResults(**results).write(path)  # Typed and versioned: the report reads it back.
  return path


def summary(results: dict) -> str:
  """The results as text: pair results, endings, the Elo table and the run's speed."""
  lines = []
  for p in results['pairs']:
    lines.append(
      f'{p["a"]} - {p["b"]}: +{p["a_wins"]} ={p["draws"]} -{p["b_wins"]} '
      f'({p["a_wins"] + p["draws"] / 2:g}/{p["games"]}, {100 * p["a_score"]:.1f}%)'
    )
  lines.append('terminations: ' + ', '.join(f'{k} {v}' for k, v in sorted(results['endings'].items())))
  if results['elo_table']:
    anchored = (
      ', anchored: ' + ', '.join(f'{k}={v:g}' for k, v in results['anchors'].items())
      if results['anchors']
      else ', mean 0'
    )
    lines += [f'Elo (BayesElo, {100 * results["elo"]["confidence"]:g}% intervals{anchored}):', results['elo_table']]
  else:
    lines.append(f'Elo: not fitted: {results["elo_error"]}')
  rate = results['games_per_minute']
  lines.append(
    f'played {results["played_this_run"]} game(s) in {results["wall_seconds"]:.1f} s'
    + (f' ({rate:g} games/minute, {results["workers"]} workers)' if rate else '')
    + f'; {results["games"]} in {results["games_file"]}'
  )
  return '\n'.join(lines)
