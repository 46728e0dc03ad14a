"""Nodes per second of Stockfish builds: Debian's binary against ones built for this CPU.

    tools/build_stockfish.sh                       # .stockfish/bin/stockfish-17-<native arch>
    ARCH=x86-64 tools/build_stockfish.sh           # .stockfish/bin/stockfish-17-x86-64 (Debian's generic flags)
    .venv/bin/python benchmarks/stockfish_builds.py     # the Debian binary and every .stockfish/bin build

Runs each binary's own ``bench`` (16 MB hash, 1 thread, depth 13, its default
positions) `--repeats` times, interleaved so that the machine's load hits every
build alike, and prints the median nodes/s and its ratio to the first binary.
Nodes/s compares builds of ONE version (the same search and network: the bench
node counts are equal); across versions the networks and searches differ, so
their nodes are not worth the same.
"""

import argparse
import pathlib
import re
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from searchless.engines import launch  # noqa: E402


def bench(binary: str) -> tuple[int, int]:
  """(nodes searched, nodes/s) of one `bench` run."""
  out = subprocess.run([binary, 'bench'], capture_output=True, text=True, check=True, timeout=600)
  text = out.stdout + out.stderr
  nodes = int(re.search(r'Nodes searched\s*:\s*(\d+)', text).group(1))
  nps = int(re.search(r'Nodes/second\s*:\s*(\d+)', text).group(1))
  return nodes, nps


def engine_name(binary: str) -> str:
  out = subprocess.run([binary], input='uci\nquit\n', capture_output=True, text=True, timeout=60).stdout
  names = [line[len('id name ') :] for line in out.splitlines() if line.startswith('id name ')]
  return names[0] if names else '?'


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('binaries', nargs='*', help="Stockfish binaries (default: Debian's, then .stockfish/bin/*)")
  p.add_argument('--repeats', type=int, default=5, help='bench runs per binary (median reported)')
  args = p.parse_args()
  binaries = args.binaries or [b for b in [launch.find_stockfish()] if b] + sorted(
    str(b) for b in (ROOT / '.stockfish' / 'bin').glob('stockfish-*')
  )
  runs: dict[str, list[tuple[int, int]]] = {b: [] for b in binaries}
  for _ in range(args.repeats):
    for b in binaries:
      runs[b].append(bench(b))
  base = statistics.median(nps for _, nps in runs[binaries[0]])
  print(f'{"binary":50s} {"engine":22s} {"sha256":12s} {"nodes (bench)":>13s} {"nodes/s (median)":>17s} {"ratio":>6s}')
  for b in binaries:
    nps = statistics.median(n for _, n in runs[b])
    nodes = runs[b][0][0]
    print(
      f'{b:50s} {engine_name(b):22s} {(launch.binary_sha256(b) or "?")[:12]:12s} {nodes:13,d} {nps:17,.0f} '
      f'{nps / base:6.2f}x'
    )


if __name__ == '__main__':
  main()
