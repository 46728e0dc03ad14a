"""How soon `searchless-uci` answers its first move, cold and warm, and whether a `go` keeps its limit.

    .venv/bin/python benchmarks/uci_start.py                                  # the shipped models
    .venv/bin/python benchmarks/uci_start.py --checkpoints pretrained --repeats 3

Each case starts a fresh engine process (`python -m searchless.commands.uci`) and
talks to it through pipes, as a GUI does; times run from the process' start:

* cold: an empty compilation cache (a new temporary folder);
* warm: the same cache again (what every later start of a user's engine sees);
* go first: ``uci``, ``position startpos``, ``go movetime 300`` with no ``isready``
  (lichess-bot and some GUIs do this): the time to the first ``bestmove``;
* isready first: ``uci``, ``isready`` (the time to ``readyok``), then the same go;
* search: the same two with ``Search`` = mcts: a go with a limit must keep it, so
  the overrun is the time from ``go`` to ``bestmove`` beyond 300 ms (`OVERRUN_MS`
  plus Move Overhead allowed), the first go included.

Prints one table row per checkpoint, case and cache state, the medians over
`--repeats`, and each target (cold first move <= 5 s, warm <= 1.5 s) as met or not.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

MOVETIME_MS = 300  # The go's limit.
OVERRUN_MS = 100  # Allowed beyond the limit, plus Move Overhead (the engine's default, 10 ms).
MOVE_OVERHEAD_MS = 10
COLD_TARGET_S, WARM_TARGET_S = 5.0, 1.5


class Engine:
  """One engine process; `send` a line, `until` a line starting with a prefix (its time since start)."""

  def __init__(self, checkpoint: str, cache: str):
    self.start = time.perf_counter()
    self.proc = subprocess.Popen(
      [sys.executable, '-m', 'searchless.commands.uci', '--checkpoint', checkpoint, '--compilation_cache', cache],
      stdin=subprocess.PIPE,
      stdout=subprocess.PIPE,
      stderr=subprocess.DEVNULL,
      text=True,
      bufsize=1,
    )

  def send(self, line: str) -> float:
    assert self.proc.stdin is not None
    self.proc.stdin.write(line + '\n')
    self.proc.stdin.flush()
    return time.perf_counter() - self.start

  def until(self, prefix: str) -> tuple[float, str]:
    assert self.proc.stdout is not None
    for line in self.proc.stdout:
      if line.startswith(prefix):
        return time.perf_counter() - self.start, line.strip()
    raise RuntimeError(f'the engine ended before a line starting with {prefix!r}')

  def quit(self) -> None:
    self.send('quit')
    self.proc.wait(timeout=30)


def one(checkpoint: str, cache: str, *, search: bool, isready: bool) -> dict[str, float]:
  """One start: seconds to uciok, readyok (when asked), the first bestmove, and the go's overrun (ms)."""
  engine = Engine(checkpoint, cache)
  engine.send('uci')
  out = {'uciok': engine.until('uciok')[0]}
  if search:
    engine.send('setoption name Search value mcts')
  if isready:
    engine.send('isready')
    out['readyok'] = engine.until('readyok')[0]
  engine.send('position startpos')
  go = engine.send(f'go movetime {MOVETIME_MS}')
  out['bestmove'], _ = engine.until('bestmove')
  out['overrun_ms'] = (out['bestmove'] - go) * 1000 - MOVETIME_MS
  engine.send('position startpos moves e2e4')  # A second go: the steady state.
  go = engine.send(f'go movetime {MOVETIME_MS}')
  out['overrun2_ms'] = (engine.until('bestmove')[0] - go) * 1000 - MOVETIME_MS
  engine.quit()
  return out


def main(argv: list[str] | None = None) -> None:
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('--checkpoints', nargs='+', default=['pretrained', 'pretrained-transformer'])
  p.add_argument('--repeats', type=int, default=3, help='starts per case and cache state (medians printed)')
  args = p.parse_args(argv)
  print(
    '| checkpoint | search | asks isready | cache | uciok s | readyok s | first bestmove s | go overrun ms '
    '(first / second) |'
  )
  print('| --- | --- | --- | --- | --- | --- | --- | --- |')
  verdicts = []
  for checkpoint in args.checkpoints:
    for search in (False, True):
      for isready in (False, True):
        runs: dict[str, list[dict[str, float]]] = {'cold': [], 'warm': []}
        for _ in range(args.repeats):
          with tempfile.TemporaryDirectory() as cache:
            runs['cold'].append(one(checkpoint, cache, search=search, isready=isready))
            runs['warm'].append(one(checkpoint, cache, search=search, isready=isready))
        for state, got in runs.items():
          med = {k: statistics.median(r[k] for r in got) for k in got[0]}
          print(
            f'| {checkpoint} | {"mcts" if search else "none"} | {"yes" if isready else "no"} | {state} | '
            f'{med["uciok"]:.2f} | {med.get("readyok", float("nan")):.2f} | {med["bestmove"]:.2f} | '
            f'{med["overrun_ms"]:.0f} / {med["overrun2_ms"]:.0f} |',
            flush=True,
          )
          if not search and not isready:
            target = COLD_TARGET_S if state == 'cold' else WARM_TARGET_S
            verdicts.append(
              f'{checkpoint} {state} start to first move: {med["bestmove"]:.2f} s '
              f'(target <= {target} s: {"met" if med["bestmove"] <= target else "NOT met"})'
            )
          worst = max(r['overrun_ms'] for r in got)
          verdicts.append(
            f'{checkpoint} {"mcts" if search else "none"} {"isready" if isready else "go first"} '
            f'{state}: worst first-go overrun {worst:.0f} ms (allowed {OVERRUN_MS + MOVE_OVERHEAD_MS}: '
            f'{"met" if worst <= OVERRUN_MS + MOVE_OVERHEAD_MS else "NOT met"})'
          )
  print()
  for line in verdicts:
    print(line)
  print(f'\n{os.cpu_count()} CPUs; cold = an empty compilation cache; movetime {MOVETIME_MS} ms.')


if __name__ == '__main__':
  main()
