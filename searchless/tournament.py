"""Tournaments between agents (searchless checkpoints, Stockfish, UCI engines) and their Elo.

`play_game` plays one game between two `agents.Agent`s from an `Opening`; each
agent is handed a copy of the board *with its move history*, so repetition
rules work for it. A game ends (`Adjudication` sets which rules apply; the
``Termination`` tag and a comment after the last move say which did):

* by the rules: checkmate, stalemate, insufficient material, fivefold
  repetition, seventy-five moves (``Termination "normal"``);
* by a draw claim, as the reference ends games: the position occurred a third
  time (``board.is_repetition()``) or the fifty-move rule can be claimed
  (``Termination "normal"``; `claim_draws`);
* by adjudication with an evaluating Stockfish (`eval`): after every move the
  position is searched at `eval_limit` (reference: 10 ms) and the game is won
  by the side the score favours when it finds a mate or |score| > `win_cp`
  (reference: 1300); optionally drawn when |score| < `draw_cp` for `draw_plies`
  consecutive plies after move `draw_after_move` (off by default)
  (``Termination "adjudication: ..."``); off when no Stockfish is found;
* a draw after `max_plies` plies played from the opening
  (``Termination "max plies (N)"``);
* a loss for an agent that plays an illegal move (``"illegal move by NAME:
  MOVE"``; also a UCI engine's bestmove that python-chess refuses) or raises,
  e.g. because its engine died (``"engine crash: NAME: ERROR"``; the worker
  then starts that agent afresh for its next game).

Scheduling: `round_robin` (every pair, both colours from every opening) and
`gauntlet` (one candidate against each opponent) run `run_tournament`: games
are played by `workers` processes (multiprocessing, 'spawn'), each building
its agents from their spec strings once and reusing them for all its games.
Every finished game is appended to ``OUT/games.pgn`` at once, so nothing is
lost on a crash, and a rerun with the same output directory only plays the
games (round + White + Black) not in it yet. At the end the file is rewritten
in schedule order (by round), the Elo ratings of all its games are fitted
(`searchless.elo`, BayesElo) and ``OUT/results.json`` written.

Round r (1-based) of a pair is played from opening ``(r - 1) // 2`` (cycled),
the pair's first agent having White in odd rounds.

>>> a, b = Entrant('A', 'stockfish:nodes=1'), Entrant('B', 'stockfish:nodes=2')
>>> ops = [openings_lib.Opening(name, chess.STARTING_FEN) for name in ('o1', 'o2')]
>>> [(t.round, t.white.name, t.black.name, t.opening.name) for t in schedule([(a, b)], ops)]
[(1, 'A', 'B', 'o1'), (2, 'B', 'A', 'o1'), (3, 'A', 'B', 'o2'), (4, 'B', 'A', 'o2')]
>>> Adjudication(max_plies=80, eval=False).needs_engine
False
"""

import argparse
import collections
import dataclasses
import datetime
import io
import itertools
import json
import math
import multiprocessing
import multiprocessing.util
import os
import re
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

import chess
import chess.engine
import chess.pgn
import tqdm

from searchless import agents as agents_lib
from searchless import elo as elo_lib
from searchless import engine as engine_lib
from searchless import openings as openings_lib

EVENT = 'searchless tournament'
SITE = 'searchless'
GAMES_FILE = 'games.pgn'
RESULTS_FILE = 'results.json'
OPENINGS_FILE = 'openings.pgn'
RESULTS = ('1-0', '0-1', '1/2-1/2')
_ILLEGAL_UCI = re.compile(r"(?:illegal|invalid) uci[^:]*: '([^']*)'")  # python-chess' words for a bad bestmove.
_OUTCOMES = {
    chess.Termination.CHECKMATE: 'checkmate',
    chess.Termination.STALEMATE: 'stalemate',
    chess.Termination.INSUFFICIENT_MATERIAL: 'insufficient material',
    chess.Termination.SEVENTYFIVE_MOVES: 'seventy-five-move rule',
    chess.Termination.FIVEFOLD_REPETITION: 'fivefold repetition',
}


@dataclasses.dataclass(frozen=True)
class Adjudication:
  """When a game stops before checkmate or a draw by the rules (see the module docstring)."""

  max_plies: int | None = 400  # Draw after this many plies played from the opening; None: no limit.
  claim_draws: bool = True  # Threefold repetition (is_repetition) / fifty-move claim ends the game drawn.
  eval: bool = True  # Adjudicate with an evaluating Stockfish (when one is found).
  eval_engine: str | None = None  # Its binary (default: engine.find_stockfish()).
  eval_limit: str = 'time=0.01'  # Its search per position (the reference: 10 ms).
  win_cp: int | None = 1300  # Win when |score| > this or a mate is found; None: no win adjudication.
  draw_cp: int | None = None  # Draw when |score| < this ... (None: off)
  draw_plies: int = 10  # ... on this many consecutive plies ...
  draw_after_move: int = 40  # ... after this full move.

  def __post_init__(self):
    if self.max_plies is not None and self.max_plies < 1:
      raise ValueError(f'max_plies must be >= 1 or None, got {self.max_plies}')
    if self.win_cp is not None and self.win_cp < 1:
      raise ValueError(f'win_cp must be >= 1 or None, got {self.win_cp}')
    if self.draw_cp is not None and (self.draw_cp < 1 or self.draw_plies < 1):
      raise ValueError(f'draw_cp and draw_plies must be >= 1, got {self.draw_cp} and {self.draw_plies}')
    engine_lib.SearchLimit.parse(self.eval_limit)

  @property
  def needs_engine(self) -> bool:
    return self.eval and (self.win_cp is not None or self.draw_cp is not None)


class Evaluator:
  """A Stockfish process that scores positions for adjudication (restarted once if it dies)."""

  def __init__(self, path: str, limit: str = 'time=0.01'):
    self.path = path
    self.limit = engine_lib.SearchLimit.parse(limit)
    self._engine = self._start()

  def _start(self) -> chess.engine.SimpleEngine:
    try:
      engine = chess.engine.SimpleEngine.popen_uci(self.path)
    except (FileNotFoundError, PermissionError) as error:
      raise engine_lib.EngineNotFound(f'cannot start the adjudication engine {self.path!r}: {error}') from None
    engine.configure({k: v for k, v in {'Threads': 1, 'Hash': 16}.items() if k in engine.options})
    return engine

  def score(self, board: chess.Board) -> chess.engine.Score:
    """White's score of `board`."""
    for attempt in range(2):
      try:
        return self._engine.analyse(board, self.limit.to_chess(), info=chess.engine.INFO_SCORE)['score'].white()
      except (chess.engine.EngineTerminatedError, chess.engine.EngineError, KeyError):
        if attempt:
          raise
        self.close()
        self._engine = self._start()
    raise AssertionError('unreachable')

  def close(self) -> None:
    try:
      self._engine.quit()
    except (chess.engine.EngineTerminatedError, chess.engine.EngineError, TimeoutError):
      pass


def make_evaluator(adjudication: Adjudication) -> Evaluator | None:
  """The adjudicating engine, or None when adjudication needs none or no Stockfish is found."""
  if not adjudication.needs_engine:
    return None
  path = adjudication.eval_engine or engine_lib.find_stockfish()
  return Evaluator(path, adjudication.eval_limit) if path else None


def _one_line(text: str, limit: int = 200) -> str:
  text = ' '.join(str(text).split())
  return text if len(text) <= limit else text[:limit - 3] + '...'


def _score_text(score: chess.engine.Score) -> str:
  """'+1391 cp', 'mate in -3'."""
  return f'mate in {score.mate()}' if score.is_mate() else f'{score.score():+d} cp'


def _loss(color: chess.Color) -> str:
  return '0-1' if color == chess.WHITE else '1-0'


def play_game(white: agents_lib.Agent, black: agents_lib.Agent, opening: openings_lib.Opening, *,
              adjudication: Adjudication = Adjudication(), evaluator: Evaluator | None = None,
              round_number: int | str = '?', event: str = EVENT, site: str = SITE,
              date: str | None = None) -> chess.pgn.Game:
  """Plays one game from `opening` (see the module docstring for how it ends).

  `evaluator`: the adjudicating engine to reuse; when None and `adjudication`
  needs one, one is started (if Stockfish is found) for this game only.
  """
  own = make_evaluator(adjudication) if evaluator is None else None
  try:
    return _play(white, black, opening, adjudication, evaluator or own, round_number, event, site, date)
  finally:
    if own is not None:
      own.close()


def _play(white, black, opening, adjudication, evaluator, round_number, event, site, date) -> chess.pgn.Game:
  board = opening.board()
  opening_plies = len(board.move_stack)
  players = {chess.WHITE: white, chess.BLACK: black}
  plies, draw_streak = 0, 0
  while True:
    if (outcome := board.outcome()) is not None:
      result, termination, reason = outcome.result(), 'normal', _OUTCOMES[outcome.termination]
      break
    if adjudication.claim_draws and board.is_repetition(3):
      result, termination, reason = '1/2-1/2', 'normal', 'threefold repetition'
      break
    if adjudication.claim_draws and board.can_claim_fifty_moves():
      result, termination, reason = '1/2-1/2', 'normal', 'fifty-move rule'
      break
    if evaluator is not None and plies > 0:
      score = evaluator.score(board)
      cp = score.score()
      if adjudication.win_cp is not None and (score.is_mate() or abs(cp) > adjudication.win_cp):
        winner = chess.WHITE if score > chess.engine.Cp(0) else chess.BLACK
        result = _loss(not winner)
        termination = f'adjudication: {chess.COLOR_NAMES[winner].capitalize()} wins'
        reason = f'{termination}, eval {_score_text(score)} for White'
        break
      drawish = (adjudication.draw_cp is not None and cp is not None and abs(cp) < adjudication.draw_cp
                 and board.fullmove_number > adjudication.draw_after_move)
      draw_streak = draw_streak + 1 if drawish else 0
      if adjudication.draw_cp is not None and draw_streak >= adjudication.draw_plies:
        result, termination = '1/2-1/2', 'adjudication: draw'
        reason = f'{termination}, |eval| < {adjudication.draw_cp} cp for {draw_streak} plies'
        break
    if adjudication.max_plies is not None and plies >= adjudication.max_plies:
      result, termination = '1/2-1/2', f'max plies ({adjudication.max_plies})'
      reason = f'draw after {plies} plies'
      break
    mover = players[board.turn]
    try:
      move = mover.play(board.copy())
    except Exception as error:  # A crashed engine or a broken agent loses the game.
      if isinstance(error, chess.engine.EngineError) and (bad := _ILLEGAL_UCI.match(str(error))):
        move = bad.group(1)  # python-chess refuses a UCI engine's illegal bestmove: an illegal move.
      else:
        result = _loss(board.turn)
        termination = _one_line(f'engine crash: {mover.name}: {type(error).__name__}: {error}')
        reason = termination
        break
    if not isinstance(move, chess.Move) or not board.is_legal(move):
      result = _loss(board.turn)
      termination = _one_line(f'illegal move by {mover.name}: {move}')
      reason = termination
      break
    board.push(move)
    plies += 1

  game = chess.pgn.Game.from_board(board)
  headers = game.headers
  headers['Event'] = event
  headers['Site'] = site
  headers['Date'] = date or datetime.date.today().strftime('%Y.%m.%d')
  headers['Round'] = str(round_number)
  headers['White'] = white.name
  headers['Black'] = black.name
  headers['Result'] = result
  if opening.eco:
    headers['ECO'] = opening.eco
  headers['Opening'] = opening.name
  headers['PlyCount'] = str(len(board.move_stack))
  headers['Termination'] = termination
  if 0 < opening_plies < len(board.move_stack):
    node = game
    for _ in range(opening_plies):
      node = node.next()
    node.comment = 'end of opening'
  game.end().comment = reason
  return game


# --- Scheduling -------------------------------------------------------------------------------------


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


def schedule(pairs: Sequence[tuple[Entrant, Entrant]], openings: Sequence[openings_lib.Opening],
             games_per_pair: int | None = None) -> list[Task]:
  """Games of each pair in rounds 1..games_per_pair (default: every opening with both colours), by round."""
  if not openings:
    raise ValueError('no openings to play')
  total = 2 * len(openings) if games_per_pair is None else games_per_pair
  if total < 1:
    raise ValueError(f'games_per_pair must be >= 1, got {games_per_pair}')
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
    kind, _, params = agents_lib.parse_spec(spec)
    name = params.get('name')
    elo = int(params['elo']) if kind == 'stockfish' and 'elo' in params else None
    if not name:
      agent = agents_lib.from_spec(spec)
      try:
        name, elo = agent.name, getattr(agent, 'elo', elo)
      finally:
        agent.close()
    entrants.append(Entrant(name, spec, elo))
  by_name = collections.defaultdict(list)
  for entrant in entrants:
    by_name[entrant.name].append(entrant.spec)
  for name, named in by_name.items():
    if len(named) > 1:
      raise ValueError(f'agent names must be unique: {name!r} is the name of {named}; add ,name=NAME to the specs')
  return entrants


def round_robin(specs: Sequence[str], openings: Sequence[openings_lib.Opening], *, out_dir: str,
                games_per_pair: int | None = None, **kwargs) -> dict:
  """Every pair of agents plays from every opening with both colours; returns the results (see run_tournament)."""
  entrants = resolve_entrants(specs)
  if len(entrants) < 2:
    raise ValueError('a round robin needs at least two agents')
  tasks = schedule(list(itertools.combinations(entrants, 2)), openings, games_per_pair)
  return run_tournament(entrants, tasks, out_dir=out_dir, **kwargs)


def gauntlet(candidate_spec: str, opponent_specs: Sequence[str], openings: Sequence[openings_lib.Opening], *,
             out_dir: str, games_per_pair: int | None = None, **kwargs) -> dict:
  """The candidate plays each opponent from every opening with both colours (see run_tournament)."""
  if not opponent_specs:
    raise ValueError('a gauntlet needs at least one opponent')
  entrants = resolve_entrants([candidate_spec, *opponent_specs])
  tasks = schedule([(entrants[0], other) for other in entrants[1:]], openings, games_per_pair)
  return run_tournament(entrants, tasks, out_dir=out_dir, **kwargs)


# --- Playing in worker processes --------------------------------------------------------------------


class _Worker:
  """Agents (built once per spec) and an adjudicating engine, reused across games."""

  def __init__(self, adjudication: Adjudication, event: str):
    self.adjudication, self.event = adjudication, event
    self.agents: dict[Entrant, agents_lib.Agent] = {}
    self.evaluator = make_evaluator(adjudication)

  def agent(self, entrant: Entrant) -> agents_lib.Agent:
    if entrant not in self.agents:
      agent = agents_lib.from_spec(entrant.spec)
      agent.name = entrant.name
      self.agents[entrant] = agent
    return self.agents[entrant]

  def play(self, task: Task) -> str:
    game = play_game(self.agent(task.white), self.agent(task.black), task.opening, adjudication=self.adjudication,
                     evaluator=self.evaluator, round_number=task.round, event=self.event)
    if game.headers['Termination'].startswith('engine crash'):  # Rebuild the loser for its next game.
      loser = task.white if game.headers['Result'] == '0-1' else task.black
      self._close(loser)
    return game.accept(chess.pgn.StringExporter())

  def _close(self, entrant: Entrant) -> None:
    agent = self.agents.pop(entrant, None)
    if agent is not None:
      try:
        agent.close()
      except Exception:  # Already dead.
        pass

  def close(self) -> None:
    for entrant in list(self.agents):
      self._close(entrant)
    if self.evaluator is not None:
      self.evaluator.close()
      self.evaluator = None


_WORKER: _Worker | None = None


def _init_worker(adjudication: Adjudication, event: str) -> None:
  global _WORKER
  # Several worker processes may load checkpoints on one accelerator: JAX must not grab 75% of it in each.
  os.environ.setdefault('XLA_PYTHON_CLIENT_PREALLOCATE', 'false')
  _WORKER = _Worker(adjudication, event)
  # Pool workers end with os._exit: atexit handlers do not run, Finalize callbacks do.
  multiprocessing.util.Finalize(None, _WORKER.close, exitpriority=10)


def _play_task(item: tuple[int, Task]) -> tuple[int, str]:
  index, task = item
  return index, _WORKER.play(task)


def _play_all(tasks: Sequence[Task], workers: int, adjudication: Adjudication, event: str) -> Iterator[tuple[int, str]]:
  """(index, PGN text) of every task, as games finish."""
  if not tasks:
    return
  if workers <= 1 or len(tasks) <= 1:
    worker = _Worker(adjudication, event)
    try:
      for index, task in enumerate(tasks):
        yield index, worker.play(task)
    finally:
      worker.close()
    return
  pool = multiprocessing.get_context('spawn').Pool(min(workers, len(tasks)), initializer=_init_worker,
                                                   initargs=(adjudication, event))
  try:
    yield from pool.imap_unordered(_play_task, enumerate(tasks), chunksize=1)
    pool.close()  # Workers close their agents and exit.
  except BaseException:
    pool.terminate()
    raise
  finally:
    pool.join()


# --- Output ------------------------------------------------------------------------------------------


class _Record(NamedTuple):
  key: tuple[int, str, str]  # (round, White, Black)
  white: str
  black: str
  result: str
  opening: str
  termination: str
  reason: str  # The comment after the last move.
  text: str  # The game's PGN.


def _record(game: chess.pgn.Game) -> _Record:
  h = game.headers
  try:
    round_number = int(h.get('Round', ''))
  except ValueError:
    round_number = -1
  return _Record((round_number, h.get('White', '?'), h.get('Black', '?')), h.get('White', '?'),
                 h.get('Black', '?'), h.get('Result', '*'), h.get('Opening', ''), h.get('Termination', ''),
                 game.end().comment, game.accept(chess.pgn.StringExporter()))


def _parse(text: str) -> _Record:
  return _record(chess.pgn.read_game(io.StringIO(text)))


def _load_games(path: str) -> tuple[list[_Record], int]:
  """Complete games of an existing games file, and how many incomplete ones (e.g. cut by a crash) were dropped.

  A game is complete when it parses without errors, has a result, as many moves
  as its PlyCount and its text ends with its result (a cut comment hides moves).
  """
  if not os.path.exists(path):
    return [], 0
  with open(path, encoding='utf-8') as f:
    stream = io.StringIO(f.read())
  records, dropped = [], 0
  while True:
    start = stream.tell()
    if (game := chess.pgn.read_game(stream)) is None:
      return records, dropped
    text = stream.getvalue()[start:stream.tell()].strip()
    result = game.headers.get('Result')
    plies = sum(1 for _ in game.mainline_moves())
    if game.errors or result not in RESULTS or game.headers.get('PlyCount') != str(plies) or not text.endswith(result):
      dropped += 1
    else:
      records.append(_record(game))


def _write_games(path: str, records: Iterable[_Record]) -> None:
  tmp = path + '.tmp'
  with open(tmp, 'w', encoding='utf-8') as f:
    for record in records:
      f.write(record.text + '\n\n')
  os.replace(tmp, path)


def _append(path: str, text: str) -> None:
  with open(path, 'a', encoding='utf-8') as f:
    f.write(text + '\n\n')
    f.flush()
    os.fsync(f.fileno())


def _points(result: str) -> tuple[float, float]:
  return {'1-0': (1.0, 0.0), '0-1': (0.0, 1.0), '1/2-1/2': (0.5, 0.5)}[result]


def _scores(records: Iterable[_Record]) -> dict[str, list[float]]:
  """{name: [points, games]}."""
  scores = collections.defaultdict(lambda: [0.0, 0])
  for r in records:
    w, b = _points(r.result)
    scores[r.white][0] += w
    scores[r.white][1] += 1
    scores[r.black][0] += b
    scores[r.black][1] += 1
  return scores


def _score_line(scores: dict[str, list[float]], names: Sequence[str]) -> str:
  return ' | '.join(f'{n}: {scores[n][0]:g}/{scores[n][1]}' for n in names if n in scores)


def pair_results(records: Iterable[_Record], order: Sequence[str]) -> list[dict]:
  """Per pair of players (in `order`, then first seen): games, wins, draws and the first's score."""
  rank = {name: i for i, name in enumerate(order)}
  pairs = {}
  for r in records:
    a, b = sorted((r.white, r.black), key=lambda n: (rank.get(n, len(rank)), n))
    entry = pairs.setdefault((a, b), {'a': a, 'b': b, 'games': 0, 'a_wins': 0, 'draws': 0, 'b_wins': 0})
    entry['games'] += 1
    points = _points(r.result)[0 if r.white == a else 1]
    entry['a_wins' if points == 1 else 'b_wins' if points == 0 else 'draws'] += 1
  out = []
  for entry in pairs.values():
    entry['a_score'] = (entry['a_wins'] + entry['draws'] / 2) / entry['games']
    out.append(entry)
  return out


def resolve_anchor(anchor: str | None, entrants: Sequence[Entrant]) -> dict[str, float]:
  """The fixed ratings of ``NAME[=ELO]`` (ELO default 0), ``ladder`` (UCI_Elo agents), ``none``/None (mean 0)
  or ``auto`` (ladder when some agent has a UCI_Elo, else none)."""
  ladder = {e.name: float(e.elo) for e in entrants if e.elo is not None}
  if anchor is None or anchor == 'none':
    return {}
  if anchor == 'auto':
    return ladder
  if anchor == 'ladder':
    if not ladder:
      raise ValueError('--anchor ladder needs agents with a UCI_Elo, e.g. stockfish:nodes=1000,elo=1350')
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
  raise ValueError(f'--anchor {anchor!r}: expected NAME[=ELO], ladder or none with NAME one of {sorted(names)}')


def run_tournament(entrants: Sequence[Entrant], tasks: Sequence[Task], *, out_dir: str, workers: int = 1,
                   adjudication: Adjudication = Adjudication(), anchor: str | None = 'auto', event: str = EVENT,
                   progress: bool = True, confidence: float = 0.95) -> dict:
  """Plays the `tasks` not yet in ``out_dir/games.pgn`` and rates all its games; returns results.json's content."""
  if workers < 1:
    raise ValueError(f'workers must be >= 1, got {workers}')
  anchors = resolve_anchor(anchor, entrants)
  os.makedirs(out_dir, exist_ok=True)
  pgn_path = os.path.join(out_dir, GAMES_FILE)
  records, dropped = _load_games(pgn_path)
  if dropped:
    print(f'warning: dropped {dropped} incomplete game(s) from {pgn_path}', file=sys.stderr)
    _write_games(pgn_path, records)
  played = {r.key: r for r in records}
  for task in tasks:
    if task.key in played and played[task.key].opening != task.opening.name:
      raise ValueError(f'{pgn_path}: round {task.round} {task.white.name} - {task.black.name} was played from '
                       f'opening {played[task.key].opening!r}, not {task.opening.name!r}: use another --out')
  todo = [t for t in tasks if t.key not in played]
  names = [e.name for e in entrants]
  scores = _scores(records)
  start = time.monotonic()
  bar = tqdm.tqdm(total=len(tasks), initial=len(tasks) - len(todo), desc='games', unit='game',
                  disable=not progress, dynamic_ncols=True)
  bar.set_postfix_str(_score_line(scores, names))
  try:
    for _, text in _play_all(todo, workers, adjudication, event):
      _append(pgn_path, text)
      record = _parse(text)
      records.append(record)
      for name, points in zip((record.white, record.black), _points(record.result)):
        scores[name][0] += points
        scores[name][1] += 1
      bar.update(1)
      bar.set_postfix_str(_score_line(scores, names))
  finally:
    bar.close()
  wall = time.monotonic() - start
  order = {t.key: i for i, t in enumerate(tasks)}
  records.sort(key=lambda r: (order.get(r.key, len(order)), r.key[0]))  # Stable: unknown games keep their order.
  _write_games(pgn_path, records)

  results = {
      'games_file': pgn_path, 'games': len(records), 'played_this_run': len(todo), 'workers': workers,
      'wall_seconds': round(wall, 3),
      'games_per_minute': round(60 * len(todo) / wall, 2) if todo and wall > 0 else None,
      'agents': [e._asdict() for e in entrants], 'adjudication': dataclasses.asdict(adjudication),
      'scores': {n: {'points': p, 'games': g} for n, (p, g) in scores.items()},
      'pairs': pair_results(records, names),
      'terminations': dict(collections.Counter(r.termination.split(':')[0].split(' (')[0] for r in records)),
      'endings': dict(collections.Counter(r.reason if r.termination == 'normal' else
                                          r.termination.split(':')[0].split(' (')[0] for r in records)),
      'anchors': anchors, 'elo': None, 'elo_table': None, 'elo_error': None,
  }
  try:
    ratings = elo_lib.fit([elo_lib.Game(r.white, r.black, r.result) for r in records],
                          anchors=anchors or None, confidence=confidence)
    results['elo'], results['elo_table'] = ratings.to_dict(), ratings.table()
  except ValueError as error:
    results['elo_error'] = str(error)
  with open(os.path.join(out_dir, RESULTS_FILE), 'w') as f:
    json.dump(results, f, indent=2)
  return results


def summary(results: dict) -> str:
  lines = []
  for p in results['pairs']:
    lines.append(f"{p['a']} - {p['b']}: +{p['a_wins']} ={p['draws']} -{p['b_wins']} "
                 f"({p['a_wins'] + p['draws'] / 2:g}/{p['games']}, {100 * p['a_score']:.1f}%)")
  lines.append('terminations: ' + ', '.join(f'{k} {v}' for k, v in sorted(results['endings'].items())))
  if results['elo_table']:
    anchored = (', anchored: ' + ', '.join(f'{k}={v:g}' for k, v in results['anchors'].items())
                if results['anchors'] else ', mean 0')
    lines += [f"Elo (BayesElo, {100 * results['elo']['confidence']:g}% intervals{anchored}):", results['elo_table']]
  else:
    lines.append(f"Elo: not fitted: {results['elo_error']}")
  rate = results['games_per_minute']
  lines.append(f"played {results['played_this_run']} game(s) in {results['wall_seconds']:.1f} s"
               + (f' ({rate:g} games/minute, {results["workers"]} workers)' if rate else '')
               + f"; {results['games']} in {results['games_file']}")
  return '\n'.join(lines)


# --- Command line ------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(
      description='Play a tournament between agents (checkpoint:DIR, stockfish:LIMIT[,elo=N], uci:PATH,LIMIT) '
                  'and rate them (BayesElo).', formatter_class=argparse.ArgumentDefaultsHelpFormatter)
  p.add_argument('--agent', action='append', default=[], metavar='SPEC',
                 help='an agent spec (repeat); add ,name=NAME to name it (see searchless.agents)')
  p.add_argument('--gauntlet', action='store_true', help='the first --agent plays each of the others (else all pairs)')
  p.add_argument('--openings', nargs='+', default=None, metavar='FILE', help='openings: .pgn, .epd or .tsv files')
  p.add_argument('--make_openings', type=int, default=None, metavar='N',
                 help='make N balanced openings with Stockfish (saved as OUT/openings.pgn)')
  p.add_argument('--opening_plies', type=int, default=8, help='plies of the made openings')
  p.add_argument('--seed', type=int, default=0, help='seed of --make_openings, and of sampling --openings')
  p.add_argument('--games_per_pair', type=int, default=None,
                 help='games per pair (default: every opening with both colours); fewer than that samples '
                      'ceil(N/2) of the --openings with --seed')
  p.add_argument('--workers', type=int, default=1, help='games played in parallel (processes)')
  p.add_argument('--out', required=True, help='output directory: games.pgn, results.json; rerun to resume')
  p.add_argument('--max_plies', type=int, default=400, help='draw after this many plies from the opening')
  p.add_argument('--adjudicate_cp', type=int, default=1300,
                 help='win when Stockfish finds a mate or |eval| > this (0: no evaluating Stockfish)')
  p.add_argument('--eval_limit', default='time=0.01', help='search limit of the evaluating Stockfish')
  p.add_argument('--draw_cp', type=int, default=None,
                 help='draw when |eval| < this for --draw_plies plies after move 40 (default: off)')
  p.add_argument('--draw_plies', type=int, default=10, help='see --draw_cp')
  p.add_argument('--engine', default=None, help='Stockfish for adjudication and --make_openings (default: found)')
  p.add_argument('--anchor', default='auto',
                 help='NAME[=ELO] fixes one rating; ladder: the UCI_Elo of stockfish:...,elo=N agents; '
                      'none: mean 0; auto: ladder if there are such agents, else none')
  p.add_argument('--event', default=EVENT, help='PGN Event tag')
  p.add_argument('--no_progress', action='store_true', help='no progress bar')
  return p


def run(argv: Sequence[str] | None = None) -> dict:
  args = _parser().parse_args(argv)
  if len(args.agent) < 2:
    raise ValueError('give at least two --agent SPECs')
  if (args.openings is None) == (args.make_openings is None):
    raise ValueError('give either --openings FILE... or --make_openings N')
  if args.workers < 1:
    raise ValueError(f'--workers must be >= 1, got {args.workers}')
  if args.games_per_pair is not None and args.games_per_pair < 1:
    raise ValueError(f'--games_per_pair must be >= 1, got {args.games_per_pair}')
  adjudication = Adjudication(max_plies=args.max_plies, eval=args.adjudicate_cp > 0 or args.draw_cp is not None,
                              eval_engine=args.engine, eval_limit=args.eval_limit,
                              win_cp=args.adjudicate_cp if args.adjudicate_cp > 0 else None,
                              draw_cp=args.draw_cp, draw_plies=args.draw_plies)
  if args.engine and not os.access(args.engine, os.X_OK):
    raise ValueError(f'--engine {args.engine!r} is not an executable')
  if adjudication.needs_engine and not (args.engine or engine_lib.find_stockfish()):
    print('warning: no Stockfish found: games are not adjudicated by evaluation', file=sys.stderr)
  if os.path.exists(args.out) and not os.path.isdir(args.out):
    raise ValueError(f'--out {args.out!r} is a file, not a directory')
  os.makedirs(args.out, exist_ok=True)
  if args.make_openings is not None:
    openings = openings_lib.make_openings(args.make_openings, plies=args.opening_plies, seed=args.seed,
                                          engine_path=args.engine)
    openings_lib.write_openings(openings, os.path.join(args.out, OPENINGS_FILE))
  else:
    openings = [o for path in args.openings for o in openings_lib.read_openings(path)]
    if args.games_per_pair is not None:
      openings = openings_lib.sample_openings(openings, math.ceil(args.games_per_pair / 2), seed=args.seed)
  kwargs = dict(out_dir=args.out, games_per_pair=args.games_per_pair, workers=args.workers,
                adjudication=adjudication, anchor=args.anchor, event=args.event, progress=not args.no_progress)
  if args.gauntlet:
    return gauntlet(args.agent[0], args.agent[1:], openings, **kwargs)
  return round_robin(args.agent, openings, **kwargs)


def main(argv: Sequence[str] | None = None) -> None:
  try:
    results = run(argv)
  except (FileNotFoundError, ValueError) as e:  # EngineNotFound is a FileNotFoundError.
    print(f'error: {_one_line(e, 1000)}', file=sys.stderr)
    sys.exit(2)
  print(summary(results))
  print(f"results: {os.path.join(os.path.dirname(results['games_file']), RESULTS_FILE)}")


if __name__ == '__main__':
  main(sys.argv[1:])
