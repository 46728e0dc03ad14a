"""The UCI commands the annotator sends, as python-chess engine commands (process handling, crash detection).

`MoveSearch` is ``go ... searchmoves <move>`` (the paper's per-move search),
`MultiPVSearch` one search scoring every root move (MultiPV = the legal moves),
`NewGame` ``ucinewgame`` + ``isready`` (a fresh engine state per board).
`BadAnswer` is an answer without what the search was for; `parse_score` and
`multipv_index` read an ``info`` line without parsing the rest of it.
"""

import chess
import chess.engine


class BadAnswer(Exception):
  """An engine answer without what the search was for (a score, a best move)."""


def parse_score(line: str) -> chess.engine.Score:
  """The ``score cp N`` / ``score mate N`` of an ``info`` line (bounds kept, as python-chess keeps them)."""
  tokens = line.split()
  index = tokens.index('score')
  try:
    kind, value = tokens[index + 1], int(tokens[index + 2])
  except (IndexError, ValueError):
    raise chess.engine.EngineError(f'unparsable score in {line!r}') from None
  if kind == 'cp':
    return chess.engine.Cp(value)
  if kind == 'mate':
    return chess.engine.Mate(value)
  raise chess.engine.EngineError(f'unknown score kind in {line!r}')


def multipv_index(line: str) -> int:
  """The ``multipv N`` of an ``info`` line; 1 where it has none (python-chess' default)."""
  at = line.find(' multipv ')
  if at < 0:
    return 1
  try:
    return int(line[at + 9 :].split(maxsplit=1)[0])
  except (IndexError, ValueError):
    raise chess.engine.EngineError(f'unparsable multipv in {line!r}') from None


class MoveSearch(chess.engine.BaseCommand):
  """``position`` + ``go … searchmoves <move>``; the result is the last reported score.

  The per-move hot loop of the paper's method (one search per legal move). It
  runs as a python-chess command, so process handling, crash detection and
  cancellation stay python-chess', but it skips the generic analysis
  machinery (info parsing into dicts, per-call classes), which cost ~1% of
  throughput at 50 ms per search (benchmarks/annotate_overhead.py).
  Semantics match `analyse(board, limit, root_moves=[move])['score']`: the
  score of the last ``info`` line before ``bestmove``.
  """

  def __init__(self, engine: chess.engine.Protocol, position: str, go: str, move: str):
    super().__init__(engine)
    self._position, self._go, self._move = position, go, move
    self._score: chess.engine.Score | None = None

  def start(self) -> None:
    self._engine.send_line(self._position)
    self._engine.send_line(f'{self._go} searchmoves {self._move}')

  def line_received(self, line: str) -> None:
    if line.startswith('bestmove'):
      best = line.split()[1:2]
      if best != [self._move]:  # The only move it may search.
        raise chess.engine.EngineError(f'engine answered {line!r} to searchmoves {self._move}')
      self.result.set_result(self._score)
      self.set_finished()
    elif line.startswith('info') and ' score ' in line and not line.startswith('info string'):
      self._score = parse_score(line)

  def cancel(self) -> None:
    self._engine.send_line('stop')

  def engine_terminated(self, exc: Exception) -> None:
    self._handle_exception(exc)


class MultiPVSearch(chess.engine.BaseCommand):
  """``setoption MultiPV`` + ``position`` + ``go``; the result is each line's first move and its last score.

  The MultiPV hot loop: Stockfish reports every line at every depth (about
  ``num_moves * depth`` ``info`` lines a board, each with a whole PV).
  python-chess' ``analyse`` parses each of them, playing out every PV on a
  board, which cost the worker about as much CPU as the engine's own search
  (benchmarks/studies/annotate_cpu.py). Here a line is only kept as text; at
  ``bestmove`` the lines are read from the last back until every MultiPV index
  has its score and its PV, and only those are parsed. Semantics match
  ``analyse(board, limit, multipv=n)``: for each index, the score of the last
  line that had one and the first move of the last line that had a PV.
  """

  def __init__(self, engine: chess.engine.Protocol, board: chess.Board, go: str, multipv: int):
    super().__init__(engine)
    self._board, self._go, self._multipv = board, go, multipv
    self._lines: list[str] = []  # Every line since `go`, as text: parsed once, at bestmove.

  def start(self) -> None:
    engine = self._engine
    engine._setoption('MultiPV', self._multipv)  # type: ignore[attr-defined]  # python-chess' own, so its config stays true.
    engine._position(self._board)  # type: ignore[attr-defined]
    engine.send_line(self._go)

  def line_received(self, line: str) -> None:
    if not line.startswith('bestmove'):
      self._lines.append(line)
      return
    scores: dict[int, str] = {}  # MultiPV index -> its last info line with a score.
    pvs: dict[int, str] = {}  # MultiPV index -> its last info line with a PV.
    for info in reversed(self._lines):  # The last iteration names every line: a few dozen lines are read.
      if not info.startswith('info') or info.startswith('info string'):
        continue
      has_score, has_pv = ' score ' in info, ' pv ' in info
      if has_score or has_pv:
        index = multipv_index(info)
        if has_score:
          scores.setdefault(index, info)
        if has_pv:
          pvs.setdefault(index, info)
        if len(scores) == len(pvs) == self._multipv:
          break
    moves: dict[str, chess.engine.Score] = {}
    for index in sorted(pvs.keys() & scores.keys()):
      pv = pvs[index]
      moves[pv[pv.index(' pv ') + 4 :].split(maxsplit=1)[0]] = parse_score(scores[index])
    self.result.set_result(moves)
    self.set_finished()

  def cancel(self) -> None:
    self._engine.send_line('stop')

  def engine_terminated(self, exc: Exception) -> None:
    self._handle_exception(exc)


class NewGame(chess.engine.BaseCommand):
  """``ucinewgame`` + ``isready``: forget everything searched so far (hash, histories)."""

  def start(self) -> None:
    self._engine._ucinewgame()  # type: ignore[attr-defined]  # The UCI protocol's own: python-chess then sends no second one.
    self._engine.send_line('isready')

  def line_received(self, line: str) -> None:
    if line.strip() == 'readyok':
      self.result.set_result(None)
      self.set_finished()

  def engine_terminated(self, exc: Exception) -> None:
    self._handle_exception(exc)
