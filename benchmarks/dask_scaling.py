"""Action-values per second of the annotation job on Beam's Dask runner: 1 against 2 workers.

    .venv/bin/python benchmarks/dask_scaling.py --games 12 --limit nodes=20000 --workdir /tmp/dask_scaling

Starts a `dask.distributed` cluster on 127.0.0.1 with 1, then 2 worker
processes (one thread each), runs `searchless-annotate` on Beam's Dask runner
over the same boards (the first `--games` games of the shared Lichess sample,
the same node limit) and prints action-values/s of each, their ratio (issue
12's target: >= 1.8x on 2 workers), the same job on the multi-processing
DirectRunner with 2 workers as the named baseline, and whether all of them
wrote the same bytes. The workers run without Dask's statistical profiler
(``distributed.worker.profile.enabled``), as the README recommends.
"""

import argparse
import logging
import os
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import dask  # noqa: E402
import distributed  # noqa: E402

from searchless.engines import launch  # noqa: E402
from searchless.pipelines import annotate as driver  # noqa: E402

GAMES = ROOT.parent / 'shared' / 'data' / 'games' / 'lichess_db_standard_rated_2021-10_first999.pgn'
DASK_RUNNER = 'apache_beam.runners.dask.dask_runner.DaskRunner'


def _files(out: pathlib.Path) -> dict[str, bytes]:
  return {
    str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob('*')) if p.is_file() and p.name != 'manifest.json'
  }


def annotate(common: list[str], out: pathlib.Path, runner: list[str]) -> tuple[float, int]:
  """(seconds, action-values) of one job."""
  start = time.perf_counter()
  manifest = driver.run([*common, '--out', str(out), *runner])
  seconds = time.perf_counter() - start
  return seconds, sum(s['action_values'] for s in manifest.splits.values())


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('--games', type=int, default=12, help='games of the shared Lichess sample to annotate')
  p.add_argument('--limit', default='nodes=20000')
  p.add_argument('--engine_path', default=None)
  p.add_argument('--workdir', required=True)
  p.add_argument('--skip_direct', action='store_true', help='no DirectRunner baseline')
  args = p.parse_args()
  logging.getLogger().setLevel(logging.ERROR)
  workdir = pathlib.Path(args.workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  common = [
    '--input',
    str(GAMES),
    '--max_games',
    str(args.games),
    '--limit',
    args.limit,
    '--test_fraction',
    '0',
    '--engine_path',
    launch.require_stockfish(args.engine_path),
    '--no_progress',
    '--threads',
    '1',
  ]
  # Dask's statistical profiler samples every worker's stacks each 10 ms: on 2 cores it takes ~20% of
  # the engines' CPU (1.45x instead of 1.80x on 4 games). Off, as the README's worker command has it.
  dask.config.set({'distributed.worker.profile.enabled': False})
  print(
    f'{args.games} games of {GAMES.name}, --limit {args.limit}; {os.cpu_count()} cores; '
    'Dask workers without the profiler',
    flush=True,
  )
  rates, outputs = {}, {}
  for workers in (1, 2):
    cluster = distributed.LocalCluster(
      n_workers=workers, threads_per_worker=1, processes=True, host='127.0.0.1', dashboard_address=None
    )
    try:
      cluster.wait_for_workers(workers, timeout=120)  # Time the job, not the workers' start-up.
      out = workdir / f'dask{workers}'
      seconds, values = annotate(
        common, out, ['--runner', DASK_RUNNER, '--dask_client_address', cluster.scheduler_address]
      )
    finally:
      cluster.close()
    rates[f'dask{workers}'] = values / seconds
    outputs[f'dask{workers}'] = _files(out)
    print(
      f'Dask, {workers} worker(s): {values:,} action-values in {seconds:.1f} s = {values / seconds:,.0f}/s', flush=True
    )
  print(f'Dask 2 workers / Dask 1 worker: {rates["dask2"] / rates["dask1"]:.2f}x')
  if not args.skip_direct:
    out = workdir / 'direct2'
    seconds, values = annotate(common, out, ['--direct_num_workers', '2'])
    rates['direct2'] = values / seconds
    outputs['direct2'] = _files(out)
    print(f'DirectRunner, 2 workers: {values:,} action-values in {seconds:.1f} s = {values / seconds:,.0f}/s')
    print(f'Dask 2 workers / DirectRunner 2 workers: {rates["dask2"] / rates["direct2"]:.2f}x')
  same = all(files == outputs['dask1'] for files in outputs.values())
  print(f'same bytes in all {len(outputs)} outputs: {same} ({len(outputs["dask1"])} files)')


if __name__ == '__main__':
  main()
