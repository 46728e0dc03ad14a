"""Normal use is quiet: no DeprecationWarning from our own code, no leaked file, progress as lines in a log."""

import subprocess
import sys
import textwrap

import pytest

from helpers import COMPAT, SAMPLE_GAMES
from searchless import samples

# Runs a command module as its console script does, with our own code's DeprecationWarnings as errors
# (a library's warning raised at our call site counts as ours: warnings point at their caller).
STRICT = textwrap.dedent("""
    import runpy, sys, warnings
    warnings.filterwarnings('error', category=DeprecationWarning, module=r'searchless(\\.|$)')
    module = sys.argv.pop(1)
    runpy.run_module(module, run_name='__main__', alter_sys=True)
""")


def _strict(module, *args, stdin=None, timeout=600):
  return subprocess.run(
    [sys.executable, '-X', 'dev', '-c', STRICT, module, *map(str, args)],
    input=stdin,
    capture_output=True,
    text=True,
    timeout=timeout,
  )


@pytest.mark.engine
@pytest.mark.slow
def test_the_commands_in_normal_use_warn_of_nothing(tmp_path, stockfish):
  bag = COMPAT / 'action_value_sample.bag'
  if not bag.exists():
    pytest.skip(f'{bag} is not here')
  runs = {
    'annotate': _strict(
      'searchless.pipelines.annotate',
      '--input',
      SAMPLE_GAMES,
      '--max_games',
      1,
      '--out',
      tmp_path / 'data',
      '--limit',
      'nodes=50',
      '--engine_path',
      stockfish,
      '--no_progress',
      '--direct_running_mode',
      'in_memory',
      '--direct_num_workers',
      1,
    ),
    'train': _strict(
      'searchless.commands.train',
      '--config',
      'tiny',
      '--workdir',
      tmp_path / 'run',
      '--data',
      bag,
      'train.num_steps=2',
      'data.batch_size=8',
      'model.num_layers=1',
      'train.log_every=1',
    ),
  }
  runs['evaluate'] = _strict(
    'searchless.commands.evaluate',
    '--checkpoint',
    tmp_path / 'run',
    '--data',
    bag,
    '--num_boards',
    5,
    '--out',
    tmp_path / 'eval',
  )
  runs['export'] = _strict('searchless.commands.export', '--checkpoint', tmp_path / 'run', '--out', tmp_path / 'export')
  runs['puzzles'] = _strict(
    'searchless.commands.puzzles',
    '--puzzles',
    samples.PUZZLES,
    '--num',
    5,
    '--agent',
    'checkpoint:pretrained',
    '--out',
    tmp_path / 'puzzles',
  )
  runs['uci'] = _strict(
    'searchless.commands.uci',
    '--checkpoint',
    'pretrained',
    '--compilation_cache',
    '',
    stdin='uci\nisready\nposition startpos moves e2e4\ngo movetime 50\nquit\n',
  )
  for name, result in runs.items():
    assert result.returncode == 0, (name, result.stderr[-3000:])
    # -X dev shows every warning once; none may be ours or a leak.
    assert 'DeprecationWarning' not in result.stderr and 'ResourceWarning' not in result.stderr, (name, result.stderr)
  assert 'bestmove ' in runs['uci'].stdout
  # Progress written to a pipe comes as whole lines, not a redraw per update.
  assert '\r' not in runs['train'].stderr + runs['evaluate'].stderr + runs['puzzles'].stderr
