"""Running a tournament: play the games not yet in ``OUT/games.pgn``, then rate them all.

`round_robin` (every pair, both colours from every opening) and `gauntlet`
(one candidate against each opponent) schedule their games
(`scheduling`) and call `run_tournament`: it plays the games a previous run
did not (`workers`), appending each to the games file as it finishes
(`pgn_file`), then rewrites the file in schedule order, fits the Elo ratings
and writes ``OUT/results.json`` (`results`). Ctrl-C keeps every finished game
and says how many.
"""

from collections.abc import Sequence
import itertools
import os
import sys
import time
from typing import Any


from searchless.evaluation import openings as openings_lib
from searchless.evaluation.tournament import games
from searchless.evaluation.tournament import pgn_file
from searchless.evaluation.tournament import results as results_lib
from searchless.evaluation.tournament import scheduling
from searchless.evaluation.tournament import workers as workers_lib
from searchless.plumbing import errors
from searchless.plumbing import progress_bars


def run_tournament(
  entrants: Sequence[scheduling.Entrant],
  tasks: Sequence[scheduling.Task],
  *,
  out_dir: str,
  workers: int = 1,
  adjudication: games.Adjudication = games.Adjudication(),
  anchor: str | None = 'auto',
  event: str = games.EVENT,
  progress: bool = True,
  confidence: float = 0.95,
) -> dict:
  """Plays the `tasks` not yet in ``out_dir/games.pgn`` and rates all its games; returns results.json's content."""
  if workers < 1:
    raise errors.BadInput(f'workers must be >= 1, got {workers}')
  anchors = results_lib.resolve_anchor(anchor, entrants)
  os.makedirs(out_dir, exist_ok=True)
  pgn_path = os.path.join(out_dir, pgn_file.GAMES_FILE)
  records, dropped = pgn_file.load_games(pgn_path)
  if dropped:
    print(f'warning: dropped {dropped} incomplete game(s) from {pgn_path}', file=sys.stderr)
    pgn_file.write_games(pgn_path, records)
  played = {r.key: r for r in records}
  for task in tasks:
    if task.key in played and played[task.key].opening != task.opening.name:
      raise errors.BadInput(
        f'{pgn_path}: round {task.round} {task.white.name} - {task.black.name} was played from '
        f'opening {played[task.key].opening!r}, not {task.opening.name!r}: use another --out'
      )
  todo = [t for t in tasks if t.key not in played]
  names = [e.name for e in entrants]
  scores = results_lib.scores(records)
  start = time.monotonic()
  bar = progress_bars.bar(
    total=len(tasks),
    initial=len(tasks) - len(todo),
    desc='games',
    unit='game',
    disable=not progress,
    dynamic_ncols=True,
  )
  bar.set_postfix_str(results_lib.score_line(scores, names), refresh=False)
  try:
    for _, text in workers_lib.play_all(todo, workers, adjudication, event):
      pgn_file.append(pgn_path, text)
      record = pgn_file.parse(text)
      records.append(record)
      results_lib.add_score(scores, record)
      bar.update(1)
      bar.set_postfix_str(results_lib.score_line(scores, names), refresh=False)
  except KeyboardInterrupt:  # Each finished game is in the games file already: counted there (the interrupt may
    # have come between a game's append and its count).
    kept = len(pgn_file.load_games(pgn_path)[0])
    raise KeyboardInterrupt(
      f'{kept} of {len(tasks)} games kept in {pgn_path}; rerun the same command to play the rest'
    ) from None
  finally:
    bar.close()
  wall = time.monotonic() - start
  order = {t.key: i for i, t in enumerate(tasks)}
  records.sort(key=lambda r: (order.get(r.key, len(order)), r.key[0]))  # Stable: unknown games keep their order.
  pgn_file.write_games(pgn_path, records)
  results = results_lib.tally(
    records,
    entrants,
    games_file=pgn_path,
    played=len(todo),
    workers=workers,
    wall_seconds=wall,
    adjudication=adjudication,
    anchors=anchors,
    confidence=confidence,
  )
  results_lib.write_results(out_dir, results)
  return results


def round_robin(
  specs: Sequence[str],
  openings: Sequence[openings_lib.Opening],
  *,
  out_dir: str,
  games_per_pair: int | None = None,
  **kwargs: Any,
) -> dict:
  """Every pair of agents plays from every opening with both colours; returns the results (see run_tournament)."""
  entrants = scheduling.resolve_entrants(specs)
  if len(entrants) < 2:
    raise errors.BadInput('a round robin needs at least two agents')
  tasks = scheduling.schedule(list(itertools.combinations(entrants, 2)), openings, games_per_pair)
  return run_tournament(entrants, tasks, out_dir=out_dir, **kwargs)


def gauntlet(
  candidate_spec: str,
  opponent_specs: Sequence[str],
  openings: Sequence[openings_lib.Opening],
  *,
  out_dir: str,
  games_per_pair: int | None = None,
  **kwargs: Any,
) -> dict:
  """The candidate plays each opponent from every opening with both colours (see run_tournament)."""
  if not opponent_specs:
    raise errors.BadInput('a gauntlet needs at least one opponent')
  entrants = scheduling.resolve_entrants([candidate_spec, *opponent_specs])
  tasks = scheduling.schedule([(entrants[0], other) for other in entrants[1:]], openings, games_per_pair)
  return run_tournament(entrants, tasks, out_dir=out_dir, **kwargs)
