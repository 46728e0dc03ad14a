"""Opening positions for tournaments: read, made by Stockfish, written.

An `Opening` is where the agents start playing: a name, the position (FEN) and,
when it is known, the line of UCI moves that leads there from the standard
start (so the game's PGN and the repetition rules see the whole history; an
opening given only as a position has ``moves == ()``).

Readers (`read_openings`, by extension):

* ``.pgn``: each game's mainline end position (its moves too, unless the game
  starts from a ``FEN`` tag); named by its ``ECO`` and ``Opening`` tags;
* ``.epd``: one position per line, named by its ``id`` operation;
* ``.tsv``: Lichess' chess-openings tables (columns ``eco``, ``name``, ``pgn``
  with SAN movetext such as ``1. e4 e5 2. Nf3``).

Positions where the game is over (named openings such as "Barnes Opening:
Fool's Mate" end in checkmate) are left out. Errors say which file and line.
`make_openings` makes the project's own varied, balanced openings with
Stockfish (see there); `write_openings` writes EPD or PGN.

>>> opening = opening_from_san('1. Nh3', name='Amar Opening', eco='A00')
>>> opening.moves, opening.fen
(('g1h3',), 'rnbqkbnr/pppppppp/8/8/8/7N/PPPPPPPP/RNBQKB1R b KQkq - 1 1')
>>> opening.board().move_stack, opening.title
([Move.from_uci('g1h3')], 'A00 Amar Opening')
>>> Opening('empty centre', chess.STARTING_FEN).board().fen() == chess.STARTING_FEN
True
"""

import csv
import dataclasses
import os
import random
import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import chess
import chess.engine
import chess.pgn

from searchless.core import legality
from searchless.engines import launch
from searchless.plumbing import errors
from searchless.plumbing import outputs

FORMATS = ('.pgn', '.epd', '.tsv')
TSV_COLUMNS = ('eco', 'name', 'pgn')
_MOVE_NUMBER = re.compile(r'^\d+\.(\.\.)?$')
_RESULTS = ('1-0', '0-1', '1/2-1/2', '*')
_MATE_CP = 100_000  # Centipawn value of "mate in 0" when ranking MultiPV moves.


class Opening(NamedTuple):
  name: str
  fen: str  # The position the agents start from.
  moves: tuple[str, ...] = ()  # UCI moves from the standard start to `fen`; () if only the position is known.
  eco: str = ''  # ECO code, when known.

  @property
  def title(self) -> str:
    """'ECO name' (or just the name)."""
    return f'{self.eco} {self.name}' if self.eco else self.name

  def board(self) -> chess.Board:
    """The start position, with the opening's moves on its move stack when known."""
    if not self.moves:
      return chess.Board(self.fen)
    board = chess.Board()
    for uci in self.moves:
      board.push_uci(uci)
    return board


def opening_from_board(board: chess.Board, name: str, eco: str = '') -> Opening:
  """The opening ending at `board` (its moves when it started from the standard position)."""
  from_start = board.root().fen() == chess.STARTING_FEN
  moves = tuple(m.uci() for m in board.move_stack) if from_start else ()
  return Opening(name, board.fen(), moves, eco)


def opening_from_san(movetext: str, *, name: str = '', eco: str = '') -> Opening:
  """An opening from SAN movetext from the standard start ('1. e4 e5 2. Nf3'); ValueError if illegal."""
  board = chess.Board()
  for token in movetext.split():
    if _MOVE_NUMBER.match(token) or token in _RESULTS:
      continue
    token = re.sub(r'^\d+\.+', '', token)  # '1.e4' written without a space.
    try:
      board.push_san(token)
    except ValueError as error:
      raise errors.BadInput(f'bad move {token!r} after {board.ply()} plies: {error}') from None
  return opening_from_board(board, name or movetext, eco)


class _LineReader:
  """A text stream that counts lines (for error messages of the PGN reader)."""

  def __init__(self, stream):
    self._stream = stream
    self.line = 0  # Lines read so far.

  def readline(self) -> str:
    text = self._stream.readline()
    if text:
      self.line += 1
    return text


class _QuietBuilder(chess.pgn.GameBuilder):
  """python-chess's game builder without its log line per error: the errors are ours to report."""

  def handle_error(self, error: Exception) -> None:
    self.game.errors.append(error)


def _read_pgn(path: str) -> list[Opening]:
  openings: list[Opening] = []
  with open(path, encoding='utf-8-sig') as f:
    reader = _LineReader(f)
    while True:
      start = reader.line + 1
      game = chess.pgn.read_game(reader, Visitor=_QuietBuilder)  # type: ignore[call-overload]  # Only readline().
      if game is None:
        return openings
      variant = game.headers.get('Variant', 'Standard')
      if variant.lower() not in ('standard', 'chess', 'from position'):
        raise errors.BadInput(f'{path}:{start}: a {variant} game: openings are standard chess')
      if reason := legality.problems(game.board()):
        raise errors.BadInput(f'{path}:{start}: the start position is not legal chess ({reason})')
      if game.errors:
        raise errors.BadInput(f'{path}:{start}: bad game: {game.errors[0]}')
      board = game.end().board()
      if board.is_game_over():
        continue  # Checkmate or stalemate: nothing left to play.
      headers = game.headers
      name = headers.get('Opening', '?')
      if name == '?':
        name = headers.get('Event', '?')
      if name == '?':
        name = f'{os.path.basename(path)} #{len(openings) + 1}'
      eco = headers.get('ECO', '')
      openings.append(opening_from_board(board, name, '' if eco == '?' else eco))


def _read_epd(path: str) -> list[Opening]:
  openings = []
  with open(path, encoding='utf-8-sig') as f:
    for number, text in enumerate(f, 1):
      text = text.strip()
      if not text or text.startswith('#'):
        continue
      try:
        board, ops = chess.Board.from_epd(text)
      except ValueError as error:
        raise errors.BadInput(f'{path}:{number}: bad EPD line: {error}') from None
      if not board.is_valid():
        raise errors.BadInput(f'{path}:{number}: invalid position ({board.status()!r}): {text}')
      if board.is_game_over():
        continue
      name = str(ops.get('id') or f'{os.path.basename(path)}:{number}')
      openings.append(Opening(name, board.fen(), (), str(ops.get('eco') or '')))
  return openings


def _read_tsv(path: str) -> list[Opening]:
  openings = []
  with open(path, encoding='utf-8-sig', newline='') as f:
    rows = csv.reader(f, delimiter='\t')
    header = next(rows, None)
    if header is None or [h.strip() for h in header[:3]] != list(TSV_COLUMNS):
      raise errors.BadInput(f'{path}:1: expected the header {chr(9).join(TSV_COLUMNS)!r}, got {header!r}')
    for number, row in enumerate(rows, 2):
      if not any(cell.strip() for cell in row):
        continue
      if len(row) != 3:
        raise errors.BadInput(f'{path}:{number}: expected 3 tab-separated columns (eco, name, pgn), got {len(row)}')
      eco, name, movetext = (cell.strip() for cell in row)
      try:
        opening = opening_from_san(movetext, name=name, eco=eco)
      except ValueError as error:
        raise errors.BadInput(f'{path}:{number}: {error}') from None
      if opening.board().is_game_over():
        continue  # E.g. 'Barnes Opening: Fool's Mate'.
      openings.append(opening)
  return openings


def read_openings(path: str | os.PathLike) -> list[Opening]:
  """The openings of a .pgn, .epd or .tsv file (see the module docstring)."""
  path = os.fspath(path)
  extension = os.path.splitext(path)[1].lower()
  readers = {'.pgn': _read_pgn, '.epd': _read_epd, '.tsv': _read_tsv}
  if extension not in readers:
    raise errors.BadInput(f'{path}: unknown openings format {extension!r}: expected one of {", ".join(FORMATS)}')
  if not os.path.isfile(path):
    raise errors.MissingInput(f'openings file not found: {path}')
  openings = readers[extension](path)
  if not openings:
    raise errors.BadInput(f'{path}: no openings in the file')
  return openings


def sample_openings(openings: Sequence[Opening], n: int, *, seed: int = 0) -> list[Opening]:
  """`n` openings drawn without replacement (seeded), in their original order; all if n >= len.

  >>> sample_openings('abcdef', 3, seed=0), sample_openings('ab', 5)
  (['a', 'd', 'f'], ['a', 'b'])
  """
  if n < 0:
    raise errors.BadInput(f'cannot sample {n} openings')
  if n >= len(openings):
    return list(openings)
  return [openings[i] for i in sorted(random.Random(seed).sample(range(len(openings)), n))]


def write_openings(openings: Iterable[Opening], path: str | os.PathLike) -> int:
  """Writes openings as EPD (positions, named by `id`) or PGN (moves, or a FEN start); returns the count.

  PGN keeps the move history, EPD only the position (as ``ce``-less EPD with ``id`` and ``eco``).
  """
  path = os.fspath(path)
  extension = os.path.splitext(path)[1].lower()
  if extension not in ('.epd', '.pgn'):
    raise errors.BadInput(f'{path}: can write .epd or .pgn openings, not {extension!r}')
  count = 0
  with outputs.open_output(path) as f:  # Its errors name it.
    for opening in openings:
      board = opening.board()
      if extension == '.epd':
        ops = {'id': opening.name} | ({'eco': opening.eco} if opening.eco else {})
        f.write(board.epd(**ops) + '\n')  # type: ignore[arg-type]  # EPD operations, not the flags.
      else:
        game = chess.pgn.Game.from_board(board)
        game.headers['Event'] = 'searchless openings'
        game.headers['Round'] = str(count + 1)
        if opening.eco:
          game.headers['ECO'] = opening.eco
        game.headers['Opening'] = opening.name
        f.write(game.accept(chess.pgn.StringExporter()) + '\n\n')
      count += 1
  return count


def _mover_cp(info: chess.engine.InfoDict, turn: chess.Color) -> int:
  return info['score'].pov(turn).score(mate_score=_MATE_CP)


@dataclasses.dataclass(frozen=True)
class MakeOptions:
  """How `make_openings` makes openings (see there)."""

  plies: int = 8  # Plies per opening, from the standard start.
  seed: int = 0  # Seed of the lines (and, in `run`, of `sample`).
  engine_path: str | None = None  # Stockfish (default: `launch.require_stockfish`'s search).
  limit: str = 'nodes=2000'  # Per search: nodes=N, depth=N or time=S.
  max_eval_cp: int = 100  # Keep lines whose end eval is within ± this.
  multipv: int = 4  # Choose among the engine's top moves ...
  window_cp: int = 50  # ... that score within this of the best.
  max_attempts: int | None = None  # Lines to try at most; None: 20 n + 100.
  hash_mb: int = 16


def make_openings(n: int, options: MakeOptions = MakeOptions()) -> list[Opening]:
  """`n` distinct balanced openings of `plies` plies from the standard start, made with Stockfish.

  The names below are `options`' fields. Line k (k = 0, 1, ...) is drawn
  with ``random.Random(f'{seed}:{k}')``: at each ply Stockfish searches the
  position with MultiPV `multipv` at `limit`, and a move is chosen uniformly
  among those scored within `window_cp` of the best. A line is kept when its
  end position, searched afresh at `limit`, scores within ±`max_eval_cp` (no
  mate) for White, the game is not over on the way, and its position (EPD:
  pieces, side, castling, en passant) is new. Searches run with Threads=1 and
  a cleared hash (``ucinewgame``) before every line and before every final
  evaluation, so with a node or depth limit the result depends on the seed
  only, and ``make_openings(m)`` is a prefix of ``make_openings(n)`` for
  m < n. Raises ValueError when `max_attempts` lines (default 20 n + 100) do
  not give `n` openings.
  """
  o = options
  if n < 0 or o.plies < 1 or o.multipv < 1 or o.window_cp < 0 or o.max_eval_cp < 0:
    raise errors.BadInput(
      f'make_openings needs n >= 0, plies >= 1, multipv >= 1, window_cp >= 0 and '
      f'max_eval_cp >= 0; got n={n}, plies={o.plies}, multipv={o.multipv}, window_cp={o.window_cp}, '
      f'max_eval_cp={o.max_eval_cp}'
    )
  search_limit = launch.SearchLimit.parse(o.limit).to_chess()
  path = launch.require_stockfish(o.engine_path)
  attempts = o.max_attempts if o.max_attempts is not None else 20 * n + 100
  openings: list[Opening] = []
  seen: set[str] = set()
  engine = launch.open_engine(path, hash_mb=o.hash_mb)
  try:
    for k in range(attempts):
      if len(openings) == n:
        break
      rng = random.Random(f'{o.seed}:{k}')
      board = _random_line(engine, search_limit, rng, o.plies, o.multipv, o.window_cp, game=(o.seed, k, 'line'))
      if board is None or board.epd() in seen:
        continue
      info = engine.analyse(board, search_limit, game=(o.seed, k, 'eval'))
      centipawns = info['score'].white().score()  # None for a mate.
      if centipawns is None or abs(centipawns) > o.max_eval_cp:
        continue
      seen.add(board.epd())
      movetext = chess.Board().variation_san(board.move_stack)
      openings.append(opening_from_board(board, movetext))
  finally:
    engine.quit()
  if len(openings) < n:
    raise errors.BadInput(
      f'only {len(openings)} of {n} balanced openings after {attempts} lines: allow a larger '
      f'max_eval_cp or window_cp, or fewer plies'
    )
  return openings


def _random_line(
  engine: chess.engine.SimpleEngine,
  limit: chess.engine.Limit,
  rng: random.Random,
  plies: int,
  multipv: int,
  window_cp: int,
  game: object,
) -> chess.Board | None:
  """`plies` moves, each uniform among the engine's near-best MultiPV moves; None if the game ends."""
  board = chess.Board()
  for _ in range(plies):
    width = min(multipv, board.legal_moves.count())
    infos = engine.analyse(board, limit, multipv=width, game=game)
    scored = [(info['pv'][0], _mover_cp(info, board.turn)) for info in infos if info.get('pv') and 'score' in info]
    if not scored:
      raise chess.engine.EngineError(f'the engine returned no scored move for {board.fen()}')
    best = max(cp for _, cp in scored)
    candidates = sorted((move for move, cp in scored if cp >= best - window_cp), key=chess.Move.uci)
    board.push(rng.choice(candidates))
    if board.is_game_over(claim_draw=True):
      return None
  return board


def run(
  *,
  out: str | os.PathLike,
  num: int | None = None,
  source: str | os.PathLike | None = None,
  sample: int | None = None,
  options: MakeOptions = MakeOptions(),
) -> int:
  """Makes `num` balanced openings (`make_openings` with `options`), or reads `source` (`sample` of them drawn
  with `options.seed`).

  Writes the openings to `out` (.epd or .pgn, `write_openings`); returns how many.
  """
  if os.path.splitext(os.fspath(out))[1].lower() not in ('.epd', '.pgn'):
    raise errors.BadInput(f'--out must end in .epd or .pgn, got {os.fspath(out)!r}')
  if source is not None:
    if num is not None:
      raise errors.BadInput('give --num (make openings) or --from (read them), not both; --sample N with --from')
    openings = read_openings(source)
    if sample is not None:
      openings = sample_openings(openings, sample, seed=options.seed)
  else:
    if num is None:
      raise errors.BadInput('give --num N (make openings) or --from FILE (read them)')
    if sample is not None:
      raise errors.BadInput('--sample goes with --from')
    openings = make_openings(num, options)
  return write_openings(openings, out)
