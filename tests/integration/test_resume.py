"""Long jobs keep their work: an annotation stopped by Ctrl-C or killed (a reboot, the OOM killer) resumes with the same
command, searches only the boards no piece holds, and writes, byte for byte, the dataset an uninterrupted run writes
(on a Dask cluster: test_annotate_dask.py). The import keeps its parses the same way. Kept work that is no longer
true (other settings, another engine, a changed input) is refused, and dropped with --restart; an unreadable piece
is dropped and redone."""

import json
import os
import pathlib
import shlex
import shutil
import signal
import subprocess
import sys

import pytest

from searchless import samples
from searchless.core import bags
from searchless.data import resume
from searchless.engines import launch
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


def _kept_keys(out: pathlib.Path) -> set:
  """The keys (a board's FEN, a game's file:line) of the results the pieces in `out` hold, read from the pieces."""
  return {item[1] for piece in resume.pieces(str(out)) for item in resume.read_piece(piece) if item[0] == 'kept'}


def _boards(out: pathlib.Path) -> set[tuple[str, str]]:
  """The (split, FEN) of every board a finished annotation holds."""
  return {
    (split, record.fen)
    for split in ('train', 'test')
    if (out / split).exists()
    for record in bags.read_records(bags.find(str(out / split), 'board_value'), 'board_value')
  }


def _searched_and_kept(out: pathlib.Path) -> tuple[int, int]:
  timings = json.loads((out / 'manifest.json').read_text())['timings']
  return timings['boards_searched_in_this_run'], timings['boards_kept_from_an_interrupted_run']


def _expected(reference: pathlib.Path, kept_fens: set) -> tuple[int, int]:
  """The boards a resume must search and may take from the pieces: every board of the dataset (in each split)
  whose FEN no piece holds, and the rest."""
  boards = _boards(reference)
  kept = sum(fen in kept_fens for _, fen in boards)
  return len(boards) - kept, kept


@pytest.fixture(scope='module')
def ctrl_c(stockfish, tmp_path_factory) -> tuple[pathlib.Path, int, str]:
  """An annotation stopped by Ctrl-C once it kept three pieces: its output folder (copy it before use), exit status
  and stderr."""
  out = tmp_path_factory.mktemp('interrupted') / 'out'
  status, _, err = signal_when(
    [sys.executable, '-m', 'searchless.pipelines.annotate', *_args(stockfish, out)], _kept(out, 3)
  )
  return out, status, err


@pytest.fixture(scope='module')
def interrupted(ctrl_c) -> pathlib.Path:
  """The output folder of the annotation Ctrl-C stopped (copy it before use)."""
  out, status, err = ctrl_c
  assert status == 130 and resume.pieces(str(out)), err
  return out


def _copy(interrupted: pathlib.Path, tmp_path: pathlib.Path) -> pathlib.Path:
  shutil.copytree(interrupted, tmp_path / 'out')
  return tmp_path / 'out'


@pytest.fixture(scope='module')
def reference(stockfish, tmp_path_factory) -> pathlib.Path:
  """The dataset of an uninterrupted run."""
  out = tmp_path_factory.mktemp('reference') / 'out'
  annotate_driver.run([*_args(stockfish, out), '--direct_running_mode', 'in_memory'])
  assert not (out / resume.FOLDER).exists()  # Gone once the dataset is committed.
  return out


@pytest.mark.engine
@pytest.mark.slow
def test_ctrl_c_then_a_kill_then_a_rerun_writes_the_uninterrupted_dataset(stockfish, reference, ctrl_c, tmp_path):
  stopped, status, err = ctrl_c  # The module's one Ctrl-C'd run (the other tests start from copies of its folder).
  kept = resume.items_held(resume.pieces(str(stopped)))
  assert status == 130 and err.count('\n') == 1, err
  assert err.startswith(
    f'interrupted; kept {kept} annotated boards in {stopped / resume.FOLDER}; the same command resumes: '
  )
  assert not (stopped / 'manifest.json').exists() and not (stopped / 'train').exists()  # Nothing half-written.

  out = _copy(stopped, tmp_path)
  cmd = [sys.executable, '-m', 'searchless.pipelines.annotate', *_args(stockfish, out)]
  status, _, _ = signal_when(cmd, _kept(out, len(resume.pieces(str(out))) + 2), signal.SIGKILL)  # A reboot, say.
  assert status == -signal.SIGKILL
  kept = resume.items_held(resume.pieces(str(out)))
  searched, reused = _expected(reference, _kept_keys(out))
  assert reused >= kept > 0 and searched > 0  # A board in both splits is kept once, and reused in each.

  done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
  assert done.returncode == 0, done.stderr
  assert f'resuming: {kept} boards annotated by an interrupted run are kept' in done.stderr
  assert _dataset(out) == _dataset(reference) and _counts(out) == _counts(reference)
  assert _searched_and_kept(out) == (searched, reused)  # Only the boards no piece held went to the engine.
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
  cmd = [sys.executable, '-m', 'searchless.pipelines.import_labels', *common, '--out', str(out)]
  status, _, err = signal_when(cmd, _kept(out, 2))
  kept = resume.items_held(resume.pieces(str(out)))
  assert status == 130 and err.startswith(f'interrupted; kept {kept} parsed games and lines in {out / resume.FOLDER}')
  kept_keys = _kept_keys(out)

  was, stat = resume.input_identity(str(copies[1])), copies[1].stat()
  text = lichess_999.read_text()
  copies[1].write_text('[Event ' + text.split('\n[Event ', 1)[1])  # Another version of the file: its first game gone.
  refused = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
  assert refused.returncode == 2 and refused.stderr == (
    f'error: the kept pieces in {out / resume.FOLDER} were made from {copies[1]} {was}, not '
    f'{resume.input_identity(str(copies[1]))}: {kept:,} parsed games and lines would be dropped; rerun with '
    '--restart to start afresh, or with the old settings to resume\n'
  )
  assert _kept_keys(out) == kept_keys  # Nothing dropped.
  copies[1].write_bytes(lichess_999.read_bytes())  # The file as it was: the work kept is true again.
  os.utime(copies[1], ns=(stat.st_atime_ns, stat.st_mtime_ns))

  done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
  assert done.returncode == 0, done.stderr
  assert _dataset(out) == _dataset(tmp_path / 'reference')
  read = lambda folder: {
    k: v for k, v in json.loads((folder / 'manifest.json').read_text()).items() if k in ('games', 'lines', 'splits')
  }
  assert read(out) == read(tmp_path / 'reference')
  timings = json.loads((out / 'manifest.json').read_text())['timings']
  kept_games = sum(not k.startswith(str(EVAL_SAMPLE)) for k in kept_keys)
  assert timings['kept_from_an_interrupted_run'] == {'games': kept_games, 'lines': len(kept_keys) - kept_games}
  reused = f'resumed: reused {kept_games} games and {len(kept_keys) - kept_games} lines parsed by an interrupted run'
  assert reused in done.stderr.splitlines()  # What the job took from the pieces, counted as it took it.
  every = read(out)['games']['read'] + read(out)['lines']['read']
  assert sum(timings['parsed_in_this_run'].values()) == every - len(kept_keys) and kept_keys


def test_an_import_rerun_on_other_inputs_says_it_reused_nothing(tmp_path, capsys):
  """Pieces an interrupted import of another input kept (the same settings): the rerun on this input uses none of
  them, and says so, counted from what it took; its dataset is a fresh import's."""
  out, other = tmp_path / 'out', tmp_path / 'other.jsonl'
  other.write_bytes(EVAL_SAMPLE.read_bytes())
  common = ['--test_fraction', '0.5', '--direct_running_mode', 'in_memory']
  options, _ = import_labels._options([str(other), '--out', str(out), *common])
  keeper = resume.Keeper(str(out), import_labels._settings(options), 'parsed games and lines', ['searchless-import'])
  keeper.prepare()  # What an interrupted run on OTHER leaves: its settings, then a piece of its lines.
  writer = resume.PieceWriter(resume.folder(str(out)), 'lines', chunk=1000)
  for number in range(1, 31):
    writer.add(f'{other}:{number}', None)
  writer.commit()
  import_labels.run([str(EVAL_SAMPLE), '--out', str(out), *common])
  err = capsys.readouterr().err
  assert 'resumed nothing: none of the 30 games and lines an interrupted run kept is of these inputs\n' in err
  import_labels.run([str(EVAL_SAMPLE), '--out', str(tmp_path / 'fresh'), *common])
  assert _dataset(out) == _dataset(tmp_path / 'fresh')


@pytest.mark.engine
@pytest.mark.slow
@pytest.mark.skipif(not namespaces(), reason='no user and mount namespaces (unshare -rm) here')
def test_a_disk_that_fills_mid_job_is_one_line_and_the_job_resumes_once_there_is_room(stockfish, reference, tmp_path):
  """A real full disk (a tmpfs of the command's own mount namespace): the job stops with one line naming --out and
  what it kept; once the disk is larger, the same command finishes the uninterrupted dataset."""
  disk = tmp_path / 'disk'
  disk.mkdir()
  command = shlex.join([sys.executable, '-m', 'searchless.pipelines.annotate', *_args(stockfish, disk / 'out')])
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
  from searchless.plumbing import folder_lock

  out = tmp_path / 'out'
  args = {
    'annotate': _args(stockfish, out),
    'import_labels': [str(EVAL_SAMPLE), '--out', str(out)],
  }[command]
  name = {'annotate': 'searchless-annotate', 'import_labels': 'searchless-import'}[command]
  with folder_lock.FolderLock(out, name, '--out'):  # The first job, holding the folder.
    second = subprocess.run(
      [sys.executable, '-m', f'searchless.pipelines.{command}', *args], capture_output=True, text=True, timeout=300
    )
  assert second.returncode == 2 and second.stderr.count('\n') == 1
  assert second.stderr.startswith(f'error: {out} is in use by another {name} (pid {os.getpid()} on ')
  assert sorted(p.name for p in out.iterdir()) == []  # The first job's folder, untouched by the second.


@pytest.mark.engine
@pytest.mark.slow
def test_a_rerun_with_another_limit_or_engine_is_refused_and_restart_starts_afresh(
  stockfish, reference, interrupted, tmp_path, capsys
):
  out = _copy(interrupted, tmp_path)
  before = sorted(p.name for p in (out / resume.FOLDER).iterdir())
  kept = resume.items_held(resume.pieces(str(out)))
  command = [sys.executable, '-m', 'searchless.pipelines.annotate', *_args(stockfish, out)]
  wrapper = tmp_path / 'stockfish'  # Another engine binary (the same Stockfish behind it: not the pieces' binary).
  wrapper.write_text(f'#!/bin/sh\nexec {stockfish} "$@"\n')
  wrapper.chmod(0o755)
  refusals = {
    'nodes=3000': 'with --limit nodes=300, not nodes=3000',  # A mistyped limit drops nothing.
    str(wrapper): f'by the engine Stockfish 15.1 (sha256 {launch.binary_sha256(stockfish)[:16]}), not {wrapper} '
    f'(sha256 {launch.binary_sha256(str(wrapper))[:16]})',
  }
  for changed, said in refusals.items():
    flag = '--limit' if changed.startswith('nodes') else '--engine_path'
    message = (
      f'the kept pieces in {out / resume.FOLDER} were made {said}: {kept:,} annotated boards would be dropped; '
      'rerun with --restart to start afresh, or with the old settings to resume'
    )
    if flag == '--limit':  # As a user meets it: one line, exit status 2.
      rerun = subprocess.run([*command, flag, changed], capture_output=True, text=True, timeout=300)
      assert rerun.returncode == 2 and rerun.stderr == f'error: {message}\n'
    else:
      with pytest.raises(resume.KeptWorkDiffers) as refused:
        annotate_driver.run([*_args(stockfish, out), flag, changed, '--direct_running_mode', 'in_memory'])
      assert str(refused.value) == message
    assert sorted(p.name for p in (out / resume.FOLDER).iterdir()) == before  # Nothing dropped.

  annotate_driver.run([*_args(stockfish, out), '--restart', '--direct_running_mode', 'in_memory'])
  assert f'restarting: {kept} annotated boards kept in {out / resume.FOLDER} are dropped' in capsys.readouterr().err
  assert _dataset(out) == _dataset(reference)
  assert _searched_and_kept(out) == (len(_boards(reference)), 0)  # Every board searched again.


@pytest.mark.engine
@pytest.mark.slow
def test_an_unreadable_piece_is_dropped_redone_and_said_in_one_line(
  stockfish, reference, interrupted, tmp_path, capsys
):
  out = _copy(interrupted, tmp_path)
  empty, garbled, *good = resume.pieces(str(out))
  readable = {item[1] for piece in good for item in resume.read_piece(piece)}
  pathlib.Path(empty).write_bytes(b'')  # What a power cut before a sync left.
  data = pathlib.Path(garbled).read_bytes()
  pathlib.Path(garbled).write_bytes(data[: len(data) // 2] + bytes(len(data) - len(data) // 2))

  annotate_driver.run([*_args(stockfish, out), '--direct_running_mode', 'in_memory'])  # Raises nothing.
  said = capsys.readouterr().err
  warnings = [line for line in said.splitlines() if line.startswith('warning: ')]
  assert len(warnings) == 2, said
  for piece, why in ((empty, 'zero-length'), (garbled, '')):
    line = next(w for w in warnings if piece in w)
    assert line.startswith(f'warning: dropped the unreadable piece {piece} ({why}') and line.endswith(
      f': its {resume.items_held([piece])} annotated boards were computed again'
    )
  assert _dataset(out) == _dataset(reference)
  assert _searched_and_kept(out) == _expected(reference, readable) and readable


@pytest.mark.engine
def test_a_worker_whose_engine_did_not_make_a_kept_board_searches_it_again(stockfish, tmp_path):
  """Where the driver cannot see the workers' engine (a cluster), each worker compares the engine identity a piece
  carries with its own: a board another engine made is searched again, one its own engine made is taken."""
  import apache_beam as beam
  from apache_beam.testing.test_pipeline import TestPipeline
  from apache_beam.testing.util import assert_that, equal_to

  from searchless.data import annotate
  from searchless.engines import annotator

  config = annotator.EngineConfig(stockfish, launch.SearchLimit.parse('nodes=200'))
  fen = 'r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3'
  (tmp_path / resume.FOLDER).mkdir()
  with annotator.BoardAnnotator(config) as engine:
    truth, identity = engine.annotate(fen), annotate.engine_identity(engine.engine_id, stockfish)
  stale = annotator.BoardAnnotation(fen, (), 0.123, None)  # Labels an older engine gave.
  other = json.dumps({'name': 'Stockfish 12', 'binary_sha256': '0' * 64}, sort_keys=True)
  with TestPipeline() as p:
    out = (
      p
      | beam.Create([('kept', ('train', fen), stale, other), ('kept', ('test', fen), truth, identity)])
      | beam.ParDo(annotate.AnnotateBoards(config, None, resume.folder(str(tmp_path)), 10))
      | beam.Filter(lambda a: isinstance(a, annotate.Annotated))
      | beam.Map(lambda a: (a.split, a.origin, a.annotation == truth))
    )
    assert_that(out, equal_to([('train', 'searched_again', True), ('test', 'kept', True)]))
  (piece,) = resume.pieces(str(tmp_path))
  assert [item[1:] for item in resume.read_piece(piece)] == [(fen, truth, identity)]  # Its own engine's labels.
