"""Optional dependencies: playing, training and evaluating run without Apache Beam (the `annotate` extra).

Each case runs in a fresh interpreter where importing Beam fails, as it does where Beam is not
installed (`sys.modules['apache_beam'] = None` makes every ``import apache_beam...`` raise).
"""

import subprocess
import sys
import textwrap

import pytest

from helpers import ROOT

NO_BEAM = "import sys; sys.modules['apache_beam'] = None\n"


def _run(code: str, cwd) -> subprocess.CompletedProcess:
  return subprocess.run(
    [sys.executable, '-c', NO_BEAM + textwrap.dedent(code)], cwd=cwd, capture_output=True, text=True, timeout=600
  )


def test_play_train_and_evaluate_need_no_beam(tmp_path, compat):
  puzzles = ROOT / 'searchless' / 'samples' / 'sample_puzzles.csv'
  done = _run(
    f"""
      import chess
      from searchless import Player
      from searchless.commands import train
      from searchless.evaluation import evaluate, puzzles
      print('plays', Player.load('pretrained').play(chess.Board()) in chess.Board().legal_moves)
      train.main(['--config', 'tiny', '--workdir', 'run', '--data', {str(compat / 'action_value_sample.bag')!r},
                  'train.num_steps=2', 'data.batch_size=8', 'model.num_layers=1', 'train.log_every=1'])
      metrics = evaluate.run('run', {str(compat / 'action_value_sample.bag')!r}, 'eval', num_boards=5, progress=False)
      print('evaluated', metrics['boards'])
      solved = puzzles.run(puzzles={str(puzzles)!r}, agent='checkpoint:pretrained', out='puzzles', num=3,
                           progress=False)
      print('puzzles', solved['n'])
      print('beam', sorted(m for m in sys.modules if m.startswith('apache_beam') and sys.modules[m] is not None))
      """,
    tmp_path,
  )
  assert done.returncode == 0, done.stderr[-3000:]
  lines = done.stdout.splitlines()
  assert 'plays True' in lines and 'evaluated 5' in lines and 'puzzles 3' in lines and 'beam []' in lines


@pytest.mark.parametrize(
  'package, module, command',
  [
    ('pipelines', 'annotate', 'searchless-annotate'),
    ('pipelines', 'import_labels', 'searchless-import'),
    ('pipelines', 'convert', 'searchless-convert'),
    ('commands', 'puzzles_data', 'searchless-puzzles-data'),
  ],
)
def test_a_beam_command_without_beam_is_one_line_naming_the_extra(tmp_path, package, module, command):
  done = _run(f'from searchless.{package} import {module}\n{module}.main(["--help"])', tmp_path)
  assert done.returncode == 2
  assert done.stderr == (
    f"error: {command} needs apache_beam, which comes with an extra: pip install 'searchless[annotate]'\n"
  )
