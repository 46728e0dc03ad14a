"""`plumbing.cores.claim`: each local worker process on a share of its own of the host's CPUs."""

import os
import subprocess
import sys

import pytest

CLAIM = """
import os, sys
from searchless.plumbing import cores
print(cores.claim(sys.argv[1], int(sys.argv[2])), sorted(os.sched_getaffinity(0)), flush=True)
sys.stdin.read()  # Holds its slot until told to end.
"""


def _claimer(folder, workers: int) -> subprocess.Popen:
  argv = [sys.executable, '-c', CLAIM, str(folder), str(workers)]
  return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def test_workers_claim_distinct_slots_and_a_slot_frees_when_its_process_ends(tmp_path):
  cpus = sorted(os.sched_getaffinity(0))
  if len(cpus) < 2:
    pytest.skip('needs 2 CPUs')
  share = len(cpus) // 2
  halves = [cpus[:share], cpus[share : 2 * share]]
  processes, lines = [], []
  for _ in range(3):  # One after another: each has claimed (or not) before the next starts.
    processes.append(_claimer(tmp_path, 2))
    lines.append(processes[-1].stdout.readline().strip())
  assert lines == [f'{halves[0]} {halves[0]}', f'{halves[1]} {halves[1]}', f'None {cpus}']
  processes[0].stdin.close()
  processes[0].wait(30)
  processes.append(_claimer(tmp_path, 2))  # The slot the ended process held is free again.
  assert processes[-1].stdout.readline().strip() == f'{halves[0]} {halves[0]}'
  for process in processes[1:]:
    process.stdin.close()
    process.wait(30)


def test_more_workers_than_cpus_changes_nothing(tmp_path):
  cpus = sorted(os.sched_getaffinity(0))
  process = _claimer(tmp_path, len(cpus) + 1)
  assert process.stdout.readline().strip() == f'None {cpus}'
  process.stdin.close()
  process.wait(30)
