"""The strength protocol: what it measures and keeps: the tests that build, train or play models (slow).

The fast ones, and the helpers both use, are in tests/unit/test_strength.py.
"""

import json

import pytest

from searchless.commands import strength as command
from searchless.evaluation import strength


@pytest.mark.slow
def test_measure_keeps_each_part_and_measures_again_only_what_changed(model_checkpoint, tmp_path, capsys):
  """Puzzles and an EPD suite on a small model: strength.json and the card's lines; a rerun with the same settings
  measures nothing, another puzzle file measures the puzzles again and keeps the suite."""
  from helpers import ROOT

  lines = (ROOT / 'searchless' / 'samples' / 'sample_puzzles.csv').read_text().splitlines(True)
  few, other = tmp_path / 'few.csv', tmp_path / 'other.csv'
  few.write_text(''.join(lines[:6]))
  other.write_text(''.join(lines[:1] + lines[6:9]))
  suite = tmp_path / 'suite.epd'
  suite.write_text('6k1/5ppp/8/8/8/8/8/R5K1 w - - bm Ra8#; id "one";\n')
  out = tmp_path / 'eval'
  argv = ['measure', '--checkpoint', str(model_checkpoint), '--out', str(out), '--sts', str(suite), '--no_progress']
  command.main([*argv, '--puzzles', str(few)])
  done = json.loads((out / 'strength.json').read_text())
  assert (done['puzzles']['n'], done['sts']['n']) == (5, 1) and 'match' not in done and 'heldout' not in done
  low, high = done['puzzles']['wilson95']
  assert low <= done['puzzles']['solved'] / 5 <= high
  assert sum(b['n'] for b in done['puzzles']['bands']) == 5
  printed = capsys.readouterr().out
  assert printed.strip() == (out / 'strength.md').read_text().strip() == strength.markdown(done)
  assert printed.startswith(
    f'- Puzzles (`few.csv`, every move of the solution): **{20 * done["puzzles"]["solved"]:.1f}%**'
  )
  assert '- suite (1 positions): ' in printed
  assert (out / 'puzzles' / 'results.csv').exists()  # The paired comparison's input.
  stamps = {part: done[part]['seconds'] for part in ('puzzles', 'sts')}
  command.main([*argv, '--puzzles', str(few)])
  again = json.loads((out / 'strength.json').read_text())
  assert again == done  # Nothing measured again.
  command.main([*argv, '--puzzles', str(other)])
  changed = json.loads((out / 'strength.json').read_text())
  assert changed['puzzles']['n'] == 3 and changed['sts'] == done['sts'] and stamps['sts'] == changed['sts']['seconds']
