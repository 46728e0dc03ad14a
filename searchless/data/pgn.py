"""Stream games out of PGN files (plain, .zst, .bz2, .gz) and parse them to boards.

Reading is split in two so a Beam pipeline can parallelise the expensive part:
`iter_raw_games` streams the (possibly compressed) file and cuts it into the
text of single games, cheaply and in constant memory; `parse_game` turns one
game's text into its board states with python-chess, or into a `Skip` that
says why the game is not used (and where it is).

Remote paths go through Beam's `FileSystems` (`searchless.plumbing.files`), so ``gs://`` and ``s3://`` inputs work
wherever the matching Beam extra is installed.
"""

import dataclasses
import hashlib
import io
import itertools
import re
from collections.abc import Iterator, Sequence

import chess
import chess.pgn

from searchless.core import legality
from searchless.core import tokenizer
from searchless.data import streams

RESULTS = ('1-0', '0-1', '1/2-1/2', '*')

# Reasons a game is not used; each is a Beam counter and a manifest entry.
SKIP_REASONS = (
  'variant',  # Variant tag other than Standard (chess960, crazyhouse, ...).
  'illegal_move',  # A move that is illegal or ambiguous in its position.
  'unparsable',  # Not a PGN game (bad FEN tag, no headers and no moves, ...).
  'bad_encoding',  # Bytes that are not UTF-8 (garbage in the file).
  'truncated',  # The game's text ends before its result (e.g. a cut file).
  'filtered_elo',  # Outside --min_elo / --max_elo.
  'filtered_speed',  # Time control not among --speeds.
  'filtered_bot',  # A BOT account played (with --exclude_bots).
  'illegal_position',  # A start (FEN tag) that is no legal chess position: two kings, the side not to move
  # in check, castling rights the board cannot hold (Chess960 without a Variant tag), ...
  'null_move',  # A null move ('--', 'Z0'): the boards after it are no game's.
)


@dataclasses.dataclass(frozen=True)
class RawGame:
  """The text of one game and where it was found."""

  path: str
  line: int  # 1-based line of the game's first line in `path`.
  text: str

  @property
  def location(self) -> str:
    return f'{self.path}:{self.line}'


def iter_raw_games(path: str) -> Iterator[RawGame]:
  """Streams `path` and yields the text of each game, in file order.

  A game starts at a tag line (``[...]``) that follows movetext or a blank
  line after tags. Byte order marks (at the start of the file, or of files
  concatenated into it) are dropped. Bytes that are not UTF-8 are replaced
  with U+FFFD (and the game is later skipped as ``bad_encoding``). When the
  input turns out corrupt, the text read before the corruption is still
  yielded (parsed, a cut game is skipped as ``truncated``), then
  `streams.CorruptInputError` is raised.
  """
  lines: list[str] = []
  start = 1
  has_movetext = False
  after_blank = False
  try:
    for number, data in enumerate(streams.read_lines(path), start=1):
      line = data.decode('utf-8', errors='replace').rstrip('\r').replace('\ufeff', '')  # BOMs of concatenated files.
      # A game ends at the next tag section, or at the blank line after its movetext.
      starts_game = line.startswith('[') and (has_movetext or after_blank)
      if lines and line.strip() and (starts_game or (has_movetext and after_blank)):
        yield RawGame(path, start, '\n'.join(lines) + '\n')
        lines, start, has_movetext = [], number, False
      if not lines and not line.strip():
        start = number + 1
        continue
      lines.append(line)
      stripped = line.strip()
      after_blank = not stripped
      if stripped and not stripped.startswith('['):
        has_movetext = True
  except streams.CorruptInputError:
    if any(l.strip() for l in lines):
      yield RawGame(path, start, '\n'.join(lines) + '\n')  # Read before the corruption: counted, not lost.
    raise
  if any(l.strip() for l in lines):
    yield RawGame(path, start, '\n'.join(lines) + '\n')


def interleave_raw_games(paths: Sequence[str]) -> Iterator[RawGame]:
  """The games of `paths`, the files interleaved game by game (first of each, second of each, ...)."""
  streams = [iter_raw_games(path) for path in paths]
  for group in itertools.zip_longest(*streams):
    yield from (game for game in group if game is not None)


@dataclasses.dataclass(frozen=True)
class GameFilter:
  """Which games to keep, besides requiring standard chess."""

  min_elo: int | None = None  # Both players rated at least this.
  max_elo: int | None = None  # Both players rated at most this.
  speeds: tuple[str, ...] = ()  # Lichess speeds to keep, e.g. ('blitz', 'rapid'); () keeps all.
  exclude_bots: bool = False  # Drop games with a BOT account.


def speed(time_control: str) -> str:
  """Lichess speed of a ``TimeControl`` tag (estimated time = base + 40 * increment).

  >>> speed('180+0'), speed('600+5'), speed('-'), speed('15+0')
  ('blitz', 'rapid', 'correspondence', 'ultrabullet')
  """
  try:
    base, increment = (int(x) for x in time_control.split('+'))
  except ValueError:
    return 'correspondence' if time_control.strip() == '-' else 'unknown'
  total = base + 40 * increment
  for limit, name in ((29, 'ultrabullet'), (179, 'bullet'), (479, 'blitz'), (1499, 'rapid')):
    if total <= limit:
      return name
  return 'classical'


@dataclasses.dataclass(frozen=True)
class Game:
  """A parsed, kept game: its board states in order (the final one included)."""

  key: str  # Stable identity used for the train/test split.
  location: str
  fens: tuple[str, ...]  # With `parse_game(..., moves_only=True)`: the start position's alone.
  # With `parse_game(..., with_evals=True)` or `moves_only=True` only (else empty):
  moves: tuple[str, ...] = ()  # The mainline's moves (UCI): moves[k] is played on fens[k].
  evals: tuple[
    str | None, ...
  ] = ()  # Per board, the text of its [%eval] comment ('0.35', '#-4', '1.2,20'); None: none.


@dataclasses.dataclass(frozen=True)
class Skip:
  reason: str  # One of SKIP_REASONS.
  location: str
  detail: str = ''


class _BoardsVisitor(chess.pgn.BaseVisitor):
  """Collects the mainline's boards (and its moves and [%eval] comments); ignores variations."""

  every_fen = True  # Else the start position's FEN alone (`parse_game`'s moves_only).

  def begin_game(self):
    self.headers = {}
    self.fens = []
    self.moves = []
    self.evals = {}  # Board index (plies played) -> the eval comment's text.
    self.start = None  # The board before the first move (its FEN tag's, else the standard one).
    self.null_move = ''  # Where the first null move is, if any.
    self.errors = []
    self.board = None
    self.result_seen = False
    self.after_result = False  # Moves after the result token: not this game's.

  def visit_header(self, tagname, tagvalue):
    self.headers[tagname] = tagvalue

  def end_headers(self):
    variant = self.headers.get('Variant', 'Standard').strip().lower()
    if variant not in ('standard', 'from position', ''):
      return chess.pgn.SKIP
    return None

  def visit_board(self, board):
    self.board = board

  def begin_variation(self):
    return chess.pgn.SKIP

  def visit_move(self, board, move):
    if self.start is None:
      self.start = board.copy(stack=False)
    if self.result_seen:
      self.after_result = True
    elif not move:  # A null move.
      self.null_move = self.null_move or f'a null move at ply {len(self.moves) + 1}'
    elif not self.errors:
      if self.every_fen or not self.fens:
        self.fens.append(tokenizer.clamp_counters(board.fen()))
      self.moves.append(move.uci())

  def visit_comment(self, comment):
    if self.result_seen or self.errors or (match := chess.pgn.EVAL_REGEX.search(comment)) is None:
      return
    text = f'#{match.group("mate")}' if match.group('mate') else match.group('cp')
    self.evals[len(self.moves)] = text + (f',{match.group("depth")}' if match.group('depth') else '')

  def visit_result(self, result):
    self.result_seen = True

  def handle_error(self, error):
    if self.result_seen:
      self.after_result = True  # E.g. a move that is illegal after the game's end.
    else:
      self.errors.append(error)

  def result(self):
    return self


def _elo(headers: dict, tag: str) -> int | None:
  try:
    return int(headers.get(tag, ''))
  except ValueError:
    return None


def _filtered(headers: dict, game_filter: GameFilter) -> str | None:
  elos = [_elo(headers, 'WhiteElo'), _elo(headers, 'BlackElo')]
  if game_filter.min_elo is not None and any(e is None or e < game_filter.min_elo for e in elos):
    return 'filtered_elo'
  if game_filter.max_elo is not None and any(e is None or e > game_filter.max_elo for e in elos):
    return 'filtered_elo'
  if game_filter.speeds and speed(headers.get('TimeControl', '-')) not in game_filter.speeds:
    return 'filtered_speed'
  if game_filter.exclude_bots and 'BOT' in (headers.get('WhiteTitle'), headers.get('BlackTitle')):
    return 'filtered_bot'
  return None


_COMMENTS = re.compile(r'\{[^}]*\}|;[^\n]*')
_MOVE_NUMBERS = re.compile(r'\b\d+\.+|[+#]')  # Also check and mate signs.


def stray_movetext(text: str) -> str:
  r"""What the movetext of a game's text holds that python-chess would silently ignore.

  >>> stray_movetext('[Event "x"]\n\n1. e4 { [%clk 0:03:00] } e5 2. zz9 1-0')
  'zz9'
  """
  movetext = '\n'.join(line for line in text.splitlines() if not line.startswith('['))
  movetext = _MOVE_NUMBERS.sub(' ', _COMMENTS.sub(' ', movetext))
  return ' '.join(chess.pgn.MOVETEXT_REGEX.sub(' ', movetext).split())


def game_key(headers: dict, text: str) -> str:
  """A stable id: the Lichess ``Site`` URL where there is one, else a text hash."""
  site = headers.get('Site', '').strip()
  if site.startswith(('http://', 'https://')):
    return site
  return 'sha1:' + hashlib.sha1(text.encode('utf-8')).hexdigest()


def _one_blank_line_after_tags(text: str) -> str:
  r"""The game with blank lines between its tags and its movetext, or inside the movetext, dropped.

  python-chess ends a game at a second blank line after the tags.

  >>> _one_blank_line_after_tags('[Event "a"]\n\n\n1. e4 e5 *\n')
  '[Event "a"]\n\n1. e4 e5 *\n'
  """
  lines = text.splitlines()
  tags = 0
  while tags < len(lines) and lines[tags].lstrip().startswith('['):
    tags += 1
  movetext = [line for line in lines[tags:] if line.strip()]
  return '\n'.join(lines[:tags]) + '\n\n' + '\n'.join(movetext) + '\n'


def illegal_position(board: chess.Board) -> str:
  """Why `board` is no legal standard chess position ('' if it is one).

  >>> illegal_position(chess.Board('4k3/8/8/8/8/8/8/K3K3 w - - 0 1'))
  "'4k3/8/8/8/8/8/8/K3K3 w - - 0 1': too many kings"
  >>> illegal_position(chess.Board('bqnbrkrn/pppppppp/8/8/8/8/PPPPPPPP/BQNBRKRN w GEge - 0 1'))
  "'bqnbrkrn/pppppppp/8/8/8/8/PPPPPPPP/BQNBRKRN w - - 0 1': bad castling rights (Chess960 without a Variant tag?)"
  >>> illegal_position(chess.Board())
  ''
  """
  if board.chess960:  # python-chess reads a FEN tag with Chess960 castling rights as a Chess960 board.
    return f'{board.fen()!r}: Chess960 castling rights without a Variant tag'
  if not (problems := legality.problems(board)):
    return ''
  hint = ' (Chess960 without a Variant tag?)' if chess.STATUS_BAD_CASTLING_RIGHTS in board.status() else ''
  return f'{board.fen()!r}: {problems}{hint}'


class _MovesVisitor(_BoardsVisitor):
  """`_BoardsVisitor` with the start position's FEN alone."""

  every_fen = False


def parse_game(
  raw: RawGame, game_filter: GameFilter = GameFilter(), with_evals: bool = False, *, moves_only: bool = False
) -> Game | Skip:
  """Parses one game's text into its boards (`with_evals`: and its moves and [%eval]s), or says why it is skipped.
  `moves_only`: its start position's FEN and its moves, no other board's FEN (a FEN costs more than the move that
  makes its board: what replays the moves needs none)."""
  if '\ufffd' in raw.text:
    return Skip('bad_encoding', raw.location, 'bytes that are not UTF-8')
  visiting = _MovesVisitor if moves_only else _BoardsVisitor
  try:
    visitor = chess.pgn.read_game(io.StringIO(_one_blank_line_after_tags(raw.text)), Visitor=visiting)
  except Exception as e:  # python-chess raises on some malformed input.
    return Skip('unparsable', raw.location, f'{type(e).__name__}: {e}')
  if visitor is None:
    return Skip('unparsable', raw.location, 'no game found')
  headers = visitor.headers
  if visitor.board is None:
    if visitor.errors:
      return Skip('unparsable', raw.location, str(visitor.errors[0]))
    return Skip('variant', raw.location, headers.get('Variant', ''))
  if not headers and not visitor.fens:
    return Skip('unparsable', raw.location, 'neither tags nor moves')
  if problem := illegal_position(visitor.start or visitor.board):
    return Skip('illegal_position', raw.location, problem)
  if visitor.null_move:
    return Skip('null_move', raw.location, visitor.null_move)
  if visitor.errors:
    error = visitor.errors[0]
    reason = (
      'illegal_move'
      if isinstance(error, chess.IllegalMoveError | chess.AmbiguousMoveError | chess.InvalidMoveError)
      else 'unparsable'
    )
    return Skip(reason, raw.location, str(error))
  if visitor.after_result:
    return Skip('unparsable', raw.location, 'moves after the result token')
  if stray := stray_movetext(raw.text):
    return Skip('unparsable', raw.location, f'not PGN movetext: {stray[:80]!r}')
  if not visitor.result_seen:
    return Skip('truncated', raw.location, 'the movetext has no result token')
  if filtered := _filtered(headers, game_filter):
    return Skip(filtered, raw.location)
  if moves_only:
    start = visitor.fens[:1] or [tokenizer.clamp_counters(visitor.board.fen())]  # A game of no move: its board.
    return Game(game_key(headers, raw.text), raw.location, tuple(start), tuple(visitor.moves))
  fens = visitor.fens + [tokenizer.clamp_counters(visitor.board.fen())]
  if not with_evals:
    return Game(game_key(headers, raw.text), raw.location, tuple(fens))
  evals = tuple(visitor.evals.get(index) for index in range(len(fens)))
  return Game(game_key(headers, raw.text), raw.location, tuple(fens), tuple(visitor.moves), evals)
