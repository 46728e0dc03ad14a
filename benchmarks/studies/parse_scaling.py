"""Games parsed per second from ONE big PGN input, on 1 and on 2 DirectRunner workers, before and after.

    .venv/bin/python benchmarks/studies/parse_scaling.py --copies 20 --workdir /tmp/parse_scaling

Concatenates the shared real games (``../shared/data/games/*.pgn``, ~5k games)
`--copies` times into one file (the shape of a monthly dump: one input file),
then runs the annotation pipeline's reading and parsing stages on the
multi-processing DirectRunner and prints games/s and ratios:

* before: the reader parses each game as it reads it (one file = one worker),
  on 2 workers;
* after: `games.ReadGames` only splits the text, `games.Distribute`
  spreads the games, `games.ParseGames` parses them, on 1 and on 2 workers
  (the target: >= 1.8x the 1-worker games/s on 2 workers).
"""

import argparse
import logging
import os
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import apache_beam as beam  # noqa: E402
from apache_beam.options.pipeline_options import PipelineOptions  # noqa: E402

from searchless.data import games  # noqa: E402

from searchless.data import pgn  # noqa: E402


def big_input(workdir: pathlib.Path, copies: int) -> tuple[pathlib.Path, int]:
  games = sorted((ROOT.parent / 'shared' / 'data' / 'games').glob('*.pgn'))
  text = ''.join(g.read_text(errors='replace').rstrip('\n') + '\n\n' for g in games)
  out = workdir / f'games_x{copies}.pgn'
  if not out.exists():
    out.write_text(text * copies)
  return out, sum(1 for _ in pgn.iter_raw_games(str(out)))


def parse(path: pathlib.Path, workers: int, distribute: bool) -> float:
  """Seconds to read and parse every game of `path` on `workers` processes (prints the games kept)."""
  options = PipelineOptions(
    [
      '--direct_running_mode=multi_processing',
      f'--direct_num_workers={workers}',
      '--default_sdk_harness_log_level=WARNING',
    ]
  )
  start = time.perf_counter()
  with beam.Pipeline(options=options) as p:
    texts = (
      p
      | beam.Create([str(path)])
      | beam.ParDo(games.ReadGames())
      | beam.Filter(lambda r: isinstance(r, pgn.RawGame)).with_output_types(pgn.RawGame)
    )
    if distribute:
      texts = texts | games.Distribute(lambda raw: raw.location, parallelism=16)
    _ = (
      texts
      | beam.ParDo(games.ParseGames(pgn.GameFilter()))
      | beam.Filter(lambda g: isinstance(g, pgn.Game))
      | beam.combiners.Count.Globally()
      | beam.Map(lambda n: print(f'  {n:,} games kept', flush=True))
    )
  return time.perf_counter() - start


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('--copies', type=int, default=20)
  p.add_argument('--workdir', required=True)
  args = p.parse_args()
  logging.getLogger('apache_beam.runners.portability.local_job_service').setLevel(logging.ERROR)
  workdir = pathlib.Path(args.workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  path, n = big_input(workdir, args.copies)
  print(f'{path}: {n:,} games, {path.stat().st_size / 1e6:.0f} MB; {os.cpu_count()} cores')
  rates = {}
  for name, workers, distribute in (('before', 2, False), ('after', 1, True), ('after', 2, True)):
    seconds = parse(path, workers, distribute)
    rates[name, workers] = n / seconds
    print(f'{name}, {workers} worker(s): {seconds:.1f} s, {rates[name, workers]:,.0f} games/s', flush=True)
  print(f'after, 2 workers / after, 1 worker: {rates["after", 2] / rates["after", 1]:.2f}x')
  print(f'after, 2 workers / before, 2 workers: {rates["after", 2] / rates["before", 2]:.2f}x')


if __name__ == '__main__':
  main()
