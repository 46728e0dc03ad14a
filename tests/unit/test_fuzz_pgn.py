"""Fuzz: 1,200 malformed games through the reader and parser; every line and every game accounted for."""

import random

import pytest

from searchless.data import pgn


def _mutate(text: str, rng: random.Random) -> str:
  """One random fault of the kinds real dumps have (cuts, garbage, lost lines, BOMs, stray results, ...)."""
  lines = text.splitlines()
  kind = rng.randrange(10)
  if kind == 0:  # Cut anywhere.
    return text[:rng.randrange(len(text))]
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


@pytest.mark.slow
def test_malformed_games_are_each_kept_or_skipped_with_a_reason_and_no_line_is_lost(tmp_path, lichess_999):
  rng = random.Random(13)
  games = [raw.text for raw in pgn.iter_raw_games(str(lichess_999))][:400]
  texts = [_mutate(games[i % len(games)], rng) for i in range(1200)]
  path = tmp_path / 'fuzz.pgn'
  path.write_bytes(b''.join(t.encode('utf-8') + b'\n' for t in texts))
  raws = list(pgn.iter_raw_games(str(path)))
  # Every non-blank line of the input is in exactly one game text (BOMs and line-end CRs dropped).
  lines = (line.rstrip('\r').replace('\ufeff', '') for t in texts for line in t.split('\n'))
  assert [line for raw in raws for line in raw.text.split('\n') if line.strip()] == [l for l in lines if l.strip()]
  parsed = [pgn.parse_game(raw) for raw in raws]  # Never raises.
  kept = [g for g in parsed if isinstance(g, pgn.Game)]
  skipped = [s for s in parsed if isinstance(s, pgn.Skip)]
  assert len(kept) + len(skipped) == len(raws) >= 1000
  assert {s.reason for s in skipped} <= set(pgn.SKIP_REASONS)
  assert len(kept) > 300 and len(skipped) > 300  # Both outcomes are exercised.
  assert all(len(g.fens) >= 1 for g in kept)
