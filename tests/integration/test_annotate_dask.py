"""The annotation pipeline on Beam's Dask runner, against a real dask.distributed cluster on 127.0.0.1: a job whose
driver is killed resumes there, and writes the files the DirectRunner writes."""

import json
import signal
import sys

import psutil
import pytest

from searchless.core import bags
from searchless.data import resume
from searchless.data import shards
from searchless.pipelines import annotate as driver

from helpers import alive, signal_when

distributed = pytest.importorskip('distributed', reason="the 'dask' extra is not installed")

DASK_RUNNER = 'apache_beam.runners.dask.dask_runner.DaskRunner'
KINDS = ('action_value', 'state_value', 'behavioral_cloning', 'board_value')


def _games(tmp_path, lichess_999, count):
  lines = lichess_999.read_text().splitlines(keepends=True)
  starts = [i for i, line in enumerate(lines) if line.startswith('[Event ')]
  path = tmp_path / 'games.pgn'
  path.write_text(''.join(lines[: starts[count]]))
  return path


def _files(out):
  """{relative path: bytes} of every file the job left, the manifest excepted."""
  return {
    str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob('*')) if p.is_file() and p.name != 'manifest.json'
  }


@pytest.mark.engine
@pytest.mark.slow
def test_a_killed_job_on_a_dask_cluster_resumes_and_writes_the_same_files_as_the_direct_runner(
  tmp_path, lichess_999, stockfish
):
  games = _games(tmp_path, lichess_999, 2)
  common = [
    '--input',
    str(games),
    '--limit',
    'nodes=100',
    '--test_fraction',
    '0.5',
    '--engine_path',
    stockfish,
    '--no_progress',
    '--chunk_boards',
    '10',
  ]
  direct = driver.run([*common, '--out', str(tmp_path / 'direct'), '--direct_running_mode', 'in_memory'])

  before = {p.pid for p in psutil.Process().children(recursive=True)}
  cluster = distributed.LocalCluster(
    n_workers=2, threads_per_worker=1, processes=True, host='127.0.0.1', dashboard_address=None
  )
  try:
    cluster.wait_for_workers(2, timeout=120)  # The cluster returns once the nannies start, not their workers.
    workers = cluster.scheduler_info['workers']
    assert len(workers) == 2 and all(address.startswith('tcp://127.0.0.1:') for address in workers)
    on_dask = [*common, '--out', str(tmp_path / 'dask'), '--runner', DASK_RUNNER]
    # Two lanes, not the default 4x the cluster's threads (8): each GroupByKey costs Dask lanes^2 tasks, and the
    # files do not depend on the lanes (the direct run has 16); at 8 the resumed run took 160 s of this test's 190.
    on_dask += ['--dask_client_address', cluster.scheduler_address, '--parallelism', '2']
    # The job's driver is killed (SIGKILL: nothing runs at its exit) once it kept some work; the cluster lives on.
    killed, _, _ = signal_when(
      [sys.executable, '-m', 'searchless.pipelines.annotate', *on_dask],
      lambda: len(resume.pieces(str(tmp_path / 'dask'))) >= 2,
      signal.SIGKILL,
      group=False,
    )
    assert killed == -signal.SIGKILL
    kept = resume.items_held(resume.pieces(str(tmp_path / 'dask')))
    dask = driver.run(on_dask)  # The same command resumes: only the boards no piece holds go to the engines.
    # The workers are this process's grandchildren; each partition's engine was closed at its teardown.
    assert [p for p in psutil.Process().children(recursive=True) if 'stockfish' in p.name()] == []
  finally:
    cluster.close()
  # Scheduler, nannies, workers and engines are gone (multiprocessing's resource tracker lives on with this process).
  left = [
    p
    for p in psutil.Process().children(recursive=True)
    if p.pid not in before and alive(p) and 'resource_tracker' not in ' '.join(p.cmdline())
  ]
  assert left == []

  # Byte for byte the same files (each shard's records are sorted), no temporary folder left.
  files = _files(tmp_path / 'direct')
  assert _files(tmp_path / 'dask') == files
  assert sorted(files) == sorted(
    ['failures.jsonl', 'skipped.jsonl', *(f'{split}/{kind}_data.bag' for split in ('test', 'train') for kind in KINDS)]
  )
  assert not (tmp_path / 'dask' / shards.TMP_DIR).exists()
  # The same counts, though the Dask runner reports no metrics: they are data.
  assert dask.games == direct.games == {**direct.games, 'read': 2, 'kept': 2, 'skipped': {}}
  assert dask.splits == direct.splits and dask.split == direct.split and dask.outputs.keys() == direct.outputs.keys()
  assert sum(s['boards'] for s in direct.splits.values()) > 100
  assert direct.splits['train']['action_values'] == len(
    bags.read_records(str(tmp_path / 'direct' / 'train' / 'action_value_data.bag'), 'action_value')
  )
  assert dask.engine['id'] == direct.engine['id'] and 'ms_per_board' not in dask.timings
  assert dask.timings['boards_kept_from_an_interrupted_run'] >= kept > 0  # Workers may commit after the kill.
  assert 'ms_per_board' in direct.timings  # Runner metrics stay a bonus where the runner has them.
  assert json.loads((tmp_path / 'dask' / 'manifest.json').read_text())['games']['read'] == 2
