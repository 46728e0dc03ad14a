"""Self-improvement: the search agent plays itself, its search values become targets, the model is fine-tuned.

One iteration (AlphaZero's loop, read for an action-value model):

1. **Self-play** (`self_play`): MCTS over the current model (``sims``
   simulations, Dirichlet noise at the root, moves sampled by visits for the
   first ``sample_plies`` plies) plays ``games`` games from random openings
   (``opening_plies`` uniformly random moves). A game ends by the rules, by
   resignation (the search gives the mover under ``resign`` win probability
   on ``resign_plies`` consecutive own moves) or as a draw after ``max_plies``.
2. **Targets**: every searched board becomes training records
   (`training_records`): each move the search visited ``min_visits`` times
   or more gets its search value, (Q + 1) / 2, as its win probability (moves
   it did not search get no target); the board's value is the search's root
   value. A board-packed model gets one board record per board (those moves
   only), a per-move action-value model one record per move, a state-value
   model the board's value, a behavioral-cloning model the search's move. An
   action-value model has no policy head, so the search's values, not its
   visit counts, are what it can learn (AlphaZero trains its policy on the
   visits and its value on the game result).
3. **Fine-tuning**: the checkpoint's own training config, started from its
   params (``train.init_from``), trained ``steps`` steps at ``learning_rate``
   on that iteration's boards (plus ``replay``, e.g. its original data).
4. **Measured**: the new model *without search* against the starting one: the
   first ``num_puzzles`` puzzles of ``puzzles`` and a match of ``match_games``
   games (BayesElo, the starting model anchored at 0, 95% interval).

Everything lives under WORKDIR/iteration_NNN/ (``selfplay.jsonl`` a line per
finished game, ``boards.bag`` its records, ``train/``, ``eval.json``) and WORKDIR/summary.json.
A killed run resumes where it stopped: finished games are kept, training
resumes from its checkpoint, finished evaluations are not redone.

    searchless-improve --checkpoint pretrained --workdir runs/improve --iterations 3
"""

import dataclasses
import json
import os
import pathlib
import random
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import chess
import chess.pgn
import ml_collections
import numpy as np

from searchless.core import bags
from searchless.core import records
from searchless.plumbing import errors
from searchless.plumbing import progress_bars

if TYPE_CHECKING:
  from searchless.play.search.agent import SearchAgent
  from searchless.play.search.result import SearchResult
from searchless.core import moves as moves_lib

SUMMARY_FILE = 'summary.json'
GAMES_FILE = 'selfplay.jsonl'
BOARDS_FILE = 'boards.bag'
EVAL_FILE = 'eval.json'


@dataclasses.dataclass(frozen=True)
class ImproveConfig:
  """One self-improvement run's settings (see the module docstring)."""

  iterations: int = 3  # Self-play -> fine-tune -> measure rounds.
  games: int = 40  # Self-play games per iteration.
  sims: int = 64  # MCTS simulations per self-play move.
  noise: float = 0.25  # Root Dirichlet noise fraction (AlphaZero: 0.25).
  sample_plies: int = 20  # Plies (after the opening) whose move is sampled by visits; argmax afterwards.
  opening_plies: int = 4  # Uniformly random plies that open each game.
  max_plies: int = 200  # A game still going after this many plies is a draw.
  resign: float = 0.03  # Resign below this win probability ...
  resign_plies: int = 4  # ... on this many consecutive own moves (0: never resign).
  steps: int = 300  # Fine-tuning steps per iteration.
  learning_rate: float = 2e-4  # Fine-tuning learning rate.
  min_visits: int = 2  # A move becomes a target when the search visited it this often.
  batch_size: int = 0  # Fine-tuning batch size (0: the checkpoint's own).
  replay: str = ''  # Extra training data mixed in (a bag glob, e.g. the original data); '' = none.
  puzzles: str = ''  # Puzzle CSV to measure on ('' = no puzzles).
  num_puzzles: int = 200  # Its first N puzzles.
  match_games: int = 40  # Games of the new model against the starting one per iteration (0: none).
  openings: tuple[str, ...] = ()  # Opening files for the match ((): Stockfish-made balanced openings).
  workers: int = 1  # Match games in parallel.
  seed: int = 0  # Self-play games are reproducible for a seed (the model calls are deterministic on CPU).

  def __post_init__(self):
    for name in ('iterations', 'games', 'sims', 'steps', 'workers', 'min_visits'):
      if getattr(self, name) < 1:
        raise errors.BadInput(f'{name} must be >= 1, got {getattr(self, name)}')
    if self.batch_size < 0:
      raise errors.BadInput(f'batch_size must be >= 0, got {self.batch_size}')
    if not 0 <= self.noise <= 1:
      raise errors.BadInput(f'noise must be in [0, 1], got {self.noise}')
    if self.learning_rate <= 0:
      raise errors.BadInput(f'learning_rate must be > 0, got {self.learning_rate}')


def _iteration_dir(workdir: pathlib.Path, i: int) -> pathlib.Path:
  return workdir / f'iteration_{i:03d}'


def model_of(workdir: pathlib.Path, i: int, start: str) -> str:
  """The checkpoint after `i` iterations (0: the starting one)."""
  return start if i == 0 else str(_iteration_dir(workdir, i) / 'train')


def board_targets(board: chess.Board, search: 'SearchResult') -> dict:
  """A searched board's targets: each move's search value as a win probability (`SearchResult.q`: the
  model's own value where the search did not visit it), its visits, the root's value and move."""
  if search.move is None:
    raise ValueError(f'no search result to learn from: {board.fen()} has no legal move')
  return {
    'fen': board.fen(),
    'moves': [m.uci() for m in search.moves],
    'win_probs': [float(np.clip((q + 1) / 2, 0, 1)) for q in search.q],
    'visits': [int(v) for v in search.visits],
    'value': search.win_probability,
    'best': search.move.uci(),
  }


def training_records(kind: str, targets: Sequence[dict], min_visits: int = 1) -> list:
  """The records a model of `kind` trains on (`records.BOARD_VALUE` for a board-packed one, else its
  policy): the values of the moves the search visited `min_visits` times or more (one board record,
  or one action-value record per move), the root value, or the search's move.

  Unvisited moves get no target: their search value is the model's own, and training the visited
  moves towards the (usually lower) backed-up values while the others keep the model's optimism
  would shift the model's choice towards moves nobody searched.
  """

  def searched(t):
    return [(m, p) for m, p, v in zip(t['moves'], t['win_probs'], t['visits']) if v >= min_visits]

  if kind == records.BOARD_VALUE:
    out = []
    for t in targets:
      pairs = sorted(searched(t), key=lambda mp: moves_lib.MOVE_TO_ACTION[mp[0]])
      if pairs:
        out.append(records.BoardValue(t['fen'], tuple(m for m, _ in pairs), tuple(p for _, p in pairs), t['value']))
    return out
  if kind == 'action_value':
    return [records.ActionValue(t['fen'], m, p) for t in targets for m, p in searched(t)]
  if kind == 'state_value':
    return [records.StateValue(t['fen'], t['value']) for t in targets]
  if kind == 'behavioral_cloning':
    return [records.BehavioralCloning(t['fen'], t['best']) for t in targets]
  raise errors.BadInput(f'no self-play records for {kind!r}')


def play_game(agent: 'SearchAgent', rng: random.Random, config: ImproveConfig) -> tuple[list[dict], str, list[str]]:
  """One self-play game: its searched boards' targets, its result ('1-0', ...) and its moves (UCI)."""
  board = chess.Board()
  agent.new_game()
  for _ in range(config.opening_plies):
    legal = list(board.legal_moves)
    if not legal or board.is_game_over():
      break
    board.push(rng.choice(legal))
  targets, low = [], {chess.WHITE: 0, chess.BLACK: 0}
  result = '1/2-1/2'
  searched = 0
  while True:
    outcome = board.outcome(claim_draw=True)
    if outcome is not None:
      result = outcome.result()
      break
    if len(board.move_stack) >= config.max_plies:
      break
    search = agent.search(board)
    win = search.win_probability
    targets.append(board_targets(board, search))
    low[board.turn] = low[board.turn] + 1 if win < config.resign else 0
    if config.resign_plies and low[board.turn] >= config.resign_plies:
      result = '0-1' if board.turn == chess.WHITE else '1-0'
      break
    move = search.sample(1.0, agent.rng) if searched < config.sample_plies else search.move
    assert move is not None  # The game is not over.
    board.push(move)
    searched += 1
  return targets, result, [m.uci() for m in board.move_stack]


def self_play(
  checkpoint: str, out: pathlib.Path, config: ImproveConfig, *, iteration: int, progress: bool = True
) -> int:
  """Plays the iteration's games into `out` (a JSON line per finished game); returns the boards written."""
  from searchless.play import player as player_lib
  from searchless.play.search import agent as search_agent

  from searchless.data import packing
  from searchless.model import loading

  path = out / GAMES_FILE
  done = _read_games(path)
  _, _, experiment = loading.load_model(checkpoint)
  if experiment is None:
    raise errors.BadInput(f'{checkpoint} records no training config (a published checkpoint): it cannot be fine-tuned')
  kind = records.BOARD_VALUE if packing.packed(experiment) else experiment.policy
  if len(done) < config.games:
    policy = player_lib.load_policy(checkpoint, compute_dtype='float32')
    agent = search_agent.agent_for(
      policy, 'mcts', simulations=config.sims, dirichlet_fraction=config.noise, seed=config.seed * 1000 + iteration
    )
    agent.searcher.warm_up()
    bar = progress_bars.bar(
      total=config.games, initial=len(done), desc=f'self-play {iteration}', unit='game', disable=not progress
    )
    with open(path, 'a') as f:
      for game in range(len(done), config.games):
        rng = random.Random(f'{config.seed}:{iteration}:{game}')
        agent.rng = np.random.default_rng(rng.randrange(2**32))
        start = time.perf_counter()
        targets, result, moves = play_game(agent, rng, config)
        f.write(
          json.dumps(
            {
              'game': game,
              'result': result,
              'moves': moves,
              'boards': targets,
              'seconds': round(time.perf_counter() - start, 2),
            }
          )
          + '\n'
        )
        f.flush()
        os.fsync(f.fileno())
        bar.update(1)
        bar.set_postfix(result=result, plies=len(moves), refresh=False)
    bar.close()
    done = _read_games(path)
  targets = [t for g in done for t in g['boards']]
  bags.write_records(str(out / BOARDS_FILE), kind, training_records(kind, targets, config.min_visits))
  return len(targets)


def _read_games(path: pathlib.Path) -> list[dict]:
  """The finished games of a self-play file (a line cut by a kill is dropped, and the file trimmed)."""
  if not path.exists():
    return []
  games, good = [], 0
  with open(path, 'rb') as f:
    for line in f:
      try:
        games.append(json.loads(line))
      except ValueError:
        break
      if not line.endswith(b'\n'):
        games.pop()
        break
      good += len(line)
  if good != path.stat().st_size:
    with open(path, 'r+b') as f:
      f.truncate(good)
  return games


def fine_tune(
  checkpoint: str, data: str, workdir: pathlib.Path, config: ImproveConfig, *, progress: bool = True
) -> None:
  """Trains `checkpoint`'s config, started from its params, on `data` (resumes in `workdir`)."""
  from searchless.core import config as config_lib
  from searchless.model import loading
  from searchless.training import train

  _, _, experiment = loading.load_model(checkpoint)
  if experiment is None:
    raise errors.BadInput(f'{checkpoint} records no training config (a published checkpoint): it cannot be fine-tuned')
  tuned = ml_collections.ConfigDict(json.loads(config_lib.to_json(experiment)))
  tuned.data.train = f'{data},{config.replay}' if config.replay else data
  tuned.data.eval = ''
  tuned.train.init_from = checkpoint
  tuned.train.num_steps = config.steps
  tuned.train.max_seconds = 0.0
  tuned.train.ckpt_every = max(config.steps // 3, 1)
  tuned.train.log_every = max(config.steps // 10, 1)
  tuned.train.eval_every = 10 * config.steps
  tuned.optim.learning_rate = config.learning_rate
  if config.batch_size:
    tuned.data.batch_size = config.batch_size
  config_lib.check(tuned)
  train.train(ml_collections.FrozenConfigDict(tuned), workdir, progress=progress)


def measure(model: str, start: str, out: pathlib.Path, config: ImproveConfig, *, progress: bool = True) -> dict:
  """The searchless `model` against `start`: puzzles and a match (BayesElo, `start` at 0)."""
  from searchless.data import puzzles as puzzles_lib
  from searchless.evaluation import puzzles as puzzle_eval
  from searchless.evaluation import tournament
  from searchless.play import agents

  path = out / EVAL_FILE
  result = json.loads(path.read_text()) if path.exists() else {}
  if config.puzzles and 'puzzles' not in result:
    chosen = list(puzzles_lib.read_puzzles(config.puzzles, limit=config.num_puzzles))
    for name, spec in (('model', f'checkpoint:{model}'), ('start', f'checkpoint:{start}')):
      with agents.opened(spec) as agent:
        solved = puzzle_eval.evaluate(chosen, agent, progress=False)
      result.setdefault('puzzles', {})[name] = {'solved': sum(r.solved for r in solved), 'n': len(solved)}
    path.write_text(json.dumps(result, indent=2) + '\n')
  if config.match_games and 'match' not in result:
    kwargs = (
      dict(openings=list(config.openings))
      if config.openings
      else dict(make_openings=(config.match_games + 1) // 2, seed=config.seed)
    )
    results = tournament.run(
      [f'checkpoint:{model},name=model', f'checkpoint:{start},name=start'],
      out_dir=str(out / 'match'),
      games_per_pair=config.match_games,
      workers=config.workers,
      anchor='start',
      progress=progress,
      **kwargs,
    )
    pair = results['pairs'][0]
    elo = {p['name']: p for p in (results['elo'] or {}).get('players', [])}
    result['match'] = {
      'wins': pair['a_wins'],
      'draws': pair['draws'],
      'losses': pair['b_wins'],
      'games': pair['games'],
      'score': pair['a_score'],
      'elo': elo.get('model', {}).get('elo'),
      'lower': elo.get('model', {}).get('lower'),
      'upper': elo.get('model', {}).get('upper'),
    }
    path.write_text(json.dumps(result, indent=2) + '\n')
  return result


def run(
  checkpoint: str, workdir: str | os.PathLike, config: ImproveConfig = ImproveConfig(), *, progress: bool = True
) -> dict:
  """Runs (or resumes) the loop; returns WORKDIR/summary.json's content."""
  work = pathlib.Path(workdir)
  work.mkdir(parents=True, exist_ok=True)
  summary_path = work / SUMMARY_FILE
  summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
  if summary.get('start', checkpoint) != checkpoint:
    raise errors.BadInput(f'{work} continues a run from {summary["start"]!r}, not {checkpoint!r}; use a new --workdir')
  summary.update({'start': checkpoint, 'config': dataclasses.asdict(config)})
  summary.setdefault('iterations', [])
  for i in range(1, config.iterations + 1):
    out = _iteration_dir(work, i)
    out.mkdir(exist_ok=True)
    current = model_of(work, i - 1, checkpoint)
    started = time.perf_counter()
    boards = self_play(current, out, config, iteration=i, progress=progress)
    fine_tune(current, str(out / BOARDS_FILE), out / 'train', config, progress=progress)
    measured = measure(model_of(work, i, checkpoint), checkpoint, out, config, progress=progress)
    games = _read_games(out / GAMES_FILE)
    entry = {
      'iteration': i,
      'model': model_of(work, i, checkpoint),
      'boards': boards,
      'games': len(games),
      'results': {r: sum(g['result'] == r for g in games) for r in ('1-0', '0-1', '1/2-1/2')},
      'self_play_seconds': round(sum(g['seconds'] for g in games), 1),
      **measured,
    }
    summary['iterations'] = [e for e in summary['iterations'] if e['iteration'] != i] + [entry]
    summary_path.write_text(json.dumps(summary, indent=2) + '\n')
    if progress:
      print(line(entry, time.perf_counter() - started), flush=True)
  return summary


def line(entry: dict, seconds: float | None = None) -> str:
  """One iteration's results as a line of text."""
  parts = [f'iteration {entry["iteration"]}: {entry["games"]} games, {entry["boards"]} boards']
  if 'puzzles' in entry:
    pz = entry['puzzles']
    parts.append(f'puzzles {pz["model"]["solved"]}/{pz["model"]["n"]} (start {pz["start"]["solved"]})')
  if 'match' in entry:
    m = entry['match']
    elo = f', Elo {m["elo"]:+.0f} [{m["lower"]:+.0f}, {m["upper"]:+.0f}]' if m.get('elo') is not None else ''
    parts.append(f'vs start +{m["wins"]} ={m["draws"]} -{m["losses"]}{elo}')
  if seconds is not None:
    parts.append(f'{seconds:.0f} s')
  return '; '.join(parts)
