"""Fuzz: 1,200 malformed games through the reader and parser; every line and every game accounted for."""

import random

import pytest

from searchless.data import pgn

from faults import mutate_game


@pytest.mark.slow
def test_malformed_games_are_each_kept_or_skipped_with_a_reason_and_no_line_is_lost(tmp_path, lichess_999):
  rng = random.Random(13)
  games = [raw.text for raw in pgn.iter_raw_games(str(lichess_999))][:400]
  texts = [mutate_game(games[i % len(games)], rng) for i in range(1200)]
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
