"""One tournament from its settings, as ``searchless-tournament`` runs it: `run`.

`run` checks the settings, builds the `Adjudication`, reads the openings (or
makes them with Stockfish, saved as ``OUT/openings.pgn``) and plays a
`runner.round_robin` or `runner.gauntlet` into ``out_dir``. Its errors name
the command's flags (``--agent``, ``--openings``...): they are what a user set.
"""

from collections.abc import Sequence
import contextlib
import math
import os
import sys
from typing import Any

from searchless.engines import launch
from searchless.evaluation import openings as openings_lib
from searchless.evaluation.tournament import games
from searchless.evaluation.tournament import runner
from searchless.play import agents as agents_lib
from searchless.plumbing import errors
from searchless.plumbing import outputs

OPENINGS_FILE = 'openings.pgn'


def run(
  agents: Sequence[str],
  *,
  out_dir: str,
  openings: Sequence[str] | None = None,
  make_openings: int | None = None,
  opening_plies: int = 8,
  seed: int = 0,
  gauntlet: bool = False,
  games_per_pair: int | None = None,
  workers: int = 1,
  max_plies: int | None = 400,
  adjudicate_cp: int = 1300,
  eval_limit: str = 'time=0.01',
  draw_cp: int | None = None,
  draw_plies: int = 10,
  engine: str | None = None,
  anchor: str | None = 'auto',
  event: str = games.EVENT,
  progress: bool = True,
) -> dict:
  """Plays a tournament between agent specs; returns results.json's content (`runner.run_tournament`).

  `agents`: at least two specs (`searchless.play.agents`); with `gauntlet` the
  first plays each of the others, else every pair plays. Openings: the files
  `openings` (.pgn, .epd, .tsv; with `games_per_pair` fewer than every opening
  with both colours, ``ceil(games_per_pair / 2)`` of them sampled with `seed`)
  or `make_openings` balanced ones of `opening_plies` plies made with Stockfish.
  Adjudication: a draw after `max_plies`; a win when the evaluating Stockfish
  (`engine`, default: found; searching `eval_limit`) finds a mate or |eval| >
  `adjudicate_cp` (0: no evaluating engine); a draw when |eval| < `draw_cp` for
  `draw_plies` plies after move 40 (None: off). `anchor`: see
  `results.resolve_anchor`. `out_dir` has one writer (`outputs.sole_writer`: a second is refused, and a filesystem
  error names its file and ``--out``).
  """
  if len(agents) < 2:
    raise errors.BadInput('give at least two --agent SPECs')
  if (openings is None) == (make_openings is None):
    raise errors.BadInput('give either --openings FILE... or --make_openings N')
  if workers < 1:
    raise errors.BadInput(f'--workers must be >= 1, got {workers}')
  if games_per_pair is not None and games_per_pair < 1:
    raise errors.BadInput(f'--games_per_pair must be >= 1, got {games_per_pair}')
  adjudication = games.Adjudication(
    max_plies=max_plies,
    eval=adjudicate_cp > 0 or draw_cp is not None,
    eval_engine=engine,
    eval_limit=eval_limit,
    win_cp=adjudicate_cp if adjudicate_cp > 0 else None,
    draw_cp=draw_cp,
    draw_plies=draw_plies,
  )
  launch.check_executable(engine)
  if adjudication.needs_engine and not (engine or launch.find_stockfish()):
    print('warning: no Stockfish found: games are not adjudicated by evaluation', file=sys.stderr)
  if os.path.exists(out_dir) and not os.path.isdir(out_dir):
    raise errors.BadInput(f'--out {out_dir!r} is a file, not a directory')
  for spec in agents:
    agents_lib.parse_spec(spec)  # A bad spec fails before --out is made.
  with outputs.sole_writer(out_dir, 'searchless-tournament', '--out'):
    made = not os.path.exists(os.path.join(out_dir, OPENINGS_FILE))
    try:
      if make_openings is not None:
        chosen = openings_lib.make_openings(
          make_openings, openings_lib.MakeOptions(plies=opening_plies, seed=seed, engine_path=engine)
        )
        openings_lib.write_openings(chosen, os.path.join(out_dir, OPENINGS_FILE))
      else:
        chosen = [o for path in openings or () for o in openings_lib.read_openings(path)]
        if games_per_pair is not None:
          chosen = openings_lib.sample_openings(chosen, math.ceil(games_per_pair / 2), seed=seed)
      kwargs: dict[str, Any] = dict(
        out_dir=out_dir,
        games_per_pair=games_per_pair,
        workers=workers,
        adjudication=adjudication,
        anchor=anchor,
        event=event,
        progress=progress,
      )
      if gauntlet:
        return runner.gauntlet(agents[0], agents[1:], chosen, **kwargs)
      return runner.round_robin(agents, chosen, **kwargs)
    except BaseException:
      if made and make_openings is not None and set(os.listdir(out_dir)) <= {OPENINGS_FILE, '.lock'}:
        # A failed run leaves nothing behind but its games, if any (a rerun resumes them): not the openings it made.
        with contextlib.suppress(FileNotFoundError):
          os.remove(os.path.join(out_dir, OPENINGS_FILE))
      raise
