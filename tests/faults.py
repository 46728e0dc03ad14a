"""Generated faults that the fuzz tests and `benchmarks/reliability.py` both feed to the real programs."""

import random


def mutate_game(text: str, rng: random.Random) -> str:
  """One PGN game text with one random fault of the kinds real dumps have (cuts, garbage, lost lines, BOMs, ...)."""
  lines = text.splitlines()
  kind = rng.randrange(10)
  if kind == 0:  # Cut anywhere.
    return text[: rng.randrange(len(text))]
  if kind == 1:  # Garbage bytes (not UTF-8 included) in a line.
    i = rng.randrange(len(lines))
    lines[i] = lines[i][:5] + ''.join(chr(rng.randrange(1, 0x2FF)) for _ in range(rng.randrange(1, 12))) + lines[i][5:]
  elif kind == 2:  # A lost line.
    del lines[rng.randrange(len(lines))]
  elif kind == 3:  # A byte order mark at the start of a line.
    i = rng.randrange(len(lines))
    lines[i] = '\ufeff' + lines[i]
  elif kind == 4:  # Moves after the result.
    lines[-1] += ' e4 e5 Nf3'
  elif kind == 5:  # Extra blank lines anywhere.
    lines.insert(rng.randrange(len(lines) + 1), '')
  elif kind == 6:  # A broken tag.
    i = rng.randrange(len(lines))
    lines[i] = '[' + lines[i]
  elif kind == 7:  # An illegal move.
    lines[-1] = lines[-1].replace('e4', 'e5', 1).replace('Nf3', 'Nf6', 1)
  elif kind == 8:  # A duplicated movetext line.
    lines.append(lines[-1])
  else:  # A variant or an odd FEN tag.
    lines.insert(0, rng.choice(['[Variant "Atomic"]', '[FEN "8/8/8/8/8/8/8/8 w - - 0 1"]', '[SetUp "1"]']))
  return '\n'.join(lines) + '\n'


UCI_WORDS = (
  'uci',
  'isready',
  'ucinewgame',
  'position',
  'startpos',
  'fen',
  'moves',
  'go',
  'stop',
  'ponderhit',
  'setoption',
  'name',
  'value',
  'Policy',
  'Temperature',
  'TemperatureFullMoves',
  'Decisive',
  'Threads',
  'depth',
  'nodes',
  'movetime',
  'wtime',
  'btime',
  'winc',
  'binc',
  'movestogo',
  'infinite',
  'searchmoves',
  'ponder',
  'mate',
  'debug',
  'on',
  'off',
  'register',
  'later',
  'e2e4',
  'e7e5',
  'g1f3',
  'a7a8q',
  'e1g1',
  '0000',
  '8/8/8/8/8/8/8/K1k5',
  'rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR',
  'w',
  'b',
  'KQkq',
  '-',
  '0',
  '1',
  '-5',
  '1e9',
  'nan',
  'inf',
  '99999999999999999999',
  'true',
  'action_value',
  'state_value',
)


def hostile_uci_line(rng: random.Random) -> str:
  """A line of UCI words and random characters in random order, never `quit`."""
  while True:
    tokens = [
      rng.choice(UCI_WORDS)
      if rng.random() < 0.85
      else ''.join(chr(rng.randrange(1, 0x3000)) for _ in range(rng.randrange(1, 8)))
      for _ in range(rng.randrange(13))
    ]
    line = ' '.join(tokens)
    if 'quit' not in line.split():
      return line
