"""Long training runs keep their work: Ctrl-C saves the step the run reached within seconds, and a workdir that
cannot be written (a full disk, a read-only folder, a parent that cannot be made) ends the run with one line naming
the path and ``--workdir``, leaving no unfinished checkpoint.

The full disk and the read-only folder are real: a small tmpfs, filled or remounted read-only, in a user and mount
namespace of the command's own (``unshare``); those tests skip where namespaces are not allowed.
"""

import json
import os
import pathlib
import shlex
import signal
import subprocess
import sys
import time

import pytest

from helpers import COMPAT, namespaces

BAG = str(COMPAT / 'action_value_sample.bag')
# Steps of a second or more on a CPU (d=256, 32 boards) and no log line or checkpoint for 1000 of them: Python
# dispatches steps faster than they run (a Ctrl-C used to wait for every step dispatched).
SLOW_STEPS = [
  'model.embedding_dim=256',
  'data.batch_size=32',
  'train.log_every=1000',
  'train.ckpt_every=1000',
  'train.compute_dtype=float32',
]


def _argv(work: str | pathlib.Path, *overrides: str) -> list[str]:
  return [
    sys.executable,
    *('-m', 'searchless.commands.train', '--config', 'tiny', '--workdir', str(work), '--data', BAG, '--no_progress'),
    *overrides,
  ]


def _steps(work: pathlib.Path) -> list[int]:
  return sorted(int(d.name) for d in (work / 'checkpoints').iterdir() if d.name.isdigit())


@pytest.mark.slow
def test_ctrl_c_saves_the_step_reached_within_seconds_and_a_rerun_resumes_from_it(tmp_path):
  # One step and a save first: the step and the checkpoint's probe compile into the session's compilation cache
  # (conftest.py), and the run below steps as soon as it starts.
  warm = subprocess.run(
    _argv(tmp_path / 'warm', *SLOW_STEPS, 'train.num_steps=1'), capture_output=True, text=True, timeout=300
  )
  assert warm.returncode == 0, warm.stderr[-3000:]
  work = tmp_path / 'run'
  proc = subprocess.Popen(
    _argv(work, *SLOW_STEPS, 'train.num_steps=100000'),
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
    start_new_session=True,  # Ctrl-C signals the terminal's foreground group: the command's own here.
    env={**os.environ, 'PYTHONPATH': os.pathsep.join(sys.path)},
  )
  try:
    deadline = time.monotonic() + 300
    while not (work / 'config.json').exists():  # Written just before the first step.
      assert proc.poll() is None, proc.communicate()[1][-3000:]
      assert time.monotonic() < deadline, 'training never started'
      time.sleep(0.2)
    time.sleep(5)  # Some steps in, hundreds before the next log line or checkpoint (step 1000).
    signalled = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    took = time.monotonic() - signalled
  finally:
    if proc.poll() is None:
      os.killpg(proc.pid, signal.SIGKILL)
      proc.wait()
  steps = _steps(work)
  assert proc.returncode == 130, err[-3000:]
  assert len(steps) == 1 and 0 < steps[0] < 1000, steps  # The step reached, not a boundary.
  reached = steps[0]
  assert (out, err) == (
    '',
    f'interrupted; checkpoint saved at step {reached}/100000; rerun the same command to resume\n',
  )
  # One step to finish, a save and an exit: seconds. It was the time to run every step Python had dispatched.
  assert took < 30, f'{took:.1f} s from Ctrl-C to exit'

  rerun = subprocess.run(
    _argv(work, *SLOW_STEPS, f'train.num_steps={reached + 2}', 'train.log_every=1'),
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert rerun.returncode == 0, rerun.stderr[-3000:]
  logged = [json.loads(line)['step'] for line in (work / 'metrics.jsonl').read_text().splitlines()]
  assert logged == [reached, reached + 1, reached + 2]  # Resumed from the saved step: two steps more.
  assert _steps(work) == [reached, reached + 2]


needs_namespaces = pytest.mark.skipif(not namespaces(), reason='no user and mount namespaces (unshare -rm) here')


def _on_a_small_disk(disk: pathlib.Path, prepare: str, argv: list[str]) -> tuple[int, str, str, list[str]]:
  """Runs `argv` with a 1 MiB tmpfs on `disk` that `prepare` (shell) fills or makes read-only; returns its exit
  status, stdout and stderr, and the paths it left on the disk."""
  disk.mkdir()
  script = (
    f'mount -t tmpfs -o size=1m tmpfs {disk} && {prepare} && {shlex.join(argv)}; echo "rc=$?"; '
    f'cd {disk} && find . -mindepth 1'
  )
  result = subprocess.run(['unshare', '-rm', 'sh', '-c', script], capture_output=True, text=True, timeout=300)
  lines = result.stdout.splitlines()
  rc = next((i for i, line in enumerate(lines) if line.startswith('rc=')), None)
  assert rc is not None, result.stderr[-3000:]
  return int(lines[rc][3:]), ''.join(f'{line}\n' for line in lines[:rc]), result.stderr, sorted(lines[rc + 1 :])


# A model (1.6 MB of parameters) that a 1 MiB disk cannot hold; two steps, one checkpoint at the end.
NO_ROOM = ['data.batch_size=8', 'train.num_steps=2', 'train.log_every=1']


@needs_namespaces
@pytest.mark.slow
def test_a_disk_that_fills_at_a_checkpoint_is_one_line_and_leaves_no_unfinished_checkpoint(tmp_path):
  disk = tmp_path / 'disk'
  status, out, err, left = _on_a_small_disk(disk, 'true', _argv(disk / 'run', *NO_ROOM))
  assert (status, out) == (2, '')
  assert err == f'error: cannot write {disk}/run/checkpoints/2 (--workdir): No space left on device\n'
  assert not [path for path in left if 'orbax-checkpoint-tmp' in path]
  assert './run/checkpoints' in left and not [path for path in left if path.startswith('./run/checkpoints/')]


@needs_namespaces
def test_a_full_disk_is_one_line_naming_the_workdir_and_leaves_nothing(tmp_path):
  disk = tmp_path / 'disk'
  fill = f'(head -c 2000000 /dev/zero > {disk}/filler 2>/dev/null; true)'
  status, out, err, left = _on_a_small_disk(disk, fill, _argv(disk / 'run', *NO_ROOM))
  assert (status, out) == (2, '')
  assert err == f'error: cannot write {disk}/run/config.json (--workdir): No space left on device\n'  # Its first file.
  assert left == ['./filler']  # The workdir it made is gone again.


@needs_namespaces
@pytest.mark.parametrize('workdir', ['run', 'missing/run'], ids=['workdir', 'parent'])
def test_a_read_only_workdir_or_parent_is_one_line_naming_it(tmp_path, workdir):
  disk = tmp_path / 'disk'
  status, out, err, left = _on_a_small_disk(
    disk, f'mkdir {disk}/run && mount -o remount,ro {disk}', _argv(disk / workdir, *NO_ROOM)
  )
  assert (status, out, left) == (2, '', ['./run'])
  verb = 'write' if workdir == 'run' else 'create'
  assert err == f'error: cannot {verb} {disk / workdir} (--workdir): Read-only file system\n'


def test_a_workdir_that_cannot_be_made_is_one_line_naming_it():
  work = '/proc/searchless-nowhere/run'
  result = subprocess.run(_argv(work, *NO_ROOM), capture_output=True, text=True, timeout=300)
  assert (result.returncode, result.stdout) == (2, '')
  assert result.stderr == f'error: cannot create {work} (--workdir): No such file or directory\n'
