"""Who plays whom: entrants (agent specs with unique names) and the games of a tournament, by round.

Round r (1-based) of a pair is played from opening ``(r - 1) // 2`` (cycled),
the pair's first entrant having White in odd rounds; a game is known by its
`Task.key` (round, White, Black), which is how a rerun finds the games
already played.

>>> import chess
>>> a, b = Entrant('A', 'stockfish:nodes=1'), Entrant('B', 'stockfish:nodes=2')
>>> ops = [openings_lib.Opening(name, chess.STARTING_FEN) for name in ('o1', 'o2')]
>>> [(t.round, t.white.name, t.black.name, t.opening.name) for t in schedule([(a, b)], ops)]
[(1, 'A', 'B', 'o1'), (2, 'B', 'A', 'o1'), (3, 'A', 'B', 'o2'), (4, 'B', 'A', 'o2')]
>>> [e.name for e in resolve_entrants(['stockfish:nodes=1,name=X', 'stockfish:nodes=1,elo=1350,name=Y'])]
['X', 'Y']
"""

import collections
from collections.abc import Sequence
from typing import NamedTuple

from searchless.evaluation import openings as openings_lib
from searchless.model import loading
from searchless.play import agents as agents_lib
from searchless.plumbing import errors


class Entrant(NamedTuple):
  name: str  # Display name (PGN White/Black): the spec's name= or the agent's name.
  spec: str  # agents.from_spec string.
  elo: int | None = None  # Stockfish UCI_Elo, if the spec sets one (a ladder anchor).


class Task(NamedTuple):
  round: int
  white: Entrant
  black: Entrant
  opening: openings_lib.Opening

  @property
  def key(self) -> tuple[int, str, str]:
    return self.round, self.white.name, self.black.name


def schedule(
  pairs: Sequence[tuple[Entrant, Entrant]], openings: Sequence[openings_lib.Opening], games_per_pair: int | None = None
) -> list[Task]:
  """Games of each pair in rounds 1..games_per_pair (default: every opening with both colours), by round."""
  if not openings:
    raise errors.BadInput('no openings to play')
  total = 2 * len(openings) if games_per_pair is None else games_per_pair
  if total < 1:
    raise errors.BadInput(f'games_per_pair must be >= 1, got {games_per_pair}')
  tasks = []
  for r in range(1, total + 1):
    opening = openings[(r - 1) // 2 % len(openings)]
    for first, second in pairs:
      white, black = (first, second) if r % 2 else (second, first)
      tasks.append(Task(r, white, black, opening))
  return tasks


def resolve_entrants(specs: Sequence[str]) -> list[Entrant]:
  """Entrants of agent specs, with unique display names.

  A spec without ``name=`` is built once here to learn its agent's name (and
  so checked early); one with ``name=`` is only parsed.
  """
  entrants = []
  for spec in specs:
    kind, target, params = agents_lib.parse_spec(spec)
    name = params.get('name')
    elo = int(params['elo']) if kind == 'stockfish' and 'elo' in params else None
    if not name:
      agent = agents_lib.from_spec(spec)
      try:
        name, elo = agent.name, getattr(agent, 'elo', elo)
      finally:
        agent.close()
      if kind == 'checkpoint' and loading.is_name(target):  # A named model goes by the name the user gave.
        name = target
    entrants.append(Entrant(name, spec, elo))
  by_name = collections.defaultdict(list)
  for entrant in entrants:
    by_name[entrant.name].append(entrant.spec)
  for name, named in by_name.items():
    if len(named) > 1:
      raise errors.BadInput(f'agent names must be unique: {name!r} is the name of {named}; add ,name=NAME to the specs')
  return entrants
