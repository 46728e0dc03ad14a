"""Ctrl-C: every command ends with one line and exit status 130, and leaves nothing half-written.

Ctrl-C at a terminal sends SIGINT to the whole foreground process group (the command, Beam's workers, the
engines): each test starts the command in a session of its own and signals that group, as a terminal would.
"""

import json
import pathlib
import sys
import time

import pytest

from searchless import samples

from helpers import signal_when

SAMPLE_GAMES = pathlib.Path(samples.__file__).parent / 'sample_games.pgn'


@pytest.mark.parametrize('command', ['annotate', 'import_labels'])
def test_ctrl_c_in_a_beam_job_is_one_line_and_leaves_no_output_folder(tmp_path, stockfish, lichess_999, command):
  out = tmp_path / 'out'
  started = []

  def ready():  # The output folder is claimed just before the pipeline runs; give Beam's workers a moment.
    if out.exists() and not started:
      started.append(time.monotonic())
    return bool(started) and time.monotonic() - started[0] > 3

  args = {
    'annotate': ['--input', str(SAMPLE_GAMES), '--limit', 'nodes=20000', '--engine_path', stockfish, '--no_progress'],
    'import_labels': [str(lichess_999)] * 20,
  }[command]  # The same games 20 times: a job of some seconds.
  status, stdout, stderr = signal_when(
    [sys.executable, '-m', f'searchless.commands.{command}', *args, '--out', str(out)], ready
  )
  assert (status, stdout, stderr) == (130, '', f'interrupted; nothing written to {out}\n')
  assert not out.exists()


def test_ctrl_c_in_training_saves_says_how_to_resume_and_exits_130(tmp_path, compat):
  work = tmp_path / 'run'
  status, stdout, stderr = signal_when(
    [
      sys.executable,
      '-m',
      'searchless.commands.train',
      '--config',
      'tiny',
      '--workdir',
      str(work),
      '--data',
      str(compat / 'action_value_sample.bag'),
      'model.embedding_dim=32',
      'model.num_layers=1',
      'model.num_heads=2',
      'data.batch_size=16',
      'train.log_every=1',
      'train.num_steps=100000',
      'train.ckpt_every=100000',
      'train.compute_dtype=float32',
    ],
    lambda: (work / 'metrics.jsonl').exists(),
  )
  steps = [int(d.name) for d in (work / 'checkpoints').iterdir() if d.name.isdigit()]
  assert len(steps) == 1  # Saved where it stopped.
  assert status == 130, stderr[-3000:]
  assert 'Traceback' not in stderr
  assert stderr.splitlines()[-1] == (
    f'interrupted; checkpoint saved at step {steps[0]}/100000; rerun the same command to resume'
  )
  assert json.loads((work / 'summary.json').read_text())['step'] == steps[0]
  assert stdout == ''
