"""Output folders (`searchless.plumbing.outputs`): one writer each, a filesystem error as one line naming the file and
the flag, and settings (the Stockfish binary) honoured or refused, for every command that writes a folder.

The full disk and the read-only folder are real: a small tmpfs, filled or remounted read-only, in a user and mount
namespace of the command's own (``unshare``); those tests skip where namespaces are not allowed.
"""

import os
import pathlib
import shlex
import signal
import socket
import subprocess
import sys

import pytest

from helpers import namespaces

import searchless.samples
from searchless.plumbing import folder_lock

pytestmark = pytest.mark.engine  # Stockfish plays or is started in each.
COMMANDS = ('puzzles', 'tournament', 'strength', 'convert', 'selfplay')
HOLDER = {'strength': 'searchless-strength measure'}  # The others: searchless-<command>.
FLAG = {'convert': 'output_dir'}  # The others: --out.


@pytest.fixture(scope='module')
def inputs(tmp_path_factory, compat, stockfish) -> dict[str, str]:
  folder = tmp_path_factory.mktemp('inputs')
  rows = (pathlib.Path(searchless.samples.__file__).parent / 'sample_puzzles.csv').read_text().splitlines()
  (folder / 'puzzles.csv').write_text('\n'.join(rows[:3]) + '\n')
  (folder / 'openings.pgn').write_text('[Event "o"]\n[Result "*"]\n\n1. e4 e5 *\n\n')
  return {
    'puzzles': str(folder / 'puzzles.csv'),
    'openings': str(folder / 'openings.pgn'),
    'bag': str(compat / 'action_value_sample.bag'),
  }


def _argv(command: str, out: str, inputs: dict[str, str]) -> list[str]:
  """The command writing into the folder `out` (self-play: its file games.pgn)."""
  args = {
    'puzzles': ['--puzzles', inputs['puzzles'], '--agent', 'stockfish:nodes=1', '--out', out, '--no_progress'],
    'tournament': [
      *('--agent', 'stockfish:nodes=1', '--agent', 'stockfish:nodes=2', '--openings', inputs['openings']),
      *('--max_plies', '4', '--adjudicate_cp', '0', '--out', out, '--no_progress'),
    ],
    'strength': [
      'measure',
      '--checkpoint',
      'pretrained',
      '--puzzles',
      inputs['puzzles'],
      '--out',
      out,
      '--no_progress',
    ],
    'convert': [inputs['bag'], out, '--to', 'board'],
    'selfplay': ['--out', os.path.join(out, 'games.pgn'), '--num_games', '1', '--nodes', '100', '--max_plies', '10'],
  }[command]
  package = 'pipelines' if command in ('convert', 'selfplay') else 'commands'
  return [sys.executable, '-m', f'searchless.{package}.{command}', *args]


def _run(argv: list[str], **env: str) -> subprocess.CompletedProcess:
  return subprocess.run(argv, capture_output=True, text=True, timeout=300, env={**os.environ, **env})


def _lock(command: str, out: pathlib.Path) -> folder_lock.FolderLock:
  return folder_lock.FolderLock(out, 'another command', '--out', file='games.pgn' if command == 'selfplay' else None)


@pytest.mark.parametrize('command', COMMANDS)
def test_a_second_writer_is_refused_naming_the_first(tmp_path, inputs, command):
  out = tmp_path / 'out'
  with _lock(command, out):
    result = _run(_argv(command, str(out), inputs))
    held = out / 'games.pgn' if command == 'selfplay' else out
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
      f'error: {held} is in use by another {HOLDER.get(command, "searchless-" + command)} (pid {os.getpid()} on '
      f'{socket.gethostname()}): wait for it to end, or use another {FLAG.get(command, "--out")}\n'
    )
    assert sorted(p.name for p in out.iterdir()) == ['.games.pgn.lock' if command == 'selfplay' else '.lock']
  assert list(out.iterdir()) == []  # The lock goes with its holder.


@pytest.mark.parametrize('command', ['puzzles', 'tournament'])
def test_a_killed_writers_lock_is_taken_over(tmp_path, inputs, command):
  out = tmp_path / 'out'
  hold = f'from searchless.plumbing import folder_lock; folder_lock.FolderLock({str(out)!r}, "x", "--out").__enter__()'
  holder = subprocess.Popen(
    [sys.executable, '-c', f'{hold}; print("held", flush=True); import time; time.sleep(60)'],
    stdout=subprocess.PIPE,
    text=True,
  )
  try:
    assert holder.stdout is not None and holder.stdout.readline() == 'held\n'
    assert _run(_argv(command, str(out), inputs)).returncode == 2  # Refused while it lives.
  finally:
    holder.send_signal(signal.SIGKILL)
    holder.wait()
  assert (out / '.lock').exists()  # Killed: its lock file stays, unlocked.
  result = _run(_argv(command, str(out), inputs))
  assert result.returncode == 0, result.stderr
  assert sorted(os.listdir(out)) == (
    ['games.pgn', 'results.json']
    if command == 'tournament'
    else ['accuracy_by_rating.png', 'results.csv', 'summary.json']
  )


needs_namespaces = pytest.mark.skipif(not namespaces(), reason='no user and mount namespaces (unshare -rm) here')


def _on_a_small_disk(disk: pathlib.Path, prepare: str, argv: list[str]) -> tuple[str, list[str]]:
  """Runs `argv` with a 64 KiB tmpfs on `disk` that `prepare` (shell) fills or makes read-only; returns its stderr
  and what it left on the disk."""
  disk.mkdir()
  script = f'mount -t tmpfs -o size=64k tmpfs {disk} && {prepare} && {shlex.join(argv)}; echo "rc=$?"; ls -A {disk}'
  result = subprocess.run(['unshare', '-rm', 'sh', '-c', script], capture_output=True, text=True, timeout=300)
  lines = result.stdout.splitlines()
  rc = next(line for line in lines if line.startswith('rc='))
  assert rc == 'rc=2', result.stderr
  return result.stderr, lines[lines.index(rc) + 1 :]


FULL_DISK = {  # The first file each command writes.
  'puzzles': 'out/journal.jsonl',
  'tournament': 'out/games.pgn',
  'strength': 'out/puzzles/journal.jsonl',
  'selfplay': 'out/games.pgn',
}


@needs_namespaces
@pytest.mark.parametrize('command', list(FULL_DISK))
def test_a_full_disk_is_one_line_naming_the_file_and_the_flag_and_leaves_nothing(tmp_path, inputs, command):
  disk = tmp_path / 'disk'
  fill = f'(head -c 65536 /dev/zero > {disk}/filler 2>/dev/null; true)'
  stderr, left = _on_a_small_disk(disk, fill, _argv(command, str(disk / 'out'), inputs))
  assert stderr.splitlines()[-1] == f'error: cannot write {disk / FULL_DISK[command]} (--out): No space left on device'
  assert 'Traceback' not in stderr
  assert left == ['filler']  # No empty journal, games file or folder.


@needs_namespaces
@pytest.mark.parametrize('command', COMMANDS)
def test_a_read_only_folder_is_one_line_naming_it_and_the_flag(tmp_path, inputs, command):
  disk = tmp_path / 'disk'
  stderr, left = _on_a_small_disk(
    disk, f'mkdir {disk}/out && mount -o remount,ro {disk}', _argv(command, str(disk / 'out'), inputs)
  )
  held = disk / 'out' / 'games.pgn' if command == 'selfplay' else disk / 'out'
  assert stderr == f'error: cannot write {held} ({FLAG.get(command, "--out")}): Read-only file system\n'
  assert left == ['out']


@pytest.mark.parametrize('command', COMMANDS)
def test_a_folder_that_cannot_be_made_is_one_line_naming_it_and_the_flag(inputs, command):
  out = '/proc/searchless-nowhere/out'
  result = _run(_argv(command, out, inputs))
  assert result.returncode == 2
  assert result.stderr == f'error: cannot create {out} ({FLAG.get(command, "--out")}): No such file or directory\n'


def test_a_run_that_fails_before_its_first_result_leaves_no_journal(tmp_path, inputs):
  out = tmp_path / 'out'
  argv = _argv('puzzles', str(out), inputs)
  argv[argv.index('stockfish:nodes=1')] = 'uci:/bin/false,nodes=1'  # Exits before the handshake.
  result = _run(argv)
  assert result.returncode == 2 and result.stderr.startswith("error: cannot start UCI engine '/bin/false'")
  assert not out.exists()  # Was left holding journal.jsonl with the run's key and no result.


@pytest.mark.parametrize('command', ['tournament', 'strength', 'selfplay'])
def test_a_stockfish_setting_is_honoured_or_refused(tmp_path, inputs, command):
  argv = _argv(command, str(tmp_path / 'out'), inputs)
  if command == 'tournament':
    argv[argv.index('--openings') : argv.index('--openings') + 2] = ['--make_openings', '1']
  if command == 'strength':
    argv += ['--ladder', '1350']
  result = _run(argv, SEARCHLESS_STOCKFISH='/nonexistent')  # Was: the Stockfish on PATH, silently.
  assert result.returncode == 2
  assert result.stderr == (
    'error: SEARCHLESS_STOCKFISH=/nonexistent: no such executable (point it at a Stockfish binary, or unset it)\n'
  )
  result = _run([*argv, '--engine_path', '/nonexistent'])
  assert result.returncode == 2
  assert result.stderr.startswith(
    "error: --engine_path '/nonexistent' is not an executable"
    if command != 'selfplay'
    else "error: engine binary '/nonexistent' not found or not executable"
  ), result.stderr
  assert not (tmp_path / 'out').exists()
