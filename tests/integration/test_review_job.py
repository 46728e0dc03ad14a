"""``searchless-review`` end to end on real Lichess games and a small model: an interrupted review (Ctrl-C, then
kill -9) resumes and writes the bytes of an uninterrupted one; a changed input and a second writer are refused; the
DirectRunner and Beam's Dask runner (a real cluster on 127.0.0.1) write the same records."""

import json
import os
import signal
import sys

import pytest

from searchless.data import resume
from searchless.pipelines import review as driver

from helpers import signal_when

pytestmark = pytest.mark.slow
DASK_RUNNER = 'apache_beam.runners.dask.dask_runner.DaskRunner'
IN_MEMORY = ['--direct_running_mode', 'in_memory']  # One process: the model compiles once for the module.


def _games(lichess_999, path, count):
  lines = lichess_999.read_text().splitlines(keepends=True)
  starts = [i for i, line in enumerate(lines) if line.startswith('[Event ')]
  path.write_text(''.join(lines[: starts[count]]))
  return path


def _files(out):
  """{name: bytes} of what a review leaves, the summary (its wall time) and plot excepted."""
  return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.is_file() and p.suffix == '.jsonl'}


@pytest.fixture(scope='module')
def games(lichess_999, tmp_path_factory):
  return _games(lichess_999, tmp_path_factory.mktemp('games') / 'games.pgn', 10)


@pytest.fixture(scope='module')
def reference(games, model_checkpoint, tmp_path_factory):
  out = tmp_path_factory.mktemp('reference') / 'out'
  summary = driver.run(
    [str(games), '--checkpoint', str(model_checkpoint), '--out', str(out), '--no_progress', *IN_MEMORY]
  )
  return out, summary


def test_a_review_holds_every_game_and_its_summary(reference, games):
  out, summary = reference
  lines = [json.loads(line) for line in (out / 'games.jsonl').read_text().splitlines()]
  assert len(lines) == 10 and summary['games']['reviewed'] == 10 and summary['games']['skipped'] == {}
  assert summary['positions'] == sum(len(line['moves']) + 1 for line in lines)
  first = lines[0]
  assert set(first) == {'key', 'location', 'headers', 'start_fen', 'players', 'moves'}
  assert first['key'].startswith('https://lichess.org/') and first['location'].startswith(f'{games}:')
  # Each rated player counts once in the band of its rating.
  assert sum(band['count'] for band in summary['bands']) == 20
  assert json.loads((out / 'summary.json').read_text())['bands'] == summary['bands']
  assert (out / 'accuracy_by_rating.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
  assert not (out / resume.FOLDER).exists()


def test_ctrl_c_then_kill_9_then_a_rerun_writes_the_same_bytes(reference, games, model_checkpoint, tmp_path, capsys):
  out = tmp_path / 'out'
  # One worker process: Ctrl-C reaches the driver as an interrupt (an in-memory runner's step wraps it).
  argv = [str(games), '--checkpoint', str(model_checkpoint), '--out', str(out), '--chunk_games', '1']
  argv += ['--direct_num_workers', '1']
  cmd = [sys.executable, '-m', 'searchless.pipelines.review', *argv]
  refused = []

  def kept(count):
    def ready():
      if len(resume.pieces(str(out))) < count:
        return False
      if not refused:  # While the job runs, a second one on the same folder is refused.
        with pytest.raises(SystemExit) as stopped:
          driver.main([*argv, '--no_progress'])
        refused.append((stopped.value.code, capsys.readouterr().err))
      return True

    return ready

  status, _, err = signal_when(cmd, kept(1))
  assert refused[0][0] == 2 and '--out' in refused[0][1] and refused[0][1].count('\n') == 1, refused
  held = resume.items_held(resume.pieces(str(out)))
  assert status == 130 and err.splitlines()[-1].startswith(
    f'interrupted; kept {held} chunks of reviewed positions in '
  ), err
  assert not (out / 'games.jsonl').exists()  # Nothing half-written.

  status, _, _ = signal_when(cmd, kept(len(resume.pieces(str(out))) + 2), signal.SIGKILL)
  assert status == -signal.SIGKILL
  held = resume.items_held(resume.pieces(str(out)))
  assert held > 0

  stamp = os.stat(games)
  os.utime(games, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 10**9))  # The input changed (its time, here).
  with pytest.raises(SystemExit) as stopped:
    driver.main([*argv, '--no_progress'])
  said = capsys.readouterr().err
  assert stopped.value.code == 2 and said.count('\n') == 1 and f'from {games} of ' in said, said
  os.utime(games, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))

  summary = driver.run([*argv, '--no_progress', *IN_MEMORY])
  assert summary['games']['reviewed'] == 10 and 0 < summary['positions_from_an_interrupted_run'] < summary['positions']
  assert _files(out) == _files(reference[0])
  assert not (out / resume.FOLDER).exists()


def test_the_dask_runner_writes_the_direct_runners_records(lichess_999, model_checkpoint, tmp_path):
  distributed = pytest.importorskip('distributed', reason="the 'dask' extra is not installed")
  games = _games(lichess_999, tmp_path / 'three.pgn', 3)
  common = [str(games), '--checkpoint', str(model_checkpoint), '--no_progress', '--min_rating', '1000']
  direct = driver.run([*common, '--out', str(tmp_path / 'direct'), *IN_MEMORY])
  cluster = distributed.LocalCluster(
    n_workers=1, threads_per_worker=1, processes=True, host='127.0.0.1', dashboard_address=None
  )  # One worker: the model loads in one more process only.
  try:
    cluster.wait_for_workers(1, timeout=120)
    on_dask = ['--runner', DASK_RUNNER, '--dask_client_address', cluster.scheduler_address, '--parallelism', '2']
    dask = driver.run([*common, '--out', str(tmp_path / 'dask'), *on_dask])
  finally:
    cluster.close()
  assert _files(tmp_path / 'dask') == _files(tmp_path / 'direct')
  assert len((tmp_path / 'direct' / 'games.jsonl').read_text().splitlines()) == direct['games']['reviewed'] == 3
  assert {k: v for k, v in dask.items() if k not in ('wall_seconds', 'command', 'output_dir')} == {
    k: v for k, v in direct.items() if k not in ('wall_seconds', 'command', 'output_dir')
  }


def test_limit_min_rating_and_sample_pick_the_games_annotate_would(reference, games, model_checkpoint, tmp_path):
  import hashlib

  import chess.pgn

  heads = []
  with open(games, encoding='utf-8') as f:
    while (headers := chess.pgn.read_headers(f)) is not None:
      heads.append(headers)
  first = heads[:6]  # --limit 6: the first six games of the file.
  rated = [h['Site'] for h in first if min(int(h['WhiteElo']), int(h['BlackElo'])) >= 1600]
  sample = sorted(rated, key=lambda key: hashlib.sha256(f'sample {key}'.encode()).digest())[:2]
  out = tmp_path / 'out'
  argv = [str(games), '--checkpoint', str(model_checkpoint), '--out', str(out), '--no_progress', *IN_MEMORY]
  summary = driver.run([*argv, '--limit', '6', '--min_rating', '1600', '--sample_games', '2'])
  lines = [json.loads(line) for line in (out / 'games.jsonl').read_text().splitlines()]
  assert sorted(line['key'] for line in lines) == sorted(sample) and len(rated) > 2
  assert summary['games']['read'] == 6 and summary['games']['skipped'] == {'filtered_elo': 6 - len(rated)}
  by_key = {json.loads(line)['key']: line for line in (reference[0] / 'games.jsonl').read_text().splitlines()}
  assert all(by_key[line['key']] == json.dumps(line, ensure_ascii=False) for line in lines)  # The same reviews.
