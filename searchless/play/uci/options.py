"""The UCI engine's options: what ``uci`` declares, and the values that need nothing reloaded.

`Settings` holds the options a ``setoption`` only records (MultiPV, UCI_ShowWDL,
UCI_Chess960, Hash, Move Overhead, SyzygyPath, Ponder, SearchNodes,
SearchDepth); `Settings.set` checks and stores one of them. `play_options`
checks one of the player's options (Temperature, TemperatureFullMoves, Decisive,
RepetitionDraws). The engine applies the rest (Policy, Threads, Search), which
act on the loaded model, with `spin` and `check` to read their values.
`declarations` is the ``option name ...`` lines of the ``uci`` answer.

>>> settings = Settings()
>>> settings.set('multipv', '3'), settings.multipv
(True, 3)
>>> settings.set('multipv', '0')
Traceback (most recent call last):
...
searchless.play.uci.protocol.UciError: MultiPV must be an integer in [1, 500], got '0'
>>> settings.set('policy', 'state_value')  # Not one of these: the engine applies it.
False
"""

import dataclasses
import math

from searchless.play import player as player_lib
from searchless.play import policy as policy_lib
from searchless.play.search import alphabeta
from searchless.play.search import mcts
from searchless.play.uci import protocol
from searchless.play.uci.protocol import UciError


def parse_setoption(args: list[str]) -> tuple[str, str, str]:
  """(name, key, value) of ``setoption name <id> [value <x>]``: the key is the name in lower case, spaces as _.

  >>> parse_setoption('name Move Overhead value 30'.split())
  ('Move Overhead', 'move_overhead', '30')
  """
  if not args or args[0] != 'name' or len(args) < 2 or args[1] == 'value':
    raise UciError('setoption expects: setoption name <id> [value <x>]')
  rest = args[1:]
  split = rest.index('value') if 'value' in rest else len(rest)
  name, value = ' '.join(rest[:split]), ' '.join(rest[split + 1 :])
  return name, name.lower().replace(' ', '_'), value


def spin(name: str, value: str, low: int, high: int) -> int:
  """A spin option's value: an integer in [low, high], else a UciError naming the option."""
  try:
    number = int(value)
    if not low <= number <= high:
      raise ValueError
  except ValueError:
    raise UciError(f'{name} must be an integer in [{low}, {high}], got {value!r}') from None
  return number


def check(name: str, value: str) -> bool:
  """A check option's value: true or false, else a UciError naming the option."""
  if value not in ('true', 'false'):
    raise UciError(f'{name} must be true or false, got {value!r}')
  return value == 'true'


@dataclasses.dataclass
class Settings:
  """The options ``setoption`` only records; the engine reads them at each ``go``."""

  multipv: int = 1  # Info lines per go.
  show_wdl: bool = False  # Win/draw/loss per mille in the info lines.
  chess960: bool = False  # Positions are Chess960 (castling as king-takes-rook); acts on the next position.
  hash_mb: int = 16  # Accepted and recorded for GUIs and lichess-bot (no hash table here).
  move_overhead_ms: int = 10  # Kept off a search's time.
  syzygy_path: str = ''  # Accepted and recorded (no tablebases here).
  search_nodes: int = mcts.MctsConfig.simulations  # MCTS simulations of a go without nodes or time.
  search_depth: int = alphabeta.AlphaBetaConfig.depth  # Alpha-beta depth of a go without depth or time.

  def set(self, key: str, value: str) -> bool:
    """Checks and stores the option `key` (its name, lower case, spaces as _); False if it is not one of these."""
    if key == 'multipv':
      self.multipv = spin('MultiPV', value, 1, protocol.MAX_MULTIPV)
    elif key == 'uci_showwdl':
      self.show_wdl = check('UCI_ShowWDL', value)
    elif key == 'uci_chess960':
      self.chess960 = check('UCI_Chess960', value)
    elif key == 'hash':
      self.hash_mb = spin('Hash', value, 1, protocol.MAX_HASH_MB)
    elif key == 'move_overhead':
      self.move_overhead_ms = spin('Move Overhead', value, 0, protocol.MAX_MOVE_OVERHEAD_MS)
    elif key == 'syzygypath':
      self.syzygy_path = '' if value == '<empty>' else value
    elif key == 'ponder':
      check('Ponder', value)  # Checked; pondering needs no setting (go ponder works whatever its value).
    elif key == 'searchnodes':
      self.search_nodes = spin('SearchNodes', value, 1, protocol.MAX_SEARCH_NODES)
    elif key == 'searchdepth':
      self.search_depth = spin('SearchDepth', value, 1, alphabeta.MAX_DEPTH)
    else:
      return False
    return True


def play_options(key: str, value: str, current: player_lib.PlayOptions) -> player_lib.PlayOptions | None:
  """`current` with the play option `key` (Temperature, TemperatureFullMoves, Decisive, RepetitionDraws; lower
  case) set to `value`, checked; None if `key` is not a play option.

  >>> play_options('temperature', '0.5', player_lib.PlayOptions()).temperature
  0.5
  """
  if key == 'temperature':
    try:
      temperature = float(value)
      if not math.isfinite(temperature) or temperature < 0:
        raise ValueError
    except ValueError:
      raise UciError(f'Temperature must be a number >= 0, got {value!r}') from None
    return dataclasses.replace(current, temperature=temperature)
  if key == 'temperaturefullmoves':
    full_moves = spin('TemperatureFullMoves', value, 0, protocol.MAX_FULL_MOVES)
    return dataclasses.replace(current, temperature_full_moves=full_moves)
  if key == 'decisive':
    if value not in player_lib.DECISIVE_RULES:
      raise UciError(f'Decisive must be one of {", ".join(player_lib.DECISIVE_RULES)}, got {value!r}')
    return dataclasses.replace(current, decisive=value)
  if key == 'repetitiondraws':
    return dataclasses.replace(current, repetition_draws=check('RepetitionDraws', value))
  return None


def declarations(
  *,
  policy: str,
  options: player_lib.PlayOptions,
  threads: int,
  search: str,
  searches: tuple[str, ...],
  settings: Settings,
) -> list[str]:
  """The ``option name ...`` lines of the ``uci`` answer, with the current values as defaults."""
  full_moves = protocol.MAX_FULL_MOVES if options.temperature_full_moves is None else options.temperature_full_moves
  return [
    f'option name Policy type combo default {policy} ' + ' '.join(f'var {p}' for p in policy_lib.POLICIES),
    f'option name Temperature type string default {protocol.format_float(options.temperature or 0.0)}',
    f'option name TemperatureFullMoves type spin default {full_moves} min 0 max {protocol.MAX_FULL_MOVES}',
    f'option name Decisive type combo default {options.decisive} '
    + ' '.join(f'var {d}' for d in player_lib.DECISIVE_RULES),
    f'option name RepetitionDraws type check default {str(options.repetition_draws).lower()}',
    f'option name Threads type spin default {threads} min 1 max {protocol.MAX_THREADS}',
    'option name Ponder type check default false',
    f'option name MultiPV type spin default {settings.multipv} min 1 max {protocol.MAX_MULTIPV}',
    f'option name UCI_ShowWDL type check default {str(settings.show_wdl).lower()}',
    f'option name UCI_Chess960 type check default {str(settings.chess960).lower()}',
    f'option name Hash type spin default {settings.hash_mb} min 1 max {protocol.MAX_HASH_MB}',
    f'option name Move Overhead type spin default {settings.move_overhead_ms} min 0 '
    f'max {protocol.MAX_MOVE_OVERHEAD_MS}',
    f'option name SyzygyPath type string default {settings.syzygy_path or "<empty>"}',
    f'option name Search type combo default {search} ' + ' '.join(f'var {k}' for k in searches),
    f'option name SearchNodes type spin default {settings.search_nodes} min 1 max {protocol.MAX_SEARCH_NODES}',
    f'option name SearchDepth type spin default {settings.search_depth} min 1 max {alphabeta.MAX_DEPTH}',
  ]


def threads(value: str, max_threads: int, backend_started: bool) -> tuple[int, list[str]]:
  """The Threads option's value, at most `max_threads` (the CPUs this process may use), and what to tell the GUI:
  lichess-bot and GUIs send their own default (4 for lichess-bot); after the first load it no longer acts.

  >>> threads('4', 2, False)
  (2, ['Threads 4: this process may use 2 CPUs; using 2'])
  """
  count = spin('Threads', value, 1, protocol.MAX_THREADS)
  notes = []
  if count > max_threads:
    notes.append(f'Threads {count}: this process may use {max_threads} CPUs; using {max_threads}')
    count = max_threads
  if backend_started:
    notes.append(f'Threads {count} recorded, but it only acts before the model is first loaded (no-op now)')
  return count, notes
