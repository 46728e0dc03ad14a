"""How strongly a model plays, measured one way everywhere: the shipped models' cards, the campaign, the README.

`measure` runs the parts it is given on one checkpoint and keeps each in an evaluation folder:

* ``heldout/``: held-out board records (`searchless.evaluation.evaluate`): log-loss, action
  accuracy and Kendall tau-b against the labels, board by board;
* ``puzzles/``: a Lichess puzzle CSV (`searchless.evaluation.puzzles`), every solver move
  required: solved with its 95% Wilson interval, and by 200-point rating band;
* ``sts/``: an EPD suite with partial credit, such as STS (`searchless.evaluation.epd`);
* ``match/``: a ladder of Stockfish opponents at ``UCI_Elo`` levels (`searchless.evaluation.tournament`),
  `games` games each from the same sampled openings, both colours; the model's BayesElo anchored on the
  levels, with its 95% interval.

What each part measured goes into ``strength.json`` (and ``strength.md``, the table a model card
shows); a part already there with the same settings is not measured again, and an interrupted match
resumes from its PGN. Two evaluation folders of the same parts pair board by board, puzzle by puzzle
and game by game (`compare`, `searchless.evaluation.paired`): a difference with its 95% interval, far
narrower than either side's own.

    searchless-strength measure --checkpoint pretrained --out runs/strength --puzzles lichess_db_puzzle.csv \\
        --ladder 1350,1500,1800 --games 20
    searchless-strength compare runs/strength_a runs/strength_b
"""

from collections.abc import Sequence
import dataclasses
import json
import os
import pathlib
import platform
import time
from typing import Any

from searchless.engines import launch
from searchless.evaluation import metrics
from searchless.evaluation import paired
from searchless.plumbing import atomic
from searchless.plumbing import errors
from searchless.plumbing import outputs

NAME = paired.PLAYER  # The measured model's name in the match's PGN and results (`paired.match` reads it).
OPPONENT_LIMIT = 'nodes=100000'  # Stockfish's search a move: ~0.1 s on a 2-core machine, and the same under load.
STRENGTH_FILE = 'strength.json'


@dataclasses.dataclass(frozen=True)
class Protocol:
  """What `measure` measures: each part is left out when its input is not given (`ladder` empty)."""

  puzzles: str | None = None  # A Lichess puzzle CSV.
  sts: str | None = None  # An EPD suite (`bm`, `c0` partial credit).
  heldout: str | None = None  # Board records with labels (a bag spec).
  heldout_boards: int = 2000  # The first N boards of `heldout`.
  ladder: tuple[int, ...] = ()  # Stockfish UCI_Elo levels played.
  games: int = 20  # Games against each level.
  openings: tuple[str, ...] = ()  # Opening files (.tsv, .pgn, .epd) sampled; none: the tournament's own.
  opponent_limit: str = OPPONENT_LIMIT
  workers: int = 2  # Games played at once.
  engine_path: str | None = None  # The ladder's Stockfish (default: `launch.find_stockfish`); not a setting.

  def __post_init__(self):
    if self.ladder and self.games < 1:
      raise errors.BadInput(f'--games must be >= 1 for a ladder, got {self.games}')
    if self.heldout_boards < 1:
      raise errors.BadInput(f'--heldout_boards must be >= 1, got {self.heldout_boards}')
    if not (self.puzzles or self.sts or self.heldout or self.ladder):
      raise errors.BadInput('nothing to measure: give --puzzles, --sts, --heldout or --ladder')
    for flag, path in (('--puzzles', self.puzzles), ('--sts', self.sts), *(('--openings', o) for o in self.openings)):
      if path is not None and not os.path.isfile(path):
        raise errors.MissingInput(f'{flag} {path}: no such file')


def opponents(protocol: Protocol) -> list[str]:
  """The ladder's agent specs.

  >>> opponents(Protocol(ladder=(1350,)))
  ['stockfish:nodes=100000,elo=1350,name=stockfish-elo1350']
  >>> opponents(Protocol(ladder=(1350,), engine_path='/opt/sf'))
  ['stockfish:nodes=100000,elo=1350,path=/opt/sf,name=stockfish-elo1350']
  """
  path = f',path={protocol.engine_path}' if protocol.engine_path else ''
  return [f'stockfish:{protocol.opponent_limit},elo={elo}{path},name=stockfish-elo{elo}' for elo in protocol.ladder]


def _heldout(checkpoint: str, protocol: Protocol, out: pathlib.Path, progress: bool) -> dict[str, Any]:
  from searchless.evaluation import evaluate

  result = evaluate.run(checkpoint, str(protocol.heldout), out, num_boards=protocol.heldout_boards, progress=progress)
  return {
    'path': protocol.heldout,
    'boards': result['boards'],
    **{k: result[k] for k in paired.HELDOUT_METRICS if k in result},
  }


def _puzzles(checkpoint: str, protocol: Protocol, out: pathlib.Path, progress: bool) -> dict[str, Any]:
  from searchless.evaluation import puzzles as puzzle_eval

  result = puzzle_eval.run(puzzles=str(protocol.puzzles), agent=f'checkpoint:{checkpoint}', out=out, progress=progress)
  low, high = metrics.wilson(result['solved'], result['n'])
  return {
    'path': protocol.puzzles,
    'n': result['n'],
    'solved': result['solved'],
    'wilson95': [round(low, 4), round(high, 4)],
    'bands': result['bands'],
  }


def _sts(checkpoint: str, protocol: Protocol, out: pathlib.Path, progress: bool) -> dict[str, Any]:
  from searchless.evaluation import epd

  result = epd.run(suites=[str(protocol.sts)], agent=f'checkpoint:{checkpoint}', out=out, progress=progress)
  suite = dict(result['suites'][0])
  suite.pop('themes', None)
  return suite


def _match(checkpoint: str, protocol: Protocol, out: pathlib.Path, progress: bool) -> dict[str, Any]:
  from searchless.evaluation import tournament

  results = tournament.run(
    [f'checkpoint:{checkpoint},name={NAME}', *opponents(protocol)],
    gauntlet=True,
    openings=list(protocol.openings) or None,
    make_openings=None if protocol.openings else -(-protocol.games // 2),
    games_per_pair=protocol.games,
    workers=protocol.workers,
    engine=protocol.engine_path,
    out_dir=str(out),
    progress=progress,
  )
  record: dict[str, Any] = {
    'opponent_limit': protocol.opponent_limit,
    'games_file': results['games_file'],
    'pairs': [
      {
        'opponent': p['b'],
        'games': p['games'],
        'wins': p['a_wins'],
        'draws': p['draws'],
        'losses': p['b_wins'],
        'score': round(p['a_score'], 4),
      }
      for p in results['pairs']
    ],
  }
  if results['elo']:  # None when BayesElo could not rate the games (e.g. all won or all lost).
    rating = next(r for r in results['elo']['players'] if r['name'] == NAME)
    record.update(bayeselo=round(rating['elo']), bayeselo95=[round(rating['lower']), round(rating['upper'])])
  return record


PARTS = {  # Part -> (its settings in `Protocol`, how it is measured). In order: the quick ones first.
  'heldout': (('heldout', 'heldout_boards'), _heldout),
  'puzzles': (('puzzles',), _puzzles),
  'sts': (('sts',), _sts),
  'match': (('ladder', 'games', 'openings', 'opponent_limit'), _match),
}


def _settings(protocol: Protocol, fields: Sequence[str]) -> dict[str, Any]:
  return {f: (list(v) if isinstance(v := getattr(protocol, f), tuple) else v) for f in fields}


def measure(checkpoint: str, out: str | os.PathLike, protocol: Protocol, *, progress: bool = False) -> dict[str, Any]:
  """Measures `checkpoint` (anything `Player.load` reads: a workdir, an export, a shipped name) by `protocol` in
  the evaluation folder `out`; returns strength.json's content. Resumable: a part measured with the same settings
  is kept, and each part is saved as soon as it is measured. `out` has one writer (`outputs.sole_writer`: a second is
  refused, and a filesystem error names its file and ``--out``)."""
  launch.check_executable(protocol.engine_path)
  if protocol.ladder:
    launch.require_stockfish(protocol.engine_path)  # Before the other parts are measured, not after them.
  with outputs.sole_writer(out, 'searchless-strength measure', '--out'):
    return _measure(checkpoint, pathlib.Path(out), protocol, progress)


def _measure(checkpoint: str, out: pathlib.Path, protocol: Protocol, progress: bool) -> dict[str, Any]:
  path = out / STRENGTH_FILE
  done = json.loads(path.read_text()) if path.exists() else {}
  if done.get('checkpoint') != checkpoint:
    done = {}  # Another model's measurements are not this one's.
  done.update(checkpoint=checkpoint, machine=f'{platform.machine()}, {os.cpu_count()} cores')
  for part, (fields, run) in PARTS.items():
    settings = _settings(protocol, fields)
    wanted = bool(protocol.ladder) if part == 'match' else getattr(protocol, part) is not None
    if not wanted or done.get(part, {}).get('settings') == settings:
      continue
    start = time.time()
    done[part] = {
      **run(checkpoint, protocol, out / part, progress),
      'settings': settings,
      'seconds': round(time.time() - start, 1),
    }
    atomic.write_text(path, json.dumps(done, indent=2) + '\n')
  atomic.write_text(out / 'strength.md', markdown(done) + '\n')
  return done


def markdown(result: dict[str, Any]) -> str:
  """strength.json's content as a model card's lines.

  >>> print(markdown({'puzzles': {'path': 'p.csv', 'n': 10, 'solved': 4, 'wilson95': [0.168, 0.687],
  ...                             'bands': [{'lower': 800, 'upper': 1000, 'n': 10, 'solved': 4, 'accuracy': 0.4}]}}))
  - Puzzles (`p.csv`, every move of the solution): **40.0%** (4/10; 95% interval 16.8-68.7%).
  <BLANKLINE>
    | rating | puzzles | solved | accuracy |
    | --- | --- | --- | --- |
    | 800-999 | 10 | 4 | 40.0% |
  """
  lines: list[str] = []
  if (h := result.get('heldout')) is not None:
    lines.append(
      f'- Held-out boards ({h["boards"]:,}): log-loss {h.get("log_loss", float("nan")):.4f}, action accuracy '
      f'{h.get("action_accuracy", float("nan")):.3f}, Kendall tau-b {h.get("kendall_tau", float("nan")):.3f}.'
    )
  if (p := result.get('puzzles')) is not None:
    low, high = p['wilson95']
    lines += [
      f'- Puzzles (`{os.path.basename(p["path"])}`, every move of the solution): '
      f'**{100 * p["solved"] / p["n"]:.1f}%** ({p["solved"]}/{p["n"]}; 95% interval '
      f'{100 * low:.1f}-{100 * high:.1f}%).',
      '',
      '  | rating | puzzles | solved | accuracy |',
      '  | --- | --- | --- | --- |',
    ]
    lines += [
      f'  | {b["lower"]}-{b["upper"] - 1} | {b["n"]} | {b["solved"]} | {100 * b["accuracy"]:.1f}% |' for b in p['bands']
    ]
  if (s := result.get('sts')) is not None:
    lines.append(
      f'- {s["name"]} ({s["n"]} positions): {s["solved"]} best moves, {s["points"]}/{s["max_points"]} points.'
    )
  if (m := result.get('match')) is not None:
    for pair in m['pairs']:
      lines.append(
        f'- Against {pair["opponent"]} (`{m["opponent_limit"]}` a move): +{pair["wins"]} ={pair["draws"]} '
        f'-{pair["losses"]} ({pair["wins"] + pair["draws"] / 2:g}/{pair["games"]}, '
        f'{100 * pair["score"]:.1f}%).'
      )
    if 'bayeselo' in m:
      low, high = m['bayeselo95']
      lines.append(
        f"- BayesElo (anchored on the opponents' UCI_Elo): **{m['bayeselo']}** (95% interval {low} to {high})."
      )
  return '\n'.join(lines)


def compare(base: str | os.PathLike, new: str | os.PathLike) -> dict[str, Any]:
  """Two evaluation folders paired part by part (`paired.compare`): new - base."""
  return paired.compare(pathlib.Path(base), pathlib.Path(new))
