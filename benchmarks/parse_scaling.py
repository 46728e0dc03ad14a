"""Games parsed per second from ONE big PGN input, on 1 and on 2 DirectRunner workers.

    .venv/bin/python benchmarks/parse_scaling.py --copies 20 --workdir /tmp/parse_scaling

Concatenates the shared real games (``../shared/data/games/*.pgn``, ~5k games)
`--copies` times into one file (the shape of a monthly dump: one input file),
then runs the annotation pipeline's reading and parsing stages
(`annotate.ReadGames` -> Reshuffle -> `annotate.ParseGames`, counted) on the
multi-processing DirectRunner with 1 and with 2 workers, and prints games/s of
each and their ratio (issue 12's target: >= 1.8x on 2 workers).
"""

import argparse
import os
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import apache_beam as beam  # noqa: E402
from apache_beam.options.pipeline_options import PipelineOptions  # noqa: E402

from searchless.data import annotate  # noqa: E402
from searchless.data import pgn  # noqa: E402


def big_input(workdir: pathlib.Path, copies: int) -> tuple[pathlib.Path, int]:
  games = sorted((ROOT.parent / 'shared' / 'data' / 'games').glob('*.pgn'))
  text = ''.join(g.read_text(errors='replace').rstrip('\n') + '\n\n' for g in games)
  out = workdir / f'games_x{copies}.pgn'
  if not out.exists():
    out.write_text(text * copies)
  return out, sum(1 for _ in pgn.iter_raw_games(str(out)))


def parse(path: pathlib.Path, workers: int) -> float:
  """Seconds to read, reshuffle and parse every game of `path` on `workers` processes (prints the count)."""
  options = PipelineOptions(['--direct_running_mode=multi_processing', f'--direct_num_workers={workers}',
                             '--default_sdk_harness_log_level=WARNING'])
  start = time.perf_counter()
  with beam.Pipeline(options=options) as p:
    _ = (p | beam.Create([str(path)]) | beam.ParDo(annotate.ReadGames()) | beam.Reshuffle()
         | beam.ParDo(annotate.ParseGames(pgn.GameFilter())).with_outputs(annotate.ParseGames.SKIPPED, main='games')
         ).games | beam.combiners.Count.Globally() | beam.Map(print)
  return time.perf_counter() - start


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('--copies', type=int, default=20)
  p.add_argument('--workdir', required=True)
  args = p.parse_args()
  workdir = pathlib.Path(args.workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  path, n = big_input(workdir, args.copies)
  print(f'{path}: {n:,} games, {path.stat().st_size / 1e6:.0f} MB; {os.cpu_count()} cores')
  rates = {}
  for workers in (1, 2):
    seconds = parse(path, workers)
    rates[workers] = n / seconds
    print(f'{workers} worker(s): {seconds:.1f} s, {rates[workers]:,.0f} games/s', flush=True)
  print(f'2 workers / 1 worker: {rates[2] / rates[1]:.2f}x')


if __name__ == '__main__':
  main()
