"""searchless-download against a file server on 127.0.0.1 (tests/http_fixture.py): the published layout served
from the vendored fixtures, then fetched, resumed, checked and refused as a user would meet it. Nothing here
reaches beyond this machine."""

import hashlib
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time
import zipfile

import chess
import pytest

from searchless.commands import download
from searchless.core import published

from helpers import COMPAT, play_legal_moves, uci_engine
from http_fixture import FileServer

BAGS = {  # Where the published test bags are, in the bucket -> the vendored samples served there.
  'searchless_chess/data/test/action_value_data.bag': COMPAT / 'action_value_sample.bag',
  'searchless_chess/data/test/behavioral_cloning_data.bag': COMPAT / 'behavioral_cloning_sample.bag',
  'searchless_chess/data/test/state_value_data.bag': COMPAT / 'state_value_sample.bag',
}
AV = '/searchless_chess/data/test/action_value_data.bag'
MONTH = 'lichess_db_standard_rated_2024-01.pgn.zst'


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
  (root / 'searchless_chess/data/puzzles.csv').write_bytes(os.urandom(3_000_000))
  return root


def _run(capsys, *argv: str) -> tuple[int, str, str]:
  try:
    download.main([*argv, '--no_progress'])
    code = 0
  except SystemExit as exit:
    code = exit.code
  out, err = capsys.readouterr()
  return code, out, err


def _files(root: pathlib.Path) -> list[str]:
  return sorted(p.relative_to(root).as_posix() for p in root.rglob('*') if p.is_file() and p.name != '.lock')


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


def test_a_dropped_connection_resumes_fetching_only_the_rest(site, tmp_path, capsys):
  with FileServer(site, drop_after=50_000) as server:
    code, out, err = _run(capsys, 'chessbench-data', 'test', '--base_url', server.url, '--out', str(tmp_path / 'd'))
  assert (code, err) == (0, '')
  assert out.startswith('fetched 3 files (146.4 KB), 0 already there')
  assert server.gets(AV) == [None, 'bytes=50000-']  # The rest only, after the drop.
  for path, source in BAGS.items():  # The bags that are smaller than the drop came in one GET.
    assert (tmp_path / 'd' / 'chessbench' / path.split('/', 1)[1]).read_bytes() == source.read_bytes()
  assert _files(tmp_path / 'd') == sorted('chessbench/' + p.split('/', 1)[1] for p in BAGS)


def test_a_server_without_ranges_restarts_the_file_cleanly(site, tmp_path, capsys):
  out_dir = tmp_path / 'd'
  part = out_dir / 'chessbench/data/test/action_value_data.bag.part'
  part.parent.mkdir(parents=True)
  part.write_bytes(b'left by an earlier run' * 100)
  with FileServer(site, ranges=False, drop_after=50_000) as server:
    code, _, err = _run(capsys, 'chessbench-data', 'test', '--base_url', server.url, '--out', str(out_dir))
  assert (code, err) == (0, '')
  assert server.gets(AV) == ['bytes=2200-', 'bytes=50000-']  # Each answered whole (200): 2 restarts.
  assert (out_dir / 'chessbench/data/test/action_value_data.bag').read_bytes() == BAGS[AV[1:]].read_bytes()
  assert not part.exists()


def test_checksums_are_checked_and_a_mismatch_leaves_nothing(site, tmp_path, capsys):
  out_dir = tmp_path / 'd'
  with FileServer(site) as server:
    code, out, err = _run(capsys, 'lichess-games', '2024-01', '--base_url', server.url, '--out', str(out_dir))
    assert (code, err) == (0, '')
    assert (out_dir / 'lichess/standard' / MONTH).read_bytes() == (site / 'standard' / MONTH).read_bytes()
    code, out, err = _run(capsys, 'lichess-games', '2024-02', '--base_url', server.url, '--out', str(out_dir))
    assert code == 2 and out == '' and err.count('\n') == 1
    assert err.startswith(f'error: {server.url}/standard/lichess_db_standard_rated_2024-02.pgn.zst: sha256 ')
    assert f'is not the published {"0" * 64} ({server.url}/standard/sha256sums.txt): removed it' in err
  assert _files(out_dir) == [f'lichess/standard/{MONTH}']  # Nothing of 2024-02, not even a .part.
  with FileServer(site, goog_hash=True) as server:  # Google Cloud Storage's MD5 header, checked the same way.
    server.wrong_md5.add('/searchless_chess/data/test/state_value_data.bag')
    code, _, err = _run(capsys, 'chessbench-data', 'test', '--base_url', server.url, '--out', str(out_dir))
  assert code == 2 and 'state_value_data.bag: md5 ' in err and '(x-goog-hash): removed it' in err
  assert not (out_dir / 'chessbench/data/test/state_value_data.bag').exists()


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
  assert (code, err) == (0, '')
  assert {method for method, _, _ in server.log} == {'HEAD'}
  lines = out.splitlines()
  assert (
    lines[0] == f'{server.url}/searchless_chess/data/puzzles.csv  3.0 MB  -> {tmp_path}/d/chessbench/data/puzzles.csv'
  )
  assert lines[1].startswith(f'{server.url}/searchless_chess/data/eco_openings.pgn  error: ') and '404' in lines[1]
  assert lines[-1] == '5 files to fetch, 3.1 MB; nothing fetched (--dry_run)'
  assert not (tmp_path / 'd').exists()


def test_ctrl_c_keeps_the_part_and_a_rerun_completes(site, tmp_path):
  out_dir = tmp_path / 'd'
  argv = [sys.executable, '-m', 'searchless.commands.download', 'chessbench-data', 'puzzles', '--out', str(out_dir)]
  argv.append('--no_progress')
  part = out_dir / 'chessbench/data/puzzles.csv.part'
  with FileServer(site, bytes_per_second=400_000) as server:
    process = subprocess.Popen(
      [*argv, '--base_url', server.url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
      start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not (part.exists() and part.stat().st_size > 100_000) and time.monotonic() < deadline:
      time.sleep(0.05)
    os.killpg(process.pid, signal.SIGINT)
    out, err = process.communicate(timeout=30)
  assert process.returncode == 130, err
  assert err.count('\n') == 1 and err.startswith('interrupted; 0 of 1 files fetched into ')
  assert 'run the same command again to resume' in err
  kept = part.stat().st_size
  assert 100_000 < kept < 3_000_000
  with FileServer(site) as server:
    done = subprocess.run([*argv, '--base_url', server.url], capture_output=True, text=True, timeout=60)
  assert done.returncode == 0, done.stderr
  assert server.gets('/searchless_chess/data/puzzles.csv') == [f'bytes={kept}-']
  assert (out_dir / 'chessbench/data/puzzles.csv').read_bytes() == (
    site / 'searchless_chess/data/puzzles.csv'
  ).read_bytes()
  assert not part.exists()


def test_one_download_at_a_time_in_a_folder(site, tmp_path, capsys):
  from searchless.core import folder_lock

  with folder_lock.FolderLock(tmp_path / 'd', 'searchless-download', '--out'):
    with FileServer(site) as server:
      code, _, err = _run(capsys, 'chessbench-data', 'test', '--base_url', server.url, '--out', str(tmp_path / 'd'))
  assert code == 2 and f'{tmp_path / "d"} is in use by another searchless-download (pid {os.getpid()} on ' in err
