"""searchless-download against a file server on 127.0.0.1 (tests/http_fixture.py): the published layout served
from the vendored fixtures, then fetched, resumed, checked and refused as a user would meet it, with servers that
drop, stall, fail, change their files and disagree with themselves. Nothing here reaches beyond this machine."""

import contextlib
import hashlib
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile

import chess
import pytest
import zstandard


from searchless.commands import download
from searchless.core import downloads
from searchless.core import file_download
from searchless.core import published
from searchless.plumbing import fetch

from helpers import COMPAT, play_legal_moves, uci_engine
from http_fixture import FileServer

BAGS = {  # Where the published test bags are, in the bucket -> the vendored samples served there.
  'searchless_chess/data/test/action_value_data.bag': COMPAT / 'action_value_sample.bag',
  'searchless_chess/data/test/behavioral_cloning_data.bag': COMPAT / 'behavioral_cloning_sample.bag',
  'searchless_chess/data/test/state_value_data.bag': COMPAT / 'state_value_sample.bag',
}
AV = '/searchless_chess/data/test/action_value_data.bag'
PUZZLES = '/searchless_chess/data/puzzles.csv'
ZIP = '/searchless_chess/checkpoints/9M.zip'
MONTH = 'lichess_db_standard_rated_2024-01.pgn.zst'


def _puzzles(size: int) -> bytes:
  """A puzzles.csv of `size` bytes (ChessBench's header, then lines of random text): passes the format check."""
  header = b'PuzzleId,Rating,PGN,Moves\n'
  body = os.urandom(size).hex().encode()[: size - len(header) - 1]
  return (
    header + b'\n'.join(body[i : i + 99] for i in range(0, len(body), 100)).ljust(size - len(header) - 1, b'x') + b'\n'
  )


@pytest.fixture
def site(tmp_path) -> pathlib.Path:
  """The published files, in their URL paths: the test bags, a checkpoint zip (9M: the vendored reference
  checkpoint in the published layout), a Lichess month and its sha256 list (one wrong entry), a big puzzles.csv."""
  root = tmp_path / 'site'
  for path, source in BAGS.items():
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, root / path)
  zipped = root / 'searchless_chess/checkpoints/9M.zip'
  zipped.parent.mkdir(parents=True)
  with zipfile.ZipFile(zipped, 'w') as z:
    for file in sorted((COMPAT / 'reference_local_checkpoint').rglob('*')):
      if file.is_file():
        z.write(file, pathlib.Path('9M') / file.relative_to(COMPAT / 'reference_local_checkpoint'))
  games = root / 'standard' / MONTH
  games.parent.mkdir()
  games.write_bytes(os.urandom(300_000))
  other = root / 'standard' / 'lichess_db_standard_rated_2024-02.pgn.zst'
  other.write_bytes(b'x' * 1000)
  (root / 'standard' / 'sha256sums.txt').write_text(
    f'{hashlib.sha256(games.read_bytes()).hexdigest()}  {games.name}\n{"0" * 64}  {other.name}\n'
  )
  (root / 'searchless_chess/data/puzzles.csv').write_bytes(_puzzles(3_000_000))
  return root


UNVERIFIED = (
  f'{downloads.UNVERIFIED}, {downloads.FORMAT_CHECKED}'  # What the summary says of a file no checksum checked.
)


def _run(capsys, *argv: str) -> tuple[int, str, str]:
  try:
    download.main([*argv, '--no_progress'])
    code = 0
  except SystemExit as exit:
    code = exit.code if isinstance(exit.code, int) else 1
  out, err = capsys.readouterr()
  return code, out, err


def _files(root: pathlib.Path) -> list[str]:
  skip = ('.lock', downloads.RECORD)
  return sorted(p.relative_to(root).as_posix() for p in root.rglob('*') if p.is_file() and p.name not in skip)


def _etag(data: bytes) -> str:  # The fixture's ETag of a file.
  return f'"{hashlib.sha256(data).hexdigest()[:16]}"'


@pytest.fixture
def quick(monkeypatch):
  """Retries without waiting. (The read timeout stays the shipped one: a loaded machine's slow answer is no
  failure, so the tests that count GETs count only the ones they provoke.)"""
  monkeypatch.setattr(fetch, 'BACKOFF', 0.01)


STALL = 1.0  # Seconds without a byte that a test with a stalled server waits (`_stalls`): long enough that a
# loaded machine's pause before the first bytes is not taken for the stall.


def _stalls(monkeypatch: pytest.MonkeyPatch) -> None:
  """A stalled connection given up after `STALL` seconds."""
  monkeypatch.setattr(fetch, 'TIMEOUT', (5.0, STALL))


def _interrupted(site, out_dir, capsys, **server) -> int:
  """Leaves the .part of puzzles.csv that a run which met a stalled server kept: its size (one `fetch.CHUNK`)."""
  with pytest.MonkeyPatch.context() as m, FileServer(site, stall_at=100_000, **server) as s:
    _stalls(m)
    code, _, err = _run(
      capsys, 'chessbench-data', 'puzzles', '--base_url', s.url, '--out', str(out_dir), '--retries', '0'
    )
  assert code == 2 and err == f'error: cannot fetch {s.url}{PUZZLES}: no bytes for {STALL:g} s\n'
  return (out_dir / 'chessbench/data/puzzles.csv.part').stat().st_size


@pytest.mark.slow
def test_a_published_checkpoint_downloads_unpacks_and_plays_by_name(site, tmp_path, monkeypatch, capsys):
  monkeypatch.setenv(published.DATA_ENV, str(tmp_path / 'data'))
  from searchless.play import player as player_lib

  with pytest.raises(FileNotFoundError, match='run `searchless-download chessbench-checkpoints 9M`'):
    player_lib.Player.load('chessbench-9M')
  with FileServer(site) as server:
    code, out, err = _run(capsys, 'chessbench-checkpoints', '9M', '--base_url', server.url)
  assert (code, err) == (0, '')
  model = tmp_path / 'data' / 'chessbench' / 'checkpoints' / '9M'
  assert f'chessbench-9M: {model} (play it: searchless-uci --checkpoint chessbench-9M)' in out
  assert sorted(p.name for p in model.iterdir()) == ['6400000']  # The published layout; the zip is gone.
  assert (model / '6400000' / 'params_ema').is_dir() and not (model.parent / '9M.zip').exists()
  board = chess.Board()
  assert player_lib.Player.load('chessbench-9M').play(board) in board.legal_moves
  with uci_engine('chessbench-9M') as engine:  # The engine's process finds it by name too.
    play_legal_moves(engine, plies=2, seconds=0.2)


def test_a_dropped_connection_resumes_fetching_only_the_rest(site, tmp_path, capsys, quick):
  with FileServer(site, drop_after=50_000) as server:
    code, out, err = _run(capsys, 'chessbench-data', 'test', '--base_url', server.url, '--out', str(tmp_path / 'd'))
  assert (code, err) == (0, '')
  assert out.startswith('fetched 3 files (146kB), 0 already there')
  assert server.gets(AV) == [None, 'bytes=50000-']  # The rest only, after the drop ...
  assert server.if_ranges(AV) == [None, _etag(BAGS[AV[1:]].read_bytes())]  # ... if it is still the same file.
  for path, source in BAGS.items():  # The bags that are smaller than the drop came in one GET.
    assert (tmp_path / 'd' / 'chessbench' / path.split('/', 1)[1]).read_bytes() == source.read_bytes()
  assert _files(tmp_path / 'd') == sorted('chessbench/' + p.split('/', 1)[1] for p in BAGS)


def test_a_server_without_ranges_restarts_the_file_cleanly(site, tmp_path, capsys, quick):
  out_dir = tmp_path / 'd'
  part = out_dir / 'chessbench/data/test/action_value_data.bag.part'
  part.parent.mkdir(parents=True)
  part.write_bytes(b'left by an earlier run' * 100)  # Of which file, nothing says (no validator beside it).
  with FileServer(site, ranges=False, drop_after=50_000) as server:
    code, _, err = _run(capsys, 'chessbench-data', 'test', '--base_url', server.url, '--out', str(out_dir))
  assert code == 0
  assert err == (
    'action_value_data.bag: a .part with no validator (ETag, Last-Modified) nor checksum to check it: from zero\n'
  )
  assert server.gets(AV) == [None, 'bytes=50000-']  # Not resumed blind; then answered whole (200): a restart.
  assert (out_dir / 'chessbench/data/test/action_value_data.bag').read_bytes() == BAGS[AV[1:]].read_bytes()
  assert not part.exists()


def test_checksums_are_checked_and_a_mismatch_leaves_nothing(site, tmp_path, capsys):
  out_dir = tmp_path / 'd'
  with FileServer(site) as server:
    code, out, err = _run(capsys, 'lichess-games', '2024-01', '--base_url', server.url, '--out', str(out_dir))
    assert (code, err) == (0, '')
    lichess = server.url
    assert (out_dir / 'lichess/standard' / MONTH).read_bytes() == (site / 'standard' / MONTH).read_bytes()
    code, out, err = _run(capsys, 'lichess-games', '2024-02', '--base_url', server.url, '--out', str(out_dir))
    assert code == 2 and out == '' and err.count('\n') == 1
    assert err.startswith(f'error: {server.url}/standard/lichess_db_standard_rated_2024-02.pgn.zst: sha256 ')
    assert f'is not the published {"0" * 64} ({server.url}/standard/sha256sums.txt): removed it' in err
  assert _files(out_dir) == [f'lichess/standard/{MONTH}']  # Nothing of 2024-02, not even a .part.
  for digest in ('md5', 'crc32c'):  # Google Cloud Storage's checksum header, checked the same way.
    with FileServer(site, goog_hash=digest) as server:
      server.wrong_hash.add('/searchless_chess/data/test/state_value_data.bag')
      code, out, err = _run(capsys, 'chessbench-data', 'test', '--base_url', server.url, '--out', str(out_dir))
    assert code == 2 and err.count('\n') == 1 and out == ''
    assert f'state_value_data.bag: {digest} ' in err and '(x-goog-hash): removed it' in err
    assert not (out_dir / 'chessbench/data/test/state_value_data.bag').exists()
    assert not (out_dir / 'chessbench/data/test/state_value_data.bag.part').exists()
  with FileServer(site, goog_hash='crc32c') as server:
    code, out, err = _run(capsys, 'chessbench-data', 'test', '--base_url', server.url, '--out', str(out_dir))
  assert (code, err) == (0, '') and 'unverified' not in out  # Each file checked.
  record = json.loads((out_dir / downloads.RECORD).read_text())['files']
  assert record['chessbench/data/test/state_value_data.bag']['checked'] == 'crc32c (x-goog-hash)'
  assert record[f'lichess/standard/{MONTH}']['checked'] == f'sha256 ({lichess}/standard/sha256sums.txt)'


def test_a_missing_file_or_server_is_one_line(site, tmp_path, capsys):
  with FileServer(site) as server:
    code, out, err = _run(capsys, 'lichess-puzzles', '--base_url', server.url, '--out', str(tmp_path / 'd'))
  assert (code, out) == (2, '')
  assert err == f'error: {server.url}/lichess_db_puzzle.csv.zst: HTTP 404 Not Found\n'
  code, _, err = _run(
    capsys, 'lichess-evals', '--base_url', 'http://127.0.0.1:9', '--retries', '0', '--out', str(tmp_path / 'd')
  )
  assert code == 2 and err.startswith('error: cannot reach http://127.0.0.1:9/lichess_db_eval.jsonl.zst: [Errno 111]')
  assert _files(tmp_path / 'd') == []


def test_a_dry_run_fetches_nothing(site, tmp_path, capsys):
  with FileServer(site) as server:
    code, out, err = _run(
      capsys, 'chessbench-data', '--base_url', server.url, '--out', str(tmp_path / 'd'), '--dry_run'
    )
  assert (code, err) == (2, 'error: 1 of 5 files cannot be fetched (listed above)\n')  # What is missing: exit 2.
  assert {method for method, *_ in server.log} == {'HEAD'}
  lines = out.splitlines()
  assert (
    lines[0] == f'{server.url}/searchless_chess/data/puzzles.csv  3.00MB  -> {tmp_path}/d/chessbench/data/puzzles.csv'
  )
  assert lines[1] == (
    f'{server.url}/searchless_chess/data/eco_openings.pgn  error: HTTP 404 Not Found'
    f'  -> {tmp_path}/d/chessbench/data/eco_openings.pgn'
  )
  assert lines[-1] == '5 files to fetch, 3.15MB; nothing fetched (--dry_run)'
  assert not (tmp_path / 'd').exists()


def test_ctrl_c_keeps_the_part_and_a_rerun_completes(site, tmp_path):
  out_dir = tmp_path / 'd'
  argv = [sys.executable, '-m', 'searchless.commands.download', 'lichess-games', '2024-01', '--out', str(out_dir)]
  argv.append('--no_progress')
  part = out_dir / 'lichess/standard' / f'{MONTH}.part'
  with FileServer(site, bytes_per_second=100_000) as server:  # 300 kB: 3 s.
    process = subprocess.Popen(
      [*argv, '--base_url', server.url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
      start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not (part.exists() and part.stat().st_size > 0) and time.monotonic() < deadline:
      time.sleep(0.02)
    os.killpg(process.pid, signal.SIGINT)  # As a terminal does: to the process group.
    out, err = process.communicate(timeout=30)
  assert process.returncode == 130, err
  assert err.count('\n') == 1 and err.startswith('interrupted; 0 of 1 files fetched into ')
  assert 'run the same command again to resume' in err
  kept = part.stat().st_size  # The bytes that had arrived, written as they came (a small file too).
  assert 0 < kept < 300_000 and kept % fetch.CHUNK == 0
  with FileServer(site) as server:
    done = subprocess.run([*argv, '--base_url', server.url], capture_output=True, text=True, timeout=60)
  assert (done.returncode, done.stderr) == (0, '')
  assert server.gets(f'/standard/{MONTH}') == [f'bytes={kept}-']  # The rest only; then checked (sha256).
  assert (out_dir / 'lichess/standard' / MONTH).read_bytes() == (site / 'standard' / MONTH).read_bytes()
  assert _files(out_dir) == [f'lichess/standard/{MONTH}']


def test_one_download_at_a_time_in_a_folder(site, tmp_path, capsys):
  from searchless.plumbing import folder_lock

  with folder_lock.FolderLock(tmp_path / 'd', 'searchless-download', '--out'):
    with FileServer(site) as server:
      code, _, err = _run(capsys, 'chessbench-data', 'test', '--base_url', server.url, '--out', str(tmp_path / 'd'))
  assert code == 2 and f'{tmp_path / "d"} is in use by another searchless-download (pid {os.getpid()} on ' in err


@pytest.mark.parametrize(
  'size, if_range', [('same', True), ('same', False), ('other', False)], ids=['same size', 'no If-Range', 'other size']
)
def test_a_remote_file_that_changed_is_fetched_again_not_spliced(site, tmp_path, capsys, quick, size, if_range):
  out_dir, puzzles = tmp_path / 'd', site / PUZZLES[1:]
  old = puzzles.read_bytes()
  kept = _interrupted(site, out_dir, capsys)
  new = _puzzles(len(old) if size == 'same' else len(old) - 1000)  # Republished under the same URL.
  puzzles.write_bytes(new)
  with FileServer(site, if_range=if_range) as server:
    code, out, err = _run(capsys, 'chessbench-data', 'puzzles', '--base_url', server.url, '--out', str(out_dir))
  assert code == 0 and out.startswith('fetched 1 files (')
  # If-Range with the old ETag: a server that takes it sends the new file whole; one that does not is caught by
  # its 206's size or ETag, and asked again from zero.
  assert server.gets(PUZZLES) == [f'bytes={kept}-'] + ([] if if_range else [None])
  assert server.if_ranges(PUZZLES)[0] == _etag(old)
  assert err.count('\n') == 1 and err.startswith(f'puzzles.csv: the file at {server.url}{PUZZLES} changed since')
  assert err.endswith(': fetching it again from zero\n')
  assert (out_dir / 'chessbench/data/puzzles.csv').read_bytes() == new
  assert _files(out_dir) == ['chessbench/data/puzzles.csv']


def test_a_file_that_keeps_changing_ends_in_one_line_and_keeps_nothing(site, tmp_path, capsys, quick):
  out_dir = tmp_path / 'd'
  republish = lambda path, n: (site / path[1:]).write_bytes(_puzzles(300_000))  # A new file at every GET.
  with FileServer(site, drop_after=50_000, drops=100, before_get=republish) as server:
    code, out, err = _run(capsys, 'chessbench-data', 'puzzles', '--base_url', server.url, '--out', str(out_dir))
  lines = err.splitlines()
  assert (code, out, len(lines)) == (2, '', 1 + file_download.MAX_CHANGES)
  assert all(' changed since its .part was fetched ' in line for line in lines[:-1])
  assert lines[-1].startswith(f'error: {server.url}{PUZZLES} changed {file_download.MAX_CHANGES + 1} times during its ')
  assert lines[-1].endswith(': nothing kept; rerun later')
  assert len(server.gets(PUZZLES)) == 2 + file_download.MAX_CHANGES  # Bounded: the first, a resume, and the restarts.
  assert _files(out_dir) == []


def test_a_file_that_changes_once_during_its_download_is_fetched_again_whole(site, tmp_path, capsys, quick):
  out_dir = tmp_path / 'd'
  changed = _puzzles(200_000)
  republish = lambda path, n: n == 1 and (site / path[1:]).write_bytes(changed)
  with FileServer(site, drop_after=50_000, before_get=republish) as server:
    code, _, err = _run(capsys, 'chessbench-data', 'puzzles', '--base_url', server.url, '--out', str(out_dir))
  assert code == 0 and err.count('\n') == 1 and 'fetching it again from zero' in err
  assert server.gets(PUZZLES) == [None, 'bytes=50000-']  # The second answered whole: the new file.
  assert (out_dir / 'chessbench/data/puzzles.csv').read_bytes() == changed


@pytest.mark.parametrize('checksum, change', [(None, False), ('crc32c', False), ('crc32c', True)])
def test_no_validator_no_blind_resume_unless_a_checksum_checks_the_join(
  site, tmp_path, capsys, quick, checksum, change
):
  out_dir, puzzles = tmp_path / 'd', site / PUZZLES[1:]
  kept = _interrupted(site, out_dir, capsys, validators=False, goog_hash=checksum or False)
  if change:
    puzzles.write_bytes(_puzzles(puzzles.stat().st_size))  # Nothing in the answers shows it but the checksum.
  with FileServer(site, validators=False, goog_hash=checksum or False) as server:
    code, out, err = _run(capsys, 'chessbench-data', 'puzzles', '--base_url', server.url, '--out', str(out_dir))
  assert code == 0
  if checksum is None:  # Nothing would check a joined file: from zero.
    assert server.gets(PUZZLES) == [None]
    assert err == 'puzzles.csv: a .part with no validator (ETag, Last-Modified) nor checksum to check it: from zero\n'
    assert out.splitlines()[1] == f'1 {UNVERIFIED}: chessbench/data/puzzles.csv'
  elif not change:  # Resumed (no If-Range to send), and the joined file checked.
    assert server.gets(PUZZLES) == [f'bytes={kept}-'] and server.if_ranges(PUZZLES) == [None]
    assert err == '' and 'unverified' not in out
  else:  # The join fails its checksum: fetched again from zero, once.
    assert server.gets(PUZZLES) == [f'bytes={kept}-', None]
    assert err.count('\n') == 1 and err.startswith('puzzles.csv: crc32c ')
    assert err.endswith(' (x-goog-hash) after resuming: fetching it again from zero\n')
  assert (out_dir / 'chessbench/data/puzzles.csv').read_bytes() == puzzles.read_bytes()
  assert _files(out_dir) == ['chessbench/data/puzzles.csv']


def test_failures_are_tried_again_in_one_layer_a_bounded_number_of_times(site, tmp_path, capsys, quick, monkeypatch):
  out_dir = tmp_path / 'd'
  with FileServer(site, status={PUZZLES: 503}) as server:  # HEAD answers; every GET is a 503.
    code, out, err = _run(
      capsys, 'chessbench-data', 'puzzles', '--base_url', server.url, '--out', str(out_dir), '--retries', '2'
    )
  assert (code, out) == (2, '')
  assert err == f'error: {server.url}{PUZZLES}: HTTP 503 Service Unavailable (after 2 retries)\n'
  assert len(server.gets(PUZZLES)) == 3  # 1 + 2 retries, not (1 + 2)² through two nested layers.
  _stalls(monkeypatch)
  with FileServer(site, stall_at=0) as server:  # Headers, then not a byte.
    code, out, err = _run(
      capsys, 'chessbench-data', 'puzzles', '--base_url', server.url, '--out', str(out_dir), '--retries', '1'
    )
  assert err == f'error: cannot fetch {server.url}{PUZZLES}: no bytes for {STALL:g} s (after 1 retries)\n'
  assert (code, len(server.gets(PUZZLES))) == (2, 2)
  assert _files(out_dir) == ['chessbench/data/puzzles.csv.part', 'chessbench/data/puzzles.csv.part.json']


@pytest.mark.parametrize('more', [1000, -1000])
def test_a_head_and_a_get_that_disagree_on_the_size_do_not_loop(site, tmp_path, capsys, quick, more):
  out_dir, puzzles = tmp_path / 'd', site / PUZZLES[1:]
  with FileServer(site, head_lengths={PUZZLES: puzzles.stat().st_size + more}) as server:
    code, _, err = _run(capsys, 'chessbench-data', 'puzzles', '--base_url', server.url, '--out', str(out_dir))
  assert (code, err) == (0, '')
  assert server.gets(PUZZLES) == [None]  # The GET's own length is the file's.
  assert (out_dir / 'chessbench/data/puzzles.csv').read_bytes() == puzzles.read_bytes()


def test_a_mirror_without_checksums_says_what_is_unverified_and_what_changed_since(site, tmp_path, capsys):
  out_dir, bag = tmp_path / 'd', site / AV[1:]
  with FileServer(site) as server:
    code, out, err = _run(capsys, 'chessbench-data', 'test', '--base_url', server.url, '--out', str(out_dir))
    assert (code, err) == (0, '')
    names = [f'chessbench/{p.split("/", 1)[1]}' for p in BAGS]
    assert out.splitlines()[1] == f'3 {UNVERIFIED}: {", ".join(names)}'
    record = json.loads((out_dir / downloads.RECORD).read_text())['files']
    assert sorted(record) == sorted(names)
    entry = record['chessbench/data/test/action_value_data.bag']
    data = bag.read_bytes()
    assert {k: entry[k] for k in ('url', 'size', 'validator', 'sha256', 'checked')} == {
      'url': f'{server.url}{AV}',
      'size': len(data),
      'validator': _etag(data),
      'sha256': hashlib.sha256(data).hexdigest(),
      'checked': None,
    }
    bag.write_bytes(data[:-10])  # Republished since.
    code, out, err = _run(capsys, 'chessbench-data', 'test', '--base_url', server.url, '--out', str(out_dir))
  assert code == 0 and out.startswith('fetched 0 files (0.00B), 3 already there')
  assert err == (
    f'chessbench/data/test/action_value_data.bag: the remote changed since it was downloaded on {entry["fetched"]}'
    f' ({_etag(data)} {len(data)} bytes -> {_etag(data[:-10])} {len(data) - 10} bytes); kept the downloaded one:'
    ' remove it and rerun to fetch the new one\n'
  )
  assert (out_dir / 'chessbench/data/test/action_value_data.bag').read_bytes() == data  # What was checked stays.


def test_a_checkpoint_named_twice_is_fetched_once_and_a_killed_unpack_is_redone(site, tmp_path, capsys):
  out_dir = tmp_path / 'd'
  model, zipped = out_dir / 'chessbench/checkpoints/9M', out_dir / 'chessbench/checkpoints/9M.zip'
  args = ['chessbench-checkpoints', '9M', '9M', '--out', str(out_dir)]
  with FileServer(site) as server:
    code, out, err = _run(capsys, *args, '--base_url', server.url)
    assert (code, err) == (0, '') and out.startswith('fetched 1 files (')
    assert server.gets(ZIP) == [None]  # One writer, one .part.
    assert published.holds_checkpoint(model) and not zipped.exists()
    want = sorted(p.relative_to(model) for p in model.rglob('*'))
    # Killed after the folder appeared, before the zip went: the zip goes, nothing is fetched.
    shutil.copy(site / ZIP[1:], zipped)
    (model.parent / '.9M.unpacking').mkdir()
    code, out, err = _run(capsys, *args, '--base_url', server.url)
    assert (code, err) == (0, '') and out.startswith('fetched 0 files (0.00B), 1 already there')
    assert not zipped.exists() and not (model.parent / '.9M.unpacking').exists()
    # Killed during the unpack: done again from the zip, nothing fetched.
    shutil.rmtree(model)
    shutil.copy(site / ZIP[1:], zipped)
    with zipfile.ZipFile(zipped) as z:
      z.extract(z.namelist()[0], model.parent / '.9M.unpacking')
    code, out, err = _run(capsys, *args, '--base_url', server.url)
    assert (code, err) == (0, '') and out.startswith('fetched 1 files (')
    assert sorted(p.relative_to(model) for p in model.rglob('*')) == want
    # An empty folder (what two writers of one .part left) is not a checkpoint: fetched again.
    shutil.rmtree(model)
    model.mkdir()
    code, out, err = _run(capsys, *args, '--base_url', server.url)
    assert (code, err) == (0, '') and out.startswith('fetched 1 files (')
    assert server.gets(ZIP) == [None, None]
  assert _files(out_dir) == sorted(f'chessbench/checkpoints/9M/{p}' for p in want if (model / p).is_file())


def test_a_zip_that_is_no_zip_is_removed_and_fetched_again_once_fixed(site, tmp_path, capsys):
  out_dir, good = tmp_path / 'd', (site / ZIP[1:]).read_bytes()
  (site / ZIP[1:]).write_bytes(b'<html>a proxy error page</html>')
  args = ['chessbench-checkpoints', '9M', '--out', str(out_dir)]
  with FileServer(site) as server:
    code, out, err = _run(capsys, *args, '--base_url', server.url)
    assert (code, out) == (2, '')
    assert (
      err == f"error: {server.url}{ZIP}: an error page, not the file: '<html>a proxy error page</html>': nothing kept\n"
    )
    assert _files(out_dir) == []
    (site / ZIP[1:]).write_bytes(good)
    code, out, err = _run(capsys, *args, '--base_url', server.url)
  assert (code, err) == (0, '')
  assert published.holds_checkpoint(out_dir / 'chessbench/checkpoints/9M')


def test_a_streamed_input_resumes_only_onto_the_same_file(site, quick):
  from searchless.plumbing import remote_file

  changed = os.urandom(300_000)
  republish = lambda path, n: n == 1 and (site / path[1:]).write_bytes(changed)
  with FileServer(site, drop_after=100_000, drops=2) as server:  # Resumed after a drop: the same bytes.
    with remote_file.RemoteFile(f'{server.url}{PUZZLES}') as stream:
      assert stream.read() == (site / PUZZLES[1:]).read_bytes()
  with FileServer(site, drop_after=100_000, before_get=republish) as server:  # Changed before the resume.
    with remote_file.RemoteFile(f'{server.url}{PUZZLES}') as stream:
      with pytest.raises(fetch.DownloadError, match=r'cannot resume there \(the file changed\)$'):
        stream.read()
  assert server.if_ranges(PUZZLES)[1] is not None


def test_a_streamed_input_without_a_validator_never_resumes(site, quick):
  from searchless.plumbing import remote_file

  with FileServer(site, validators=False, drop_after=100_000) as server:
    with remote_file.RemoteFile(f'{server.url}{PUZZLES}') as stream:
      with pytest.raises(fetch.DownloadError) as raised:
        stream.read()
  assert str(raised.value) == (
    f'{server.url}{PUZZLES}: the connection dropped at byte 100000, and the server sent no validator (ETag, '
    'Last-Modified): it cannot resume safely'
  )
  assert server.gets(PUZZLES) == [None]  # Not asked again: a plain Range could splice another file on.


LICHESS_PUZZLES = '/lichess_db_puzzle.csv.zst'
EVALS = '/lichess_db_eval.jsonl.zst'


def _zst_puzzles() -> bytes:
  """A small lichess_db_puzzle.csv.zst: Lichess's header, then lines; two frames, each with its checksum."""
  lines = b''.join(b'%05d,8/8/8/8/8/8/8/K1k5 w - - 0 1,a1a2 c1c2,1500\n' % i for i in range(3000))
  compress = zstandard.ZstdCompressor(write_checksum=True).compress
  return compress(b'PuzzleId,FEN,Moves,Rating\n' + lines[:50_000]) + compress(lines[50_000:])


def _bad_bag() -> bytes:
  """The action-value sample bag with two record ends of its index swapped: it opens, but its index is wrong."""
  data = bytearray(BAGS[AV[1:]].read_bytes())
  start = int.from_bytes(data[-8:], 'little')
  data[start : start + 16] = data[start + 8 : start + 16] + data[start : start + 8]
  return bytes(data)


def _bad_crc_zip() -> bytes:
  folder = tempfile.mkdtemp()
  with zipfile.ZipFile(f'{folder}/z.zip', 'w', zipfile.ZIP_STORED) as z:
    z.writestr('9M/6400000/params_ema/weights', b'w' * 5000)
  data = bytearray(pathlib.Path(f'{folder}/z.zip').read_bytes())
  data[100] ^= 1  # In the member's bytes: its CRC no longer holds.
  return bytes(data)


HTML = b'<html><head><title>Service unavailable</title></head><body>Try later</body></html>\n'
BAD_FORMATS = {  # case -> (target, the path served, its bytes (None: the right file), server options, the error)
  'HTML error page': (
    'lichess-puzzles', LICHESS_PUZZLES, HTML, {},
    "an error page, not the file: '<html><head><title>Service unavailable</title></head><body>T...'",
  ),
  'JSON error body': (
    'lichess-evals', EVALS, b'{"error": {"code": 403, "message": "Forbidden"}}', {},
    'an error page, not the file: \'{"error": {"code": 403, "message": "Forbidden"}}\'',
  ),
  'short Content-Length': (
    'lichess-puzzles', LICHESS_PUZZLES, None, {'lengths': {LICHESS_PUZZLES: -1000}},
    'zstd stream is truncated (the file ends inside a frame)',
  ),
  'long Content-Length': (
    'lichess-puzzles', LICHESS_PUZZLES, None, {'lengths': {LICHESS_PUZZLES: 1000}},
    'the server has {size} bytes of the file, not the {more} its Content-Length declared',
  ),
  'truncated .zst': (
    'lichess-puzzles', LICHESS_PUZZLES, 'cut', {}, 'zstd stream is truncated (the file ends inside a frame)',
  ),
  '.zip with a bad CRC': (
    'chessbench-checkpoints', ZIP, _bad_crc_zip(), {}, 'the zip member 9M/6400000/params_ema/weights fails its CRC',
  ),
  '.csv without its header': (
    'chessbench-data', PUZZLES, b'a,b,c\n1,2,3\n', {},
    "not the expected CSV header (with PuzzleId, PGN, Moves, Rating): 'a,b,c'",
  ),
  'bag with a wrong index': (
    'chessbench-data', AV, _bad_bag(), {}, 'its index is inconsistent (record ends out of order or past the records)',
  ),
}  # fmt: skip


@pytest.mark.parametrize('case', list(BAD_FORMATS))
def test_a_file_no_checksum_checks_is_kept_only_if_it_is_what_its_name_says(site, tmp_path, capsys, quick, case):
  target, path, data, options, error = BAD_FORMATS[case]
  good = _zst_puzzles() if path in (LICHESS_PUZZLES, EVALS) else (site / path[1:]).read_bytes()
  (site / path[1:]).write_bytes(good[:-1000] if data == 'cut' else good if data is None else data)
  size = (site / path[1:]).stat().st_size
  out_dir = tmp_path / 'd'
  item = {'chessbench-checkpoints': ['9M'], 'chessbench-data': ['puzzles' if path == PUZZLES else 'test']}
  args = [target, *item.get(target, []), '--out', str(out_dir)]
  with FileServer(site, **options) as server:
    code, out, err = _run(capsys, *args, '--base_url', server.url)
  assert (code, out) == (2, '')
  error = error.replace('{size}', str(size)).replace('{more}', str(size + 1000))
  assert err == f'error: {server.url}{path}: {error}: nothing kept\n'
  name = path.rsplit('/', 1)[1].removesuffix('.zip')
  assert [f for f in _files(out_dir) if '/' + name in f] == []  # Nothing under its final name, no .part.
  if case == 'HTML error page':  # The file fixed, a rerun fetches it, and says nothing changed.
    (site / path[1:]).write_bytes(good)
    with FileServer(site) as server:
      code, out, err = _run(capsys, *args, '--base_url', server.url)
    assert (code, err) == (0, '')
    assert out.splitlines()[1] == f'1 {UNVERIFIED}: lichess/lichess_db_puzzle.csv.zst'
    assert (out_dir / 'lichess/lichess_db_puzzle.csv.zst').read_bytes() == good
    record = json.loads((out_dir / downloads.RECORD).read_text())['files']['lichess/lichess_db_puzzle.csv.zst']
    assert (record['checked'], record['format']) == (None, 'zstd frames read to the end')


@pytest.mark.parametrize('same', [True, False], ids=['same file', 'changed'])
def test_a_whole_part_is_kept_only_while_the_server_has_its_file(site, tmp_path, capsys, quick, same):
  out_dir, puzzles = tmp_path / 'd', site / PUZZLES[1:]
  part = out_dir / 'chessbench/data/puzzles.csv.part'
  part.parent.mkdir(parents=True)
  old = puzzles.read_bytes()
  part.write_bytes(old)  # Whole: a kill came between its last byte and its rename.
  (part.parent / 'puzzles.csv.part.json').write_text(json.dumps({'size': len(old), 'validator': _etag(old)}))
  if not same:
    puzzles.write_bytes(_puzzles(len(old)))  # Republished since, at the same size.
  with FileServer(site) as server:
    code, out, err = _run(capsys, 'chessbench-data', 'puzzles', '--base_url', server.url, '--out', str(out_dir))
  assert code == 0 and out.startswith('fetched 1 files (')
  if same:
    assert (err, server.gets(PUZZLES)) == ('', [])  # Checked (its validator, its format) and renamed.
  else:
    assert err == (
      f'puzzles.csv: the file at {server.url}{PUZZLES} changed since its .part was fetched ({_etag(old)} -> '
      f'{_etag(puzzles.read_bytes())}): fetching it again from zero\n'
    )
    assert server.gets(PUZZLES) == [None]
  assert (out_dir / 'chessbench/data/puzzles.csv').read_bytes() == puzzles.read_bytes()
  assert _files(out_dir) == ['chessbench/data/puzzles.csv']


def test_a_server_that_refuses_head_is_asked_with_a_get(site, tmp_path, capsys):
  from searchless.data import resume

  with FileServer(site, head_status=405) as server:
    code, out, err = _run(capsys, 'chessbench-data', 'puzzles', '--base_url', server.url, '--out', str(tmp_path))
    identity = resume.input_identity(f'{server.url}{PUZZLES}')  # A streamed input's identity: the same way.
  assert (code, err) == (0, '') and out.startswith('fetched 1 files (3.00MB)')
  assert [m for m, p, *_ in server.log if p == PUZZLES] == ['HEAD', 'GET', 'GET', 'HEAD', 'GET']
  assert identity == f'of 3,000,000 bytes, with ETag {_etag(site.joinpath(PUZZLES[1:]).read_bytes())}'
  assert (tmp_path / 'chessbench/data/puzzles.csv').read_bytes() == (site / PUZZLES[1:]).read_bytes()


def test_what_is_there_is_read_under_the_folder_lock(site, tmp_path, capsys, monkeypatch):
  from searchless.plumbing import outputs

  out_dir, locked = tmp_path / 'd', outputs.sole_writer

  @contextlib.contextmanager
  def another_writer_first(*args, **kwargs):  # Another download ends between this one's start and its lock.
    monkeypatch.setattr(outputs, 'sole_writer', locked)
    assert _run(capsys, 'chessbench-data', 'puzzles', '--base_url', server.url, '--out', str(out_dir))[0] == 0
    with locked(*args, **kwargs):
      yield

  with FileServer(site) as server:
    monkeypatch.setattr(outputs, 'sole_writer', another_writer_first)
    code, out, err = _run(capsys, 'chessbench-data', 'test', '--base_url', server.url, '--out', str(out_dir))
  assert (code, err) == (0, '')
  names = sorted(['chessbench/data/puzzles.csv', *(f'chessbench/{p.split("/", 1)[1]}' for p in BAGS)])
  assert sorted(json.loads((out_dir / downloads.RECORD).read_text())['files']) == names  # None lost.
  assert _files(out_dir) == names
