r"""Test suites in EPD: Win At Chess, Bratko-Kopec, the Strategic Test Suite.

Each EPD line is a position and its operations (python-chess
``chess.Board.from_epd``). Two ways of scoring a move:

* ``bm``/``am`` suites (WAC, Bratko-Kopec): a move is solved when it is one of
  the best moves ``bm`` and none of the avoid moves ``am``; a position with
  only ``am`` is solved by any move not in ``am``.
* the Strategic Test Suite (STS): ``c0 "f5=10, Be5+=2, Bf2=3"`` gives points
  (SAN=points) to moves; the best move is worth 10, listed alternatives 1-9,
  any other move 0. A theme of 100 positions scores up to 1000 (10 per
  position; the maximum of a position is its best ``c0`` value), the full
  15-theme suite up to 15000. The theme is the ``id`` without its trailing
  number (``STS(v1.0) Undermine.001`` -> ``STS(v1.0) Undermine``). The count of
  ``bm`` moves found ("best moves") is reported beside the points.

>>> position = parse_line('6k1/5ppp/8/8/8/8/5PPP/R2R2K1 w - - bm Rd8# Ra8#; id "demo.007"; '
...                       'c0 "Rd8#=10, Ra8#=10, Rd7=2";')
>>> position.id, position.theme, sorted(m.uci() for m in position.bm)
('demo.007', 'demo', ['a1a8', 'd1d8'])
>>> score_move(position, chess.Move.from_uci('d1d7'))
(False, 2)

Command line (`searchless.commands.epd`)::

  searchless-epd --suite wac_clean.epd --suite sts01_undermine.epd \
      --agent stockfish:nodes=100000 --out runs/epd-sf

prints one line per suite (``wac_clean: 270/299 solved (0.9030)``,
``sts01_undermine: 612/1000 points, 55/100 best moves``) and writes
``results.csv`` (one row per position) and ``summary.json`` in ``--out``.
"""

import csv
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import chess

from searchless.plumbing import errors
from searchless.plumbing import progress_bars

if TYPE_CHECKING:
  from searchless.play import agents as agents_lib

RESULT_COLUMNS = ('suite', 'id', 'theme', 'line', 'fen', 'move', 'san', 'bm', 'am', 'solved', 'points', 'max_points')
_POINTS_ITEM = re.compile(r'^\s*(\S+)\s*=\s*(\d+)\s*$')


class EpdFormatError(errors.BadInput):
  """An EPD line that cannot be read; the message names file and line."""


class EpdPosition(NamedTuple):
  id: str
  fen: str
  bm: tuple[chess.Move, ...]  # Best moves: finding one solves the position.
  am: tuple[chess.Move, ...]  # Avoid moves: playing one fails it.
  points: dict[chess.Move, int]  # STS ``c0`` points per move (empty when the line has none).
  line: int  # 1-based line number in its file.

  @property
  def theme(self) -> str:
    """The id without a trailing ``.NNN`` (the STS theme; ``WAC`` for ``WAC.001``)."""
    return re.sub(r'\.\d+$', '', self.id)

  @property
  def max_points(self) -> int | None:
    """The most points a move scores here (10 in STS), None without ``c0`` points."""
    return max(self.points.values()) if self.points else None

  def board(self) -> chess.Board:
    return chess.Board(self.fen)


class PositionResult(NamedTuple):
  suite: str
  id: str
  theme: str
  line: int
  fen: str
  move: str  # UCI of the agent's move.
  san: str  # SAN of it ('' when it is illegal).
  solved: bool  # bm/am rule; in STS: the best move was found.
  points: int | None  # STS points of the move; None without c0 points.
  max_points: int | None


class Score(NamedTuple):
  """Totals of a suite or of a theme."""

  name: str
  n: int
  solved: int  # Positions solved (STS: best moves found).
  points: int  # Points scored on the positions that have c0 points.
  max_points: int  # Their maximum (10 per STS position); 0 for a bm/am-only suite.

  @property
  def accuracy(self) -> float:
    return self.solved / self.n if self.n else float('nan')

  def line(self) -> str:
    """``NAME: k/n solved (0.xxxx)``, or for a points suite ``NAME: p/max points, k/n best moves``.

    >>> Score('wac_clean', 299, 270, 0, 0).line()
    'wac_clean: 270/299 solved (0.9030)'
    >>> Score('sts01_undermine', 100, 55, 612, 1000).line()
    'sts01_undermine: 612/1000 points, 55/100 best moves'
    """
    if self.max_points:
      return f'{self.name}: {self.points}/{self.max_points} points, {self.solved}/{self.n} best moves'
    return f'{self.name}: {self.solved}/{self.n} solved ({self.accuracy:.4f})'


def _total(name: str, results: Sequence[PositionResult]) -> Score:
  return Score(
    name,
    len(results),
    sum(r.solved for r in results),
    sum(r.points or 0 for r in results),
    sum(r.max_points or 0 for r in results),
  )


class SuiteResult(NamedTuple):
  name: str  # The file name without its extension.
  path: str
  results: list[PositionResult]

  @property
  def total(self) -> Score:
    return _total(self.name, self.results)

  @property
  def themes(self) -> list[Score]:
    """The totals per theme, in order of first appearance."""
    groups: dict[str, list[PositionResult]] = {}
    for r in self.results:
      groups.setdefault(r.theme, []).append(r)
    return [_total(theme, group) for theme, group in groups.items()]

  def summary(self) -> dict:
    total = self.total
    return {
      'name': self.name,
      'path': self.path,
      'n': total.n,
      'solved': total.solved,
      'accuracy': total.accuracy if total.n else None,
      'points': total.points,
      'max_points': total.max_points,
      'themes': [{**t._asdict(), 'accuracy': t.accuracy} for t in self.themes],
    }


def _parse_points(board: chess.Board, text: str) -> dict[chess.Move, int]:
  """``"f5=10, Be5+=2"`` -> {move: points}; {} when `text` is a plain comment (no ``=`` in it).

  A list with an item that is not MOVE=POINTS (``Qg6=abc``) is a ValueError, not a comment.
  """
  items = text.split(',')
  if not any('=' in item for item in items):
    return {}
  points: dict[chess.Move, int] = {}
  for item in items:
    match = _POINTS_ITEM.match(item)
    if match is None:
      raise ValueError(f'c0 {text!r}: {item.strip()!r} is not MOVE=POINTS (points a whole number)')
    try:
      move = board.parse_san(match.group(1))
    except ValueError as e:
      raise ValueError(f'c0 {text!r}: {e}') from None
    points[move] = int(match.group(2))
  return points


def _moves(operations: dict, key: str) -> tuple[chess.Move, ...]:
  value = operations.get(key, ())
  return tuple(value) if isinstance(value, list) else (value,) if isinstance(value, chess.Move) else ()


def parse_line(text: str, line: int = 1, default_id: str | None = None) -> EpdPosition:
  """One EPD line -> position; ValueError says what is wrong with it."""
  board, operations = chess.Board.from_epd(text)
  if not board.is_valid():
    raise ValueError(f'invalid position {board.fen()!r} ({board.status()!r})')
  for key in ('bm', 'am'):
    if key in operations and not isinstance(operations[key], list):
      raise ValueError(f'{key} must be a list of moves, got {operations[key]!r}')
  c0 = operations.get('c0')
  points = _parse_points(board, c0) if isinstance(c0, str) else {}
  bm, am = _moves(operations, 'bm'), _moves(operations, 'am')
  if not (bm or am or points):
    raise ValueError('no bm, am or c0 points: nothing to score a move against')
  position_id = operations.get('id')
  if not isinstance(position_id, str):
    position_id = default_id or str(line)
  return EpdPosition(position_id, board.fen(), bm, am, points, line)


def read_epd(path: str | os.PathLike, limit: int | None = None) -> list[EpdPosition]:
  """The (first `limit`) positions of an EPD file; EpdFormatError names file:line of a bad one.

  Blank lines and lines starting with ``#`` are skipped.
  """
  path = os.fspath(path)
  stem = os.path.splitext(os.path.basename(path))[0]
  positions: list[EpdPosition] = []
  with open(path, 'rb') as f:
    for number, data in enumerate(f, start=1):
      if limit is not None and len(positions) >= limit:
        break
      try:
        text = data.decode('utf-8').strip()
      except UnicodeDecodeError as e:
        raise EpdFormatError(f'{path}:{number}: not UTF-8 text ({e})') from None
      if not text or text.startswith('#'):
        continue
      try:
        positions.append(parse_line(text, number, default_id=f'{stem}.{number}'))
      except ValueError as e:
        raise EpdFormatError(f'{path}:{number}: {e}') from None
  return positions


def _points(position: EpdPosition, move: chess.Move | None) -> int:
  return 0 if move is None else position.points.get(move, 0)


def score_move(position: EpdPosition, move: chess.Move | None) -> tuple[bool, int | None]:
  """(solved, points) of `move`: solved by the bm/am rule, points from c0 (None without c0)."""
  if position.bm:
    solved = move in position.bm and move not in position.am
  elif position.am:
    solved = move is not None and move not in position.am
  else:  # c0 points only: the best-scored moves count as best.
    solved = _points(position, move) == position.max_points
  points = _points(position, move) if position.points else None
  return bool(solved), points


def evaluate_positions(
  positions: Sequence[EpdPosition],
  agent: 'agents_lib.Agent',
  *,
  name: str = 'suite',
  path: str = '',
  progress: bool = True,
) -> SuiteResult:
  """Plays each position once with `agent` (given a fresh board) and scores the move."""
  results = []
  with progress_bars.bar(positions, desc=name, unit='position', disable=not progress, file=sys.stderr) as bar:
    for position in bar:
      board = position.board()
      move = agent.play(board.copy())
      legal = move is not None and board.is_legal(move)
      solved, points = score_move(position, move if legal else None)
      if not legal and points is not None:
        points = 0
      results.append(
        PositionResult(
          name,
          position.id,
          position.theme,
          position.line,
          position.fen,
          move.uci() if move else '0000',
          board.san(move) if legal else '',
          solved,
          points,
          position.max_points,
        )
      )
      bar.set_postfix(solved=sum(r.solved for r in results), refresh=False)
  return SuiteResult(name, path, results)


def suite_name(path: str | os.PathLike) -> str:
  return os.path.splitext(os.path.basename(os.fspath(path)))[0]


def evaluate_suite(
  path: str | os.PathLike, agent: 'agents_lib.Agent', *, num: int | None = None, progress: bool = True
) -> SuiteResult:
  """Reads the EPD file at `path` (its first `num` positions) and evaluates `agent` on it."""
  return evaluate_positions(read_epd(path, num), agent, name=suite_name(path), path=os.fspath(path), progress=progress)


def write_results(
  path: str | os.PathLike, suites: Sequence[SuiteResult], positions: Sequence[Sequence[EpdPosition]]
) -> None:
  """One CSV row per position of every suite."""
  with open(path, 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(RESULT_COLUMNS)
    for suite, suite_positions in zip(suites, positions, strict=True):
      for r, position in zip(suite.results, suite_positions, strict=True):
        board = position.board()
        writer.writerow(
          [
            r.suite,
            r.id,
            r.theme,
            r.line,
            r.fen,
            r.move,
            r.san,
            ' '.join(board.san(m) for m in position.bm),
            ' '.join(board.san(m) for m in position.am),
            int(r.solved),
            '' if r.points is None else r.points,
            '' if r.max_points is None else r.max_points,
          ]
        )


def run(
  *, suites: Sequence[str], agent: str, out: str | os.PathLike, num: int | None = None, progress: bool = True
) -> dict:
  """Evaluates the agent spec `agent` on every EPD file of `suites` (the first `num` positions of each).

  Writes ``results.csv`` and ``summary.json`` in `out`; returns the summary plus
  ``'results'``: the `SuiteResult` of each suite.
  """
  from searchless.play import agents as agents_lib  # Checkpoint agents import JAX on demand.

  if num is not None and num < 1:
    raise errors.BadInput(f'--num must be >= 1 (or left out: all), got {num}')
  positions = [read_epd(path, num) for path in suites]  # All read before any engine starts.
  for path, suite_positions in zip(suites, positions):
    if not suite_positions:
      raise errors.BadInput(f'no positions in {path}')
  os.makedirs(out, exist_ok=True)
  with agents_lib.opened(agent) as player:
    start = time.perf_counter()
    results = [
      evaluate_positions(p, player, name=suite_name(path), path=path, progress=progress)
      for path, p in zip(suites, positions)
    ]
    seconds, name = time.perf_counter() - start, player.name
  write_results(os.path.join(out, 'results.csv'), results, positions)
  summary = {'agent': name, 'agent_spec': agent, 'suites': [s.summary() for s in results], 'seconds': round(seconds, 3)}
  with open(os.path.join(out, 'summary.json'), 'w') as f:
    json.dump(summary, f, indent=2)
    f.write('\n')
  return {**summary, 'results': results}
