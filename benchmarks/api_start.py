"""How soon the Python API plays its first move in a fresh process, cold and warm, with and without search.

    .venv/bin/python benchmarks/api_start.py                      # the shipped model, 3 starts per case
    .venv/bin/python benchmarks/api_start.py --spec search:pretrained,sims=64 --repeats 5

Each start is a new process (`python -c`), timed from before its first import:
``Player.load('pretrained')`` then ``play(chess.Board())``, and an agent spec
(default ``search:pretrained,time=0.3``: MCTS on a 0.3 s budget) built with
`agents.from_spec` then its first ``play``. Cold: an empty persistent
compilation cache (a new temporary folder in ``$SEARCHLESS_COMPILATION_CACHE``);
warm: the same folder again.
Prints the medians (seconds) and the load average; the targets on 2 idle cores,
from ``Player.load`` to the first move, and from `from_spec` to the agent's first
move: <= 5 s cold, <= 1.5 s warm (the imports before them, mostly JAX and orbax,
are timed on their own). A search with a fixed amount of work (``sims=256``)
adds that work's time to its first move: 256 simulations of the graph model take
about 1.3 s on 2 cores once every shape is compiled, more while they compile.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = """
import json, sys, time
start = time.perf_counter()
import chess
from searchless.play import agents, player
out = {'imports': time.perf_counter() - start}
p = player.Player.load('pretrained')
out['player loaded'] = time.perf_counter() - start
p.play(chess.Board())
out['player first move'] = time.perf_counter() - start
out['load to first move'] = out['player first move'] - out['imports']
if sys.argv[1]:
  begin = time.perf_counter()
  agent = agents.from_spec(sys.argv[1])
  out['agent ready'] = time.perf_counter() - begin
  agent.play(chess.Board())
  out['agent first move'] = time.perf_counter() - begin
  agent.close()
print(json.dumps(out))
"""


def one(spec: str, cache: str) -> dict[str, float]:
  env = dict(os.environ, SEARCHLESS_COMPILATION_CACHE=cache)
  done = subprocess.run([sys.executable, '-c', CHILD, spec], env=env, capture_output=True, text=True, check=True)
  return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('--spec', default='search:pretrained,time=0.3', help="an agent spec ('' : the player only)")
  p.add_argument('--repeats', type=int, default=3)
  args = p.parse_args(argv)
  runs: dict[str, list[dict[str, float]]] = {'cold': [], 'warm': []}
  for _ in range(args.repeats):
    with tempfile.TemporaryDirectory() as cache:
      runs['cold'].append(one(args.spec, cache))
      runs['warm'].append(one(args.spec, cache))
  keys = list(runs['cold'][0])
  print('| cache | ' + ' | '.join(f'{k} s' for k in keys) + ' |')
  print('| --- |' + ' --- |' * len(keys))
  for state, got in runs.items():
    print(f'| {state} | ' + ' | '.join(f'{statistics.median(r[k] for r in got):.2f}' for k in keys) + ' |')
  print(
    f'\nMedians of {args.repeats} fresh processes; player times from the process start (imports: jax, haiku,'
    f' orbax, chess), "load to first move" from the Player.load call; agent times from from_spec ({args.spec}:'
    f' its first move includes its search). {os.cpu_count()} CPUs, load average'
    f' {" ".join(f"{x:.2f}" for x in os.getloadavg())}.'
  )
  median = lambda state, key: statistics.median(r[key] for r in runs[state])
  for what, key in (('Player.load', 'load to first move'), ('from_spec', 'agent first move')):
    if key in runs['cold'][0]:
      cold, warm = median('cold', key), median('warm', key)
      print(
        f'From {what} to the first move: cold {cold:.2f} s (target 5), warm {warm:.2f} s (target 1.5):'
        f' {cold / 5:.2f}x and {warm / 1.5:.2f}x the targets.'
      )


if __name__ == '__main__':
  main()
