r"""Evaluate an agent on Lichess puzzles: accuracy overall and per rating band.

The rule is Lichess's (and the reference evaluation's): the opponent's setup
move ``Moves[0]`` is played, then the agent must find ``Moves[1]``, the
opponent replies ``Moves[2]``, the agent must find ``Moves[3]``, and so on. The
puzzle is solved when every agent move matches, except that a move that
checkmates is always right: when the agent plays a different move that mates,
the puzzle is solved there (Lichess accepts every mate in one).

>>> class Fixed:
...   name = 'fixed'
...   def __init__(self, *moves): self.moves = list(moves)
...   def play(self, board): return chess.Move.from_uci(self.moves.pop(0))
...   def close(self): pass
>>> puzzle = puzzles_lib.parse_row(puzzles_lib.LICHESS, {
...     'PuzzleId': 'm1', 'FEN': '6k1/1p3ppp/8/8/8/8/5PPP/R2R2K1 b - - 0 1', 'Moves': 'b7b6 d1d8', 'Rating': '600'})
>>> solve(puzzle, Fixed('a1a8')).solved  # Another mate in one: solved.
True
>>> solve(puzzle, Fixed('d1d7'))
PuzzleResult(puzzle_id='m1', rating=600, solved=False, moves_played=('d1d7',), first_wrong=1, themes=())
>>> accuracy_by_band([solve(puzzle, Fixed('d1d8'))])
[Band(lower=600, upper=800, n=1, solved=1, accuracy=1.0)]

Command line (`searchless.commands.puzzles`; the last stdout line is ``accuracy: 0.xxxx (k/n)``)::

  searchless-puzzles --puzzles lichess_db_puzzle.csv --agent stockfish:nodes=20000 \
      --num 1000 --out runs/puzzles-sf

writes ``results.csv`` (one row per puzzle), ``summary.json`` and
``accuracy_by_rating.png`` in ``--out``. Each puzzle's result is also journalled there
as it is done: a run that is stopped resumes after the last of them when rerun with
the same agent and puzzles (``summary.json``'s seconds are then the last run's).
"""

import contextlib
import csv
import io
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import IO, TYPE_CHECKING, NamedTuple

import chess
import chess.pgn

from searchless.core import artefacts
from searchless.data import puzzles as puzzles_lib
from searchless.plumbing import errors
from searchless.plumbing import outputs
from searchless.plumbing import progress_bars

if TYPE_CHECKING:
  from searchless.play import agents as agents_lib

RESULT_COLUMNS = ('PuzzleId', 'Rating', 'solved', 'played', 'expected', 'first_wrong', 'Moves', 'Themes')


class PuzzleResult(NamedTuple):
  puzzle_id: str
  rating: int
  solved: bool
  moves_played: tuple[str, ...]  # UCI moves the agent played, the wrong one (if any) last.
  first_wrong: int | None  # Index into `Puzzle.moves` of the first wrong agent move; None if solved.
  themes: tuple[str, ...]


class Band(NamedTuple):
  lower: int  # Ratings in [lower, upper).
  upper: int
  n: int
  solved: int
  accuracy: float


def initial_board(puzzle: puzzles_lib.Puzzle) -> chess.Board:
  """The board before ``Moves[0]``, with the game's move history when the row has a PGN."""
  pgn = puzzle.row.get('PGN')
  if pgn:
    game = chess.pgn.read_game(io.StringIO(pgn))
    if game is not None:
      board = game.end().board()
      if board.fen() == puzzle.fen:
        return board
  return chess.Board(puzzle.fen)


def solve(puzzle: puzzles_lib.Puzzle, agent: 'agents_lib.Agent') -> PuzzleResult:
  """Plays `puzzle` with `agent` (anything with ``play(board) -> chess.Move``).

  The agent gets a fresh copy of the board, with its move history, for each
  of its moves. A move that is illegal (or None) fails the puzzle.
  """
  board = initial_board(puzzle)
  played: list[str] = []

  def result(solved: bool, first_wrong: int | None) -> PuzzleResult:
    return PuzzleResult(puzzle.puzzle_id, puzzle.rating, solved, tuple(played), first_wrong, puzzle.themes)

  for index, uci in enumerate(puzzle.moves):
    expected = chess.Move.from_uci(uci)
    if index % 2 == 1:
      move = agent.play(board.copy())
      played.append(move.uci() if move else '0000')
      if move != expected:
        if not move or not board.is_legal(move):
          return result(False, index)
        board.push(move)
        mated = board.is_checkmate()
        return result(mated, None if mated else index)
    board.push(expected)
  return result(True, None)


def evaluate(
  puzzles: Iterable[puzzles_lib.Puzzle],
  agent: 'agents_lib.Agent',
  *,
  progress: bool = True,
  previous: Sequence[PuzzleResult] = (),
  on_result: Callable[[PuzzleResult], None] | None = None,
) -> list[PuzzleResult]:
  """Solves each puzzle in turn, after the `previous` results (returned first); `on_result` sees each new one.
  A tqdm bar (on stderr) shows the running accuracy of them all."""
  results: list[PuzzleResult] = list(previous)
  total = len(puzzles) if isinstance(puzzles, Sequence) else None
  with progress_bars.bar(
    puzzles, total=total, desc='puzzles', unit='puzzle', disable=not progress, file=sys.stderr
  ) as bar:
    for puzzle in bar:
      results.append(solve(puzzle, agent))
      if on_result is not None:
        on_result(results[-1])
      bar.set_postfix(accuracy=f'{accuracy(results):.3f}', refresh=False)
  return results


JOURNAL = 'journal.jsonl'  # In --out while a run is unfinished: its key, then one result per line; a rerun resumes.


def journal_key(agent: str, puzzles: str) -> dict[str, str]:
  """What a journal must match to be resumed: the agent spec, the puzzle file and, for a checkpoint or search
  agent, the parameters it reads and when they were written (a run trained on in between is measured again)."""
  from searchless.model import loading
  from searchless.play import agents as agents_lib

  key = {'agent': agent, 'puzzles': os.path.abspath(puzzles), 'model': ''}
  kind, arg, _ = agents_lib.parse_spec(agent)
  if kind in ('checkpoint', 'search'):
    try:
      params = loading.resolve(arg)
      key['model'] = f'{params}@{os.path.getmtime(str(params))}'
    except (FileNotFoundError, ValueError):
      pass  # Opening the agent says what is wrong.
  return key


def _journalled(path: str, key: dict, chosen: Sequence[puzzles_lib.Puzzle]) -> list[PuzzleResult]:
  """The results an interrupted run with the same `key` (agent spec, puzzle file) wrote to `path`, when they are
  the first of `chosen`; else none (the run starts again)."""
  if not os.path.exists(path):
    return []
  with open(path) as f:
    lines = f.read().splitlines()
  done: list[PuzzleResult] = []
  try:
    if not lines or json.loads(lines[0]) != key:
      return []
    for line in lines[1:]:
      fields = json.loads(line)  # A PuzzleResult's fields by name; its tuples come back as lists.
      done.append(
        PuzzleResult(**{**fields, 'moves_played': tuple(fields['moves_played']), 'themes': tuple(fields['themes'])})
      )
  except ValueError:  # A line cut by the interruption: what came before it is kept.
    pass
  except (TypeError, KeyError):  # Not a result this version writes (another version's journal): start again.
    return []
  return done if [r.puzzle_id for r in done] == [p.puzzle_id for p in chosen[: len(done)]] else []


def accuracy(results: Sequence[PuzzleResult]) -> float:
  """The fraction of puzzles solved (nan for none)."""
  return sum(r.solved for r in results) / len(results) if results else math.nan


def band_lower(rating: int, width: int = 200) -> int:
  """The lower edge of the rating band holding `rating`: bands are [k*width, (k+1)*width).

  >>> band_lower(1400), band_lower(1399), band_lower(1599)
  (1400, 1200, 1400)
  """
  if width <= 0:
    raise errors.BadInput(f'band width must be positive, got {width}')
  return rating // width * width


def accuracy_by_band(results: Iterable[PuzzleResult], width: int = 200) -> list[Band]:
  """Accuracy per rating band [lower, lower + width), bands with puzzles only, by rating."""
  counts: dict[int, list[int]] = {}
  for r in results:
    count = counts.setdefault(band_lower(r.rating, width), [0, 0])
    count[0] += 1
    count[1] += int(r.solved)
  return [Band(lower, lower + width, n, solved, solved / n) for lower, (n, solved) in sorted(counts.items())]


def band_table(bands: Sequence[Band]) -> str:
  """A text table of the bands.

  >>> print(band_table([Band(1400, 1600, 3, 2, 2 / 3)]))
  rating         n  solved  accuracy
  1400-1599      3       2    0.6667
  """
  lines = [f'{"rating":<10} {"n":>5} {"solved":>7} {"accuracy":>9}']
  for band in bands:
    lines.append(f'{f"{band.lower}-{band.upper - 1}":<10} {band.n:>5} {band.solved:>7} {band.accuracy:>9.4f}')
  return '\n'.join(lines)


def plot_bands(bands: Sequence[Band], path: str | os.PathLike, title: str) -> None:
  """Writes a PNG bar chart of the accuracy per rating band, each bar annotated with its n."""
  from matplotlib.figure import Figure  # No pyplot: no global state, no display backend.

  fig = Figure(figsize=(max(6.0, 0.6 * len(bands) + 2), 4.5))
  ax = fig.subplots()
  centres = [(b.lower + b.upper) / 2 for b in bands]
  width = (bands[0].upper - bands[0].lower) * 0.85 if bands else 1.0
  bars = ax.bar(centres, [b.accuracy for b in bands], width=width, color='tab:blue', alpha=0.8)
  for bar, band in zip(bars, bands):
    ax.annotate(
      f'n={band.n}',
      (bar.get_x() + bar.get_width() / 2, bar.get_height()),
      xytext=(0, 2),
      textcoords='offset points',
      ha='center',
      va='bottom',
      fontsize=8,
    )
  if bands:
    edges = sorted({b.lower for b in bands} | {b.upper for b in bands})
    ax.set_xticks(edges, [str(e) for e in edges], rotation=45 if len(edges) > 12 else 0)
  ax.set(xlabel='puzzle rating', ylabel='accuracy (solved)', ylim=(0, 1.1), title=title)
  ax.grid(axis='y', alpha=0.3)
  fig.tight_layout()
  with outputs.open_output(path, 'wb') as f:
    fig.savefig(f, dpi=100, format='png')


def write_results(
  path: str | os.PathLike, puzzles: Sequence[puzzles_lib.Puzzle], results: Sequence[PuzzleResult]
) -> None:
  """One CSV row per puzzle: id, rating, solved (1/0), the moves played and expected, ..."""
  with outputs.open_output(path, 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(RESULT_COLUMNS)
    for puzzle, r in zip(puzzles, results, strict=True):
      writer.writerow(
        [
          r.puzzle_id,
          r.rating,
          int(r.solved),
          ' '.join(r.moves_played),
          ' '.join(puzzle.solver_moves),
          '' if r.first_wrong is None else r.first_wrong,
          ' '.join(puzzle.moves),
          ' '.join(r.themes),
        ]
      )


def summarize(
  results: Sequence[PuzzleResult],
  bands: Sequence[Band],
  *,
  agent_name: str,
  agent_spec: str,
  puzzles_path: str,
  band_width: int,
  seconds: float,
) -> dict:
  solved = sum(r.solved for r in results)
  return {
    'agent': agent_name,
    'agent_spec': agent_spec,
    'puzzles': puzzles_path,
    'n': len(results),
    'solved': solved,
    'accuracy': solved / len(results),
    'band_width': band_width,
    'bands': [b._asdict() for b in bands],
    'seconds': round(seconds, 3),
  }


def run(
  *,
  puzzles: str,
  agent: str,
  out: str | os.PathLike,
  num: int | None = None,
  band_width: int = 200,
  progress: bool = True,
) -> dict:
  """Evaluates the agent spec `agent` on the puzzle CSV `puzzles` (its first `num`); returns the summary.

  Writes ``results.csv``, ``summary.json`` and ``accuracy_by_rating.png`` in `out`, its one writer
  (`outputs.sole_writer`: a second is refused, and a filesystem error names its file and ``--out``).
  """
  if num is not None and num < 1:
    raise errors.BadInput(f'--num must be >= 1 (or left out: all), got {num}')
  if band_width <= 0:
    raise errors.BadInput(f'--band_width must be positive, got {band_width}')
  chosen = list(puzzles_lib.read_puzzles(puzzles, limit=num))
  if not chosen:
    raise errors.BadInput(f'no puzzles in {puzzles}')
  with outputs.sole_writer(out, 'searchless-puzzles', '--out'):
    return _run(chosen, agent, puzzles, os.fspath(out), band_width, progress)


def _run(chosen: list[puzzles_lib.Puzzle], agent: str, puzzles: str, out: str, band_width: int, progress: bool) -> dict:
  """`run` in its locked output folder: the journal is made with the first result (a run that fails before it
  leaves none), and removed once the results are written."""
  from searchless.play import agents as agents_lib

  journal = os.path.join(out, JOURNAL)
  key = journal_key(agent, puzzles)
  done = _journalled(journal, key, chosen)
  if done:
    print(f'{journal}: resuming after the {len(done)} puzzles an interrupted run solved or failed', file=sys.stderr)
  log: IO[str] | None = None
  kept = 0  # Results of this run in the journal.

  def journal_one(r: PuzzleResult) -> None:
    nonlocal log, kept
    if log is None:
      log = outputs.open_output(journal, 'a' if done else 'w')
      if not done:
        log.write(json.dumps(key) + '\n')
    log.write(json.dumps(r._asdict()) + '\n')
    log.flush()
    kept += 1

  try:
    with agents_lib.opened(agent) as player:
      start = time.perf_counter()
      results = evaluate(chosen[len(done) :], player, progress=progress, previous=done, on_result=journal_one)
      seconds, name = time.perf_counter() - start, player.name
  except BaseException as error:
    if log is not None:
      with contextlib.suppress(OSError):  # A full disk fails the close's flush too.
        log.close()
      if not done and not kept:
        os.remove(journal)  # Not one result in it.
    if isinstance(error, KeyboardInterrupt) and (done or kept):
      raise KeyboardInterrupt(
        f'{len(done) + kept} of {len(chosen)} puzzles kept in {journal}; rerun the same command to do the rest'
      ) from None
    raise
  if log is not None:
    log.close()
  bands = accuracy_by_band(results, band_width)
  summary = summarize(
    results, bands, agent_name=name, agent_spec=agent, puzzles_path=puzzles, band_width=band_width, seconds=seconds
  )
  write_results(os.path.join(out, 'results.csv'), chosen, results)
  artefacts.PuzzleSummary(**summary).write(os.path.join(out, artefacts.PuzzleSummary.FILE))  # Typed, versioned.
  plot_bands(
    bands, os.path.join(out, 'accuracy_by_rating.png'), f'{name}: {summary["solved"]}/{summary["n"]} puzzles solved'
  )
  if os.path.exists(journal):
    os.remove(journal)  # Finished: a rerun measures again.
  return summary
