"""The CPUs a process runs on: all its threads moved at once (`pin`), and a share of the host for each of a job's
local worker processes (`claim`).

XLA sizes its CPU thread pools from the CPUs the process may use when its backend starts. A local Beam job runs one
worker process per core, each with its own model: unpinned, N workers on N cores start N thread pools of N threads
that the kernel moves between the cores; pinned, each worker's threads stay on a core of their own (2 workers on 2
cores reviewed 300 games in 32-33 s against 36-37 s unpinned: benchmarks/RESULTS.md).
"""

import fcntl
import os

_HELD: list[int] = []  # The lock files of the slots this process holds (open until it ends).


def pin(cpus: set[int]) -> None:
  """Every thread of this process on `cpus` (threads started later inherit their starter's CPUs)."""
  for task in os.listdir('/proc/self/task'):
    try:
      os.sched_setaffinity(int(task), cpus)
    except OSError:  # A thread that just ended.
      pass


def claim(directory: str, workers: int) -> list[int] | None:
  """Pins this process to a slot of the host: the CPUs it may run on, cut into `workers` equal slots; the first
  slot no other process holds (a lock file in `directory`, held until this process ends). Returns the slot's CPUs,
  or None and nothing changes: fewer CPUs than workers, or every slot held. Call it before JAX's backend starts.
  """
  if _HELD:  # Claimed already: the slot stays.
    return sorted(os.sched_getaffinity(0))
  cpus = sorted(os.sched_getaffinity(0))
  share = len(cpus) // workers if workers > 0 else 0
  if share < 1:
    return None
  for slot in range(workers):
    fd = os.open(os.path.join(directory, f'slot-{slot}'), os.O_CREAT | os.O_RDWR, 0o600)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      os.close(fd)
      continue
    _HELD.append(fd)
    mine = cpus[slot * share : (slot + 1) * share]
    pin(set(mine))
    return mine
  return None
