"""The campaign's match step: its model against Stockfish at ``UCI_Elo`` 1350, the issue's game target.

Each evaluated checkpoint plays the same match, so the curve has the games the target is measured on beside
its puzzles: `games` games from the shared named openings (``ceil(games / 2)`` of them sampled with seed 0, both
colours: the same openings at every point), against ``stockfish:nodes=100000,elo=1350`` (a node limit plays the
same whatever the machine's load), in WORKDIR/eval/STEP/match. It is resumable: a rerun continues from the
match's PGN. The record gives the score and the model's BayesElo anchored on the opponent's 1350, with its 95%
interval.
"""

from collections.abc import Sequence
import pathlib
import time
from typing import Any

from searchless.commands import campaign_log

OPPONENT_ELO = 1350  # The target: a positive score against Stockfish at this UCI_Elo.
OPPONENT_LIMIT = 'nodes=100000'  # The opponent's search a move: ~0.1 s on this machine, the same play under load.
GAMES = 100  # The target asks for >= 40; 100 give BayesElo within about +-65.
NAME = 'searchless'  # The model's name in the match's PGN and results.


def named_openings(shared: pathlib.Path) -> list[pathlib.Path]:
  """The opening files a match samples from, in the order sampled: SHARED/data/openings/*.tsv, sorted. Matches
  pair game by game only if they sample the same list (`benchmarks/pretrained_strength.py` uses it too)."""
  return sorted((shared / 'data' / 'openings').glob('*.tsv'))


def opponent(limit: str = OPPONENT_LIMIT) -> str:
  """The opponent's agent spec.

  >>> opponent()
  'stockfish:nodes=100000,elo=1350,name=stockfish-elo1350'
  """
  return f'stockfish:{limit},elo={OPPONENT_ELO},name=stockfish-elo{OPPONENT_ELO}'


def match_model(model_dir: pathlib.Path, out: pathlib.Path, openings: Sequence[pathlib.Path], *, games: int = GAMES,
                workers: int = 2, limit: str = OPPONENT_LIMIT) -> dict[str, Any]:
  """Plays `model_dir` (a run or an export) against `opponent(limit)` for `games` games into `out`; its record.

  `openings`: the opening files sampled (.tsv, .pgn, .epd). Core-hours count this process and the workers and
  engines it started and saw finish (the match's whole CPU: each game's processes end with the match).
  """
  from searchless.evaluation import tournament
  start, cpu = time.time(), time.process_time() + campaign_log.children_cpu_seconds()
  spec = opponent(limit)
  results = tournament.run([f'checkpoint:{model_dir},name={NAME}', spec], gauntlet=True,
                           openings=[str(p) for p in openings], games_per_pair=games, workers=workers,
                           out_dir=str(out), progress=False)
  pair = results['pairs'][0]
  record: dict[str, Any] = {'step': 'match', 'opponent': spec, 'games': pair['games'], 'wins': pair['a_wins'],
                            'draws': pair['draws'], 'losses': pair['b_wins'], 'score': round(pair['a_score'], 4)}
  if results['elo']:  # None when BayesElo could not rate the match.
    rating = next(r for r in results['elo']['players'] if r['name'] == NAME)
    record.update(bayeselo=round(rating['elo']), bayeselo95=[round(rating['lower']), round(rating['upper'])])
  used = time.process_time() + campaign_log.children_cpu_seconds() - cpu
  return {**record, 'wall_seconds': round(time.time() - start, 1), 'core_hours': round(used / 3600, 4)}
