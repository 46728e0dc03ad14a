"""Tournaments between agents (searchless checkpoints, Stockfish, UCI engines) and their Elo.

    results = tournament.run(['checkpoint:runs/demo/train', 'stockfish:nodes=1000,elo=1500'],
                             make_openings=10, out_dir='runs/demo/ladder')
    print(tournament.summary(results))

The modules, by concern:

* `games`: one game (`play_game`) and how it ends (`Adjudication`: the rules,
  draw claims, adjudication by an evaluating Stockfish, a ply limit, illegal
  moves and crashed engines);
* `scheduling`: entrants with unique names and the games of each pair by round
  (`schedule`; round r is played from opening ``(r - 1) // 2``, the pair's
  first agent having White in odd rounds);
* `workers`: games played by worker processes (multiprocessing, 'spawn'),
  each building its agents from their spec strings once;
* `pgn_file`: ``OUT/games.pgn``, appended as games finish, so a rerun with the
  same output directory only plays the games (round + White + Black) not in
  it yet;
* `results`: scores, pair results, BayesElo ratings (`searchless.evaluation.elo`)
  and anchors, ``OUT/results.json`` and its `summary`;
* `runner`: `round_robin`, `gauntlet` and `run_tournament`, which tie these
  together; `job`: `run`, a tournament from the command's settings
  (``searchless-tournament``, `searchless.commands.tournament`).

>>> import chess
>>> from searchless.evaluation import openings as openings_lib
>>> a, b = Entrant('A', 'stockfish:nodes=1'), Entrant('B', 'stockfish:nodes=2')
>>> ops = [openings_lib.Opening(name, chess.STARTING_FEN) for name in ('o1', 'o2')]
>>> [(t.round, t.white.name, t.black.name, t.opening.name) for t in schedule([(a, b)], ops)]
[(1, 'A', 'B', 'o1'), (2, 'B', 'A', 'o1'), (3, 'A', 'B', 'o2'), (4, 'B', 'A', 'o2')]
"""

from searchless.evaluation.tournament.games import Adjudication
from searchless.evaluation.tournament.games import EVENT
from searchless.evaluation.tournament.games import Evaluator
from searchless.evaluation.tournament.games import make_evaluator
from searchless.evaluation.tournament.games import play_game
from searchless.evaluation.tournament.games import SITE
from searchless.evaluation.tournament.job import OPENINGS_FILE
from searchless.evaluation.tournament.job import run
from searchless.evaluation.tournament.pgn_file import GAMES_FILE
from searchless.evaluation.tournament.pgn_file import Record
from searchless.evaluation.tournament.pgn_file import RESULTS
from searchless.evaluation.tournament.results import pair_results
from searchless.evaluation.tournament.results import resolve_anchor
from searchless.evaluation.tournament.results import RESULTS_FILE
from searchless.evaluation.tournament.results import summary
from searchless.evaluation.tournament.runner import gauntlet
from searchless.evaluation.tournament.runner import round_robin
from searchless.evaluation.tournament.runner import run_tournament
from searchless.evaluation.tournament.scheduling import Entrant
from searchless.evaluation.tournament.scheduling import resolve_entrants
from searchless.evaluation.tournament.scheduling import schedule
from searchless.evaluation.tournament.scheduling import Task
from searchless.evaluation.tournament.workers import Worker

__all__ = [
  'Adjudication',
  'EVENT',
  'Entrant',
  'Evaluator',
  'GAMES_FILE',
  'OPENINGS_FILE',
  'RESULTS',
  'RESULTS_FILE',
  'Record',
  'SITE',
  'Task',
  'Worker',
  'gauntlet',
  'make_evaluator',
  'pair_results',
  'play_game',
  'resolve_anchor',
  'resolve_entrants',
  'round_robin',
  'run',
  'run_tournament',
  'schedule',
  'summary',
]
