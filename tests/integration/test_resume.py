"""Long jobs keep their work: an annotation stopped by Ctrl-C or killed (a reboot, the OOM killer) resumes with the same
command and writes, byte for byte, the dataset an uninterrupted run writes (on a Dask cluster: test_annotate_dask.py).
The import keeps its parses the same way."""

import json
import os
import pathlib
import shlex
import signal
import subprocess
import sys

import pytest

from searchless import samples
from searchless.data import resume
from searchless.pipelines import annotate as annotate_driver
from searchless.pipelines import import_labels

from helpers import namespaces, signal_when

GAMES = pathlib.Path(samples.__file__).parent / 'sample_games.pgn'
EVAL_SAMPLE = pathlib.Path(__file__).parents[1] / 'fixtures' / 'lichess_db_eval_sample.jsonl'


def _args(stockfish: str, out: pathlib.Path) -> list[str]:
  return [
    '--input', str(GAMES), '--max_games', '3', '--limit', 'nodes=300', '--test_fraction', '0.3',
    '--chunk_boards', '10', '--engine_path', stockfish, '--no_progress', '--out', str(out),
  ]  # fmt: skip


def _dataset(out: pathlib.Path) -> dict[str, bytes]:
  """Every file of a finished dataset but its manifest, which names its folder and times."""
  return {
    str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob('*')) if p.is_file() and p.name != 'manifest.json'
  }


def _counts(out: pathlib.Path) -> tuple:
  m = json.loads((out / 'manifest.json').read_text())
  return m['games'], m['splits'], m['split'], m['engine_restarts']


def _kept(out: pathlib.Path, pieces: int):
  """Ready once `pieces` pieces of work are kept in `out`."""
  return lambda: len(resume.pieces(str(out))) >= pieces


@pytest.fixture(scope='module')
def reference(stockfish, tmp_path_factory) -> pathlib.Path:
  """The dataset of an uninterrupted run."""
  out = tmp_path_factory.mktemp('reference') / 'out'
  annotate_driver.run([*_args(stockfish, out), '--direct_running_mode', 'in_memory'])
  assert not (out / resume.FOLDER).exists()  # Gone once the dataset is committed.
  return out


@pytest.mark.engine
@pytest.mark.slow
def test_ctrl_c_then_a_kill_then_a_rerun_writes_the_uninterrupted_dataset(stockfish, reference, tmp_path):
  out = tmp_path / 'out'
  cmd = [sys.executable, '-m', 'searchless.commands.annotate', *_args(stockfish, out)]
  status, _, err = signal_when(cmd, _kept(out, 2))
  kept = resume.items_in(resume.pieces(str(out)))
  assert status == 130 and err.count('\n') == 1, err
  assert err.startswith(
    f'interrupted; kept {kept} annotated boards in {out / resume.FOLDER}; the same command resumes: '
  )
  assert not (out / 'manifest.json').exists() and not (out / 'train').exists()  # Nothing half-written.

  status, _, _ = signal_when(cmd, _kept(out, len(resume.pieces(str(out))) + 2), signal.SIGKILL)  # A reboot, say.
  assert status == -signal.SIGKILL
  kept = resume.items_in(resume.pieces(str(out)))

  done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
  assert done.returncode == 0, done.stderr
  assert f'resuming: {kept} boards annotated by an interrupted run are kept' in done.stderr
  assert _dataset(out) == _dataset(reference) and _counts(out) == _counts(reference)
  assert json.loads((out / 'manifest.json').read_text())['timings']['boards_kept_from_an_interrupted_run'] == kept
  assert not (out / resume.FOLDER).exists()


@pytest.mark.slow
def test_an_interrupted_import_keeps_its_parses_and_a_rerun_writes_the_same_dataset(lichess_999, tmp_path):
  copies = []
  for i in range(2):  # A job of some seconds: two dumps (the same games, in files of their own).
    copies.append(tmp_path / f'games-{i}.pgn')
    copies[-1].write_bytes(lichess_999.read_bytes())
  common = [*map(str, copies), str(EVAL_SAMPLE), '--test_fraction', '0.5', '--chunk_games', '100']
  import_labels.run([*common, '--out', str(tmp_path / 'reference'), '--direct_running_mode', 'in_memory'])
  out = tmp_path / 'out'
  cmd = [sys.executable, '-m', 'searchless.commands.import_labels', *common, '--out', str(out)]
  status, _, err = signal_when(cmd, _kept(out, 2))
  kept = resume.items_in(resume.pieces(str(out)))
  assert status == 130 and err.startswith(f'interrupted; kept {kept} parsed games and lines in {out / resume.FOLDER}')
  done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
  assert done.returncode == 0, done.stderr
  assert f'resuming: {kept} games and lines parsed by an interrupted run are kept' in done.stderr
  assert _dataset(out) == _dataset(tmp_path / 'reference')
  read = lambda folder: {
    k: v for k, v in json.loads((folder / 'manifest.json').read_text()).items() if k in ('games', 'lines', 'splits')
  }
  assert read(out) == read(tmp_path / 'reference')


@pytest.mark.engine
@pytest.mark.slow
@pytest.mark.skipif(not namespaces(), reason='no user and mount namespaces (unshare -rm) here')
def test_a_disk_that_fills_mid_job_is_one_line_and_the_job_resumes_once_there_is_room(stockfish, reference, tmp_path):
  """A real full disk (a tmpfs of the command's own mount namespace): the job stops with one line naming --out and
  what it kept; once the disk is larger, the same command finishes the uninterrupted dataset."""
  disk = tmp_path / 'disk'
  disk.mkdir()
  command = shlex.join([sys.executable, '-m', 'searchless.commands.annotate', *_args(stockfish, disk / 'out')])
  script = (
    f'mount -t tmpfs -o size=96k tmpfs {disk} && head -c 70000 /dev/zero > {disk}/filler && '
    f'{command} 2> {tmp_path}/first.err; echo "first=$?"; mount -o remount,size=64m {disk} && '
    f'{command} 2> {tmp_path}/second.err; echo "second=$?"; cp -r {disk}/out {tmp_path}/done'
  )
  result = subprocess.run(['unshare', '-rm', 'sh', '-c', script], capture_output=True, text=True, timeout=900)
  assert 'first=2' in result.stdout and 'second=0' in result.stdout, result.stdout + result.stderr
  first = (tmp_path / 'first.err').read_text()
  assert first.count('\n') == 1 and 'Traceback' not in first
  assert first.startswith(f'error: cannot write {disk / "out"} (--out): No space left on device; kept ')
  assert 'resuming: ' in (tmp_path / 'second.err').read_text()
  assert _dataset(tmp_path / 'done') == _dataset(reference) and _counts(tmp_path / 'done') == _counts(reference)


@pytest.mark.parametrize('command', ['annotate', 'import_labels'])
def test_a_second_job_on_one_output_folder_is_refused_naming_the_first(command, stockfish, tmp_path):
  from searchless.core import folder_lock

  out = tmp_path / 'out'
  args = {
    'annotate': _args(stockfish, out),
    'import_labels': [str(EVAL_SAMPLE), '--out', str(out)],
  }[command]
  name = {'annotate': 'searchless-annotate', 'import_labels': 'searchless-import'}[command]
  with folder_lock.FolderLock(out, name, '--out'):  # The first job, holding the folder.
    second = subprocess.run(
      [sys.executable, '-m', f'searchless.commands.{command}', *args], capture_output=True, text=True, timeout=300
    )
  assert second.returncode == 2 and second.stderr.count('\n') == 1
  assert second.stderr.startswith(f'error: {out} is in use by another {name} (pid {os.getpid()} on ')
  assert sorted(p.name for p in out.iterdir()) == []  # The first job's folder, untouched by the second.
