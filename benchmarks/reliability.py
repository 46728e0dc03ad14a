"""Reliability: faults fed to the real programs, counted as tried / crashes / lost.

    .venv/bin/python benchmarks/reliability.py --workdir /tmp/reliability
    .venv/bin/python benchmarks/reliability.py --workdir /tmp/reliability --only 8,9,10   # some of them

Ten campaigns, each against the real component (subprocesses, a real
Stockfish, Beam's multi-process DirectRunner, orbax checkpoints):

1. **Malformed games**: 1,200 Lichess games, each with one generated fault
   (`tests/faults.py`: cuts, garbage, lost lines, BOMs, moves after the result,
   ...), annotated by ``searchless-annotate`` (2 workers, ``--mode board``,
   depth 1). Lost: input lines in no game, games read but neither kept nor
   skipped with a reason, kept boards in no record and not in failures.
2. **Hostile UCI lines**: 1,200 generated lines to ``searchless-uci
   --checkpoint pretrained``, then ``isready`` and a search. Crash: the process
   ended; hang: no ``readyok`` within 60 s.
3. **Engine kills**: Stockfish killed with SIGKILL `--kills` times while 12 games
   are annotated. Lost / duplicated: boards of the games missing from, or
   repeated in, the state-value records (failures counted apart).
4. **Trainer kills**: ``searchless-train`` killed with SIGKILL at a random
   moment, then rerun, `--trainer_kills` times. Lost: a resumed run whose final
   parameters differ from an uninterrupted run's in any bit.
5. **Bad command lines**: missing, empty, cut or garbage inputs, a directory,
   an unwritable output, a program that is no engine, out-of-range options,
   corrupt records. Crash: anything but exit status 2 with one ``error:`` line
   (a traceback included).
6. **Annotation kills**: ``searchless-annotate`` and its workers SIGKILLed at a
   random moment (a reboot), then rerun, `--annotation_kills` times. Lost: a
   resumed dataset that differs in any byte from an uninterrupted run's.
7. **Writers, disks and flags**: a second ``searchless-annotate`` on a folder
   another one is writing, a disk that fills during an annotation (a tmpfs in a
   mount namespace of its own; left out where ``unshare -rm`` is not allowed),
   and an abbreviated flag to each command. Crash: a second writer or a mistyped
   flag that runs, anything but exit status 2 (with one ``error:`` line for the
   writer and the disk); lost: a full disk that keeps none of the work done.
8. **Downloads** (`reliability_downloads.py`): ``searchless-download`` and
   streamed inputs against a file server on 127.0.0.1: files republished
   between runs and during a download, a mirror that sends no checksum, killed
   unpacks and `--download_kills` SIGKILLs; with no checksum published, an HTML
   error page, a JSON error body, a short and a long Content-Length, a truncated
   ``.zst``, a ``.zip`` with a bad CRC; a streamed ``searchless-import`` input
   that drops half-way and then changes (a server with no validator, one with);
   a server that refuses HEAD; `--download_races` pairs of downloads started
   together on one folder. Crash: an exit status or stderr other than expected;
   lost: any wrong file kept, a dataset made from a stream that changed, or an
   entry lost from ``downloads.json``.
9. **A bug's traceback**: ``searchless-puzzles`` on a copy of the shipped model
   whose saved probe has one entry made a pair (a file nothing checks: numpy's
   ``ValueError`` deep in the load), and on a checkpoint that is not there.
   Crash: the bug without its whole traceback (exit status 1, the
   ``ValueError`` last), or the mistake in anything but one ``error:`` line.
10. **Kept work no longer true**: ``searchless-import`` stopped by Ctrl-C at a
   random piece, its input then changed (its first game gone), and rerun;
   ``searchless-annotate`` stopped the same way, then one kept piece cut to
   zero length or garbled, or a rerun with another ``--limit``;
   `--kept_work_trials` times each. Crash: a changed input or limit not refused
   in one ``error:`` line, an unreadable piece not said in one ``warning:``
   line, or a traceback; lost: a refusal that dropped a piece, a ``--restart``
   whose records differ from a fresh run's, or a redone dataset that differs in
   any byte from an uninterrupted run's.
"""

import argparse
import collections
import json
import os
import pathlib
import random
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import psutil

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / 'tests'))

from faults import hostile_uci_line, mutate_game  # noqa: E402
from searchless.core import bags  # noqa: E402
from searchless.data import pgn  # noqa: E402
from searchless.engines import launch  # noqa: E402
from searchless.model import loading  # noqa: E402

import reliability_downloads  # noqa: E402  # Campaign 8, in a module of its own.

SHARED = ROOT.parent / 'shared'
GAMES = SHARED / 'data' / 'games' / 'lichess_db_standard_rated_2021-10_first999.pgn'
AV_SAMPLE = SHARED / 'compat' / 'action_value_sample.bag'
BIN = pathlib.Path(sys.executable).parent


def _cli(name: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
  return subprocess.run([str(BIN / name), *args], capture_output=True, text=True, timeout=timeout)


def malformed_games(work: pathlib.Path, engine: str, count: int) -> dict:
  rng = random.Random(13)
  games = [raw.text for raw in pgn.iter_raw_games(str(GAMES))][:400]
  texts = [mutate_game(games[i % len(games)], rng) for i in range(count)]
  path = work / 'fuzz.pgn'
  path.write_bytes(b''.join(t.encode('utf-8') + b'\n' for t in texts))
  raws = list(pgn.iter_raw_games(str(path)))
  in_games = [line for raw in raws for line in raw.text.split('\n') if line.strip()]
  lines = [line.rstrip('\r').replace('\ufeff', '') for t in texts for line in t.split('\n')]
  lost_lines = len([line for line in lines if line.strip()]) - len(in_games)
  out = work / 'fuzz_out'
  result = _cli(
    'searchless-annotate',
    '--input',
    str(path),
    '--out',
    str(out),
    '--overwrite',
    '--no_progress',
    '--mode',
    'board',
    '--limit',
    'depth=1',
    '--engine_path',
    engine,
    '--direct_num_workers',
    '2',
  )
  if result.returncode:
    return {'tried': count, 'crashes': 1, 'lost': None, 'detail': result.stderr.strip()[-300:]}
  manifest = json.loads((out / 'manifest.json').read_text())
  read, kept = manifest['games']['read'], manifest['games']['kept']
  skipped = sum(manifest['games']['skipped'].values())
  failures = (out / 'failures.jsonl').read_text().splitlines() if (out / 'failures.jsonl').exists() else []
  written = sum(
    len(bags.read_records(bags.find(str(out / split), 'state_value'), 'state_value'))
    for split in ('train', 'test')
    if any((out / split).glob('state_value*'))
  )
  boards = sum(s['boards'] for s in manifest['splits'].values())
  lost = lost_lines + (read - kept - skipped) + (boards - written - len(failures))
  return {
    'tried': count,
    'crashes': 0,
    'lost': lost,
    'detail': f'{read} games read ({len(raws)} by the reader alone), {kept} kept, {skipped} skipped with a reason; '
    f'{boards} boards, {written} records, {len(failures)} failures; {lost_lines} lines in no game',
  }


def hostile_uci(count: int) -> dict:
  rng = random.Random(7)
  proc = subprocess.Popen(
    [str(BIN / 'searchless-uci'), '--checkpoint', 'pretrained'],
    stdin=subprocess.PIPE,
    stdout=subprocess.PIPE,
    stderr=subprocess.DEVNULL,
  )
  replies: list[str] = []
  reader = threading.Thread(
    target=lambda: replies.extend(line.decode('utf-8', 'replace').strip() for line in proc.stdout), daemon=True
  )
  reader.start()
  assert proc.stdin is not None
  for _ in range(count):
    proc.stdin.write(hostile_uci_line(rng).encode('utf-8', 'surrogateescape') + b'\n')
  proc.stdin.write(b'stop\nisready\nposition startpos\ngo depth 1\n')
  proc.stdin.flush()
  deadline = time.monotonic() + 60
  while time.monotonic() < deadline and proc.poll() is None and not any(r.startswith('bestmove') for r in replies[-3:]):
    time.sleep(0.1)
  crashed = proc.poll() is not None
  answered = 'readyok' in replies and any(r.startswith('bestmove') for r in replies[-3:])
  errors = sum(1 for r in replies if r.startswith('info string error'))
  if not crashed:
    proc.stdin.write(b'quit\n')
    proc.stdin.close()
    proc.wait(30)
  return {
    'tried': count,
    'crashes': int(crashed),
    'hangs': int(not crashed and not answered),
    'lost': 0 if answered else 1,
    'detail': f'{errors} lines answered "info string error", then readyok and a legal bestmove: {answered}',
  }


def engine_kills(work: pathlib.Path, engine: str, kills: int) -> dict:
  from searchless.pipelines import annotate as driver

  lines = GAMES.read_text().splitlines(keepends=True)
  starts = [i for i, line in enumerate(lines) if line.startswith('[Event ')]
  games = work / 'kill_games.pgn'
  games.write_text(''.join(lines[: starts[12]]))
  expected = collections.Counter(set(fen for raw in pgn.iter_raw_games(str(games)) for fen in pgn.parse_game(raw).fens))
  killed: list[int] = []

  def killer():
    while len(killed) < kills:
      found = [p for p in psutil.Process().children(recursive=True) if 'stockfish' in p.name() and p.pid not in killed]
      if found:
        time.sleep(0.5)  # Let it annotate some boards first.
        try:
          found[0].send_signal(signal.SIGKILL)
          killed.append(found[0].pid)
        except psutil.NoSuchProcess:
          pass
      time.sleep(0.05)

  thread = threading.Thread(target=killer, daemon=True)
  thread.start()
  manifest = driver.run(
    [
      '--input',
      str(games),
      '--out',
      str(work / 'kill_out'),
      '--overwrite',
      '--limit',
      'depth=10',
      '--test_fraction',
      '0',
      '--engine_path',
      engine,
      '--direct_running_mode',
      'in_memory',
      '--direct_num_workers',
      '1',
      '--no_progress',
      '--mode',
      'board',
    ]
  )
  records = bags.read_records(bags.find(str(work / 'kill_out' / 'train'), 'state_value'), 'state_value')
  got = collections.Counter(r.fen for r in records)
  failures = manifest.splits['train']['boards_failed']
  lost = sum((expected - got).values()) - failures
  duplicated = sum((got - expected).values())
  return {
    'tried': len(killed),
    'crashes': 0,
    'lost': lost + duplicated,
    'detail': f'{sum(expected.values())} boards, {len(records)} records, {failures} failed, {duplicated} duplicated,'
    f' {manifest.engine_restarts} engine restarts',
  }


def trainer_kills(work: pathlib.Path, trials: int) -> dict:
  args = [
    '--config',
    'tiny',
    '--data',
    str(AV_SAMPLE),
    'model.embedding_dim=32',
    'model.num_layers=1',
    'model.num_heads=2',
    'data.batch_size=16',
    'train.num_steps=60',
    'train.ckpt_every=5',
    'train.log_every=5',
    'train.eval_every=1000',
    'train.compute_dtype=float32',
  ]
  reference = work / 'train_reference'
  shutil.rmtree(reference, ignore_errors=True)
  assert _cli('searchless-train', '--workdir', str(reference), *args).returncode == 0
  want = loading.load_params(str(reference))
  rng = random.Random(3)
  lost, detail = 0, []
  for trial in range(trials):
    run_dir = work / f'train_killed_{trial}'
    shutil.rmtree(run_dir, ignore_errors=True)
    proc = subprocess.Popen(
      [str(BIN / 'searchless-train'), '--workdir', str(run_dir), *args],
      stdout=subprocess.DEVNULL,
      stderr=subprocess.DEVNULL,
    )
    while not (run_dir / 'metrics.jsonl').exists() and proc.poll() is None:  # Training has started.
      time.sleep(0.05)
    time.sleep(rng.uniform(0.0, 3.0))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    steps = len((run_dir / 'metrics.jsonl').read_text().splitlines()) if (run_dir / 'metrics.jsonl').exists() else 0
    result = _cli('searchless-train', '--workdir', str(run_dir), *args)
    got = loading.load_params(str(run_dir))
    same = result.returncode == 0 and all(
      np.array_equal(a, b) for a, b in zip(_leaves(got), _leaves(want), strict=True)
    )
    metrics = [json.loads(line)['step'] for line in (run_dir / 'metrics.jsonl').read_text().splitlines()]
    same = same and metrics == sorted(set(metrics))
    lost += int(not same)
    detail.append(f'killed after {steps} log lines: {"identical" if same else "DIFFERENT"}')
  return {'tried': trials, 'crashes': 0, 'lost': lost, 'detail': '; '.join(detail)}


def _leaves(tree):
  import jax

  return jax.tree.leaves(tree)


def bad_command_lines(work: pathlib.Path, engine: str) -> dict:
  import zstandard

  bad = work / 'bad'
  shutil.rmtree(bad, ignore_errors=True)
  bad.mkdir()
  cut = bad / 'cut.pgn.zst'
  data = zstandard.ZstdCompressor().compress(GAMES.read_bytes()[:300_000])
  cut.write_bytes(data[: len(data) // 2])
  (bad / 'garbage.pgn.zst').write_bytes(os.urandom(300))
  (bad / 'empty.pgn').write_text('')
  (bad / 'cat-engine').write_text('#!/bin/sh\nexec cat\n')
  (bad / 'cat-engine').chmod(0o755)
  corrupt = bad / 'corrupt_action_value_data.bag'
  corrupt.write_bytes(AV_SAMPLE.read_bytes()[:-7])
  eng = ['--engine_path', engine, '--limit', 'depth=1', '--no_progress']
  out = lambda i: ['--out', str(bad / f'out{i}')]
  annotate_cases = [
    ['--input', str(cut)],
    ['--input', str(bad / 'garbage.pgn.zst')],
    ['--input', str(bad / 'missing.pgn')],
    ['--input', str(bad)],
    ['--input', str(bad / 'empty.pgn')],
    ['--input', str(GAMES), '--out', '/proc/out'],
    ['--input', str(GAMES), '--max_games', '1', '--engine_path', str(bad / 'cat-engine'), '--deadline', '1'],
    ['--input', str(GAMES), '--max_attempts', '0'],
    ['--input', str(GAMES), '--test_fraction', '2'],
    ['--input', str(GAMES), '--sample_games', '0'],
    ['--input', str(GAMES), '--threads', '0'],
    ['--input', str(GAMES), '--hash_mb', '-1'],
    ['--input', str(GAMES), '--deadline', '0'],
  ]
  cases = [
    ('searchless-annotate', [*eng, *case] + ([] if '--out' in case else out(i)))
    for i, case in enumerate(annotate_cases)
  ]
  train = ['--config', 'tiny', '--workdir', str(bad / 'train')]
  cases += [
    ('searchless-train', [*train, '--data', str(AV_SAMPLE), 'optim.learning_rate=-1']),
    ('searchless-train', [*train, '--data', str(AV_SAMPLE), 'train.num_steps=-5']),
    ('searchless-train', [*train, '--data', str(bad)]),
    ('searchless-train', [*train, '--data', str(corrupt), 'train.num_steps=2', 'data.batch_size=4']),
    ('searchless-evaluate', ['--checkpoint', 'pretrained', '--data', str(corrupt), '--out', str(bad / 'eval')]),
    ('searchless-evaluate', ['--checkpoint', str(bad / 'nothing'), '--data', str(AV_SAMPLE), '--out', str(bad / 'e2')]),
    ('searchless-uci', ['--checkpoint', str(bad / 'nothing')]),
  ]
  crashes, detail = 0, []
  for name, args in cases:
    result = _cli(name, *args, timeout=300)
    lines = result.stderr.strip().splitlines()
    ok = result.returncode == 2 and len(lines) == 1 and lines[0].startswith('error: ')
    crashes += int(not ok)
    if not ok:
      detail.append(f'{name} {" ".join(args[-2:])}: rc {result.returncode}, {len(lines)} stderr lines')
  return {'tried': len(cases), 'crashes': crashes, 'lost': 0, 'detail': '; '.join(detail) or 'each one line, exit 2'}


def _dataset(out: pathlib.Path) -> dict[str, bytes]:
  return {
    str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob('*')) if p.is_file() and p.name != 'manifest.json'
  }


def _annotate_args(engine: str, out: pathlib.Path) -> list[str]:
  return [
    '--input', str(GAMES), '--max_games', '4', '--limit', 'nodes=2000', '--chunk_boards', '10',
    '--engine_path', engine, '--no_progress', '--out', str(out),
  ]  # fmt: skip


def annotation_kills(work: pathlib.Path, engine: str, trials: int) -> dict:
  reference = work / 'annotate_reference'
  shutil.rmtree(reference, ignore_errors=True)
  start = time.perf_counter()
  assert _cli('searchless-annotate', *_annotate_args(engine, reference)).returncode == 0
  whole = time.perf_counter() - start
  want = _dataset(reference)
  rng = random.Random(5)
  lost, detail = 0, []
  for trial in range(trials):
    out = work / f'annotate_killed_{trial}'
    shutil.rmtree(out, ignore_errors=True)
    args = [str(BIN / 'searchless-annotate'), *_annotate_args(engine, out)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    time.sleep(rng.uniform(0.3, 0.9) * whole)
    os.killpg(proc.pid, signal.SIGKILL)  # The command, Beam's workers and their engines: a reboot.
    proc.wait()
    kept = len(list((out / '.searchless-resume').glob('*.pkl.zst')))
    result = subprocess.run(args, capture_output=True, text=True, timeout=900)
    same = result.returncode == 0 and _dataset(out) == want
    lost += int(not same)
    detail.append(f'{kept} pieces kept: {"identical" if same else "DIFFERENT"}')
  return {'tried': trials, 'crashes': 0, 'lost': lost, 'detail': '; '.join(detail)}


def _one_error_line(result: subprocess.CompletedProcess, *wanted: str) -> bool:
  lines = result.stderr.strip().splitlines()
  return (
    result.returncode == 2 and len(lines) == 1 and lines[0].startswith('error: ') and all(w in lines[0] for w in wanted)
  )


def writers_disks_flags(work: pathlib.Path, engine: str) -> dict:
  tried, crashes, lost, detail = 0, 0, 0, []
  out = work / 'one_writer'
  shutil.rmtree(out, ignore_errors=True)
  first = subprocess.Popen(
    [str(BIN / 'searchless-annotate'), *_annotate_args(engine, out)],
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
    start_new_session=True,
  )
  try:
    while not (out / '.lock').exists() and first.poll() is None:
      time.sleep(0.05)
    second = _cli('searchless-annotate', *_annotate_args(engine, out))
    tried += 1
    if not _one_error_line(second, f'is in use by another searchless-annotate (pid {first.pid} on '):
      crashes += 1
      detail.append(f'second writer: rc {second.returncode}')
  finally:
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
  if subprocess.run(['unshare', '-rm', 'true'], capture_output=True).returncode == 0:
    disk = work / 'small_disk'
    shutil.rmtree(disk, ignore_errors=True)
    disk.mkdir()
    command = ' '.join(f"'{a}'" for a in [str(BIN / 'searchless-annotate'), *_annotate_args(engine, disk / 'out')])
    script = (
      f'mount -t tmpfs -o size=96k tmpfs {disk} && head -c 70000 /dev/zero > {disk}/filler && {command}; '
      f'echo "rc=$?"; ls {disk}/out/.searchless-resume | grep -c pkl.zst'
    )
    result = subprocess.run(['unshare', '-rm', 'sh', '-c', script], capture_output=True, text=True, timeout=900)
    tried += 1
    ok = 'rc=2' in result.stdout and len(result.stderr.strip().splitlines()) == 1
    ok = ok and f'error: cannot write {disk / "out"} (--out): No space left on device' in result.stderr
    crashes += int(not ok)
    lost += int('kept ' not in result.stderr)
    detail.append(f'full disk: {"one line, work kept" if ok else result.stderr.strip()[-200:]}')
  else:
    detail.append('full disk: left out (no unshare -rm here)')
  flags = work / 'flags'
  mistyped = [  # A whole command line but for one flag cut short: each would run if it took the abbreviation.
    ('searchless-annotate', [*_annotate_args(engine, flags / 'a'), '--num', '0']),  # --num_shards
    ('searchless-import', [str(GAMES), '--out', str(flags / 'i'), '--chunk', '5']),  # --chunk_games
    (
      'searchless-train',
      ['--config', 'tiny', '--workdir', str(flags / 't'), '--data', str(AV_SAMPLE), '--dat', str(AV_SAMPLE)],
    ),
    (
      'searchless-evaluate',
      ['--checkpoint', 'pretrained', '--data', str(AV_SAMPLE), '--out', str(flags / 'e'), '--num', '5'],
    ),
    (
      'searchless-puzzles',
      [
        '--puzzles',
        str(SHARED / 'data/puzzles/lichess_puzzles_dev.csv'),
        '--agent',
        'stockfish:nodes=1',
        '--out',
        str(flags / 'p'),
        '--nu',
        '3',
      ],
    ),
    ('searchless-uci', ['--checkpoint', 'pretrained', '--dtyp', 'float32']),
    ('searchless-download', ['chessbench-data', '--out', str(flags / 'd'), '--dry']),
    ('searchless-strength', ['measure', '--checkpoint', 'pretrained', '--out', str(flags / 's'), '--ladd', '1350']),
  ]
  for name, args in mistyped:
    result = subprocess.run(
      [str(BIN / name), *args], capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL
    )
    tried += 1
    refused = result.returncode == 2 and 'unrecognized arguments: ' in result.stderr
    crashes += int(not refused)
    if not refused:
      detail.append(f'{name} {args[-2]}: rc {result.returncode}')
  detail.append(f'{len(mistyped)} abbreviated flags refused' if not [d for d in detail if ': rc ' in d] else '')
  return {'tried': tried, 'crashes': crashes, 'lost': lost, 'detail': '; '.join(detail)}


def bug_traceback(work: pathlib.Path) -> dict:
  """A bug keeps its traceback and a user's mistake stays one line, in the same command: `searchless-puzzles` on a
  copy of the shipped model whose saved probe has one entry made a pair (numpy's ValueError of an inhomogeneous
  shape, raised where the load compares the probe), and on a checkpoint that is not there."""
  bug = work / 'bug_traceback'
  shutil.rmtree(bug, ignore_errors=True)
  shutil.copytree(loading.pretrained_dir('pretrained'), bug / 'model')
  probe = bug / 'model' / loading.PROBE / loading.PROBE_FILE
  saved = json.loads(probe.read_text())
  saved['params_ema'][1] = [saved['params_ema'][1]] * 2
  probe.write_text(json.dumps(saved))
  puzzles = ROOT / 'searchless' / 'samples' / 'sample_puzzles.csv'

  def run(checkpoint: pathlib.Path) -> subprocess.CompletedProcess:
    agent = f'checkpoint:{checkpoint}'
    return _cli(
      'searchless-puzzles',
      '--agent',
      agent,
      '--puzzles',
      str(puzzles),
      '--num',
      '2',
      '--out',
      str(bug / 'out'),
      timeout=300,
    )

  failed, mistake = run(bug / 'model'), run(bug / 'missing')
  lines = failed.stderr.strip().splitlines()
  kept = (
    failed.returncode == 1
    and lines[:1] == ['Traceback (most recent call last):']
    and lines[-1].startswith('ValueError: setting an array element with a sequence')
    and 'in probe_distance' in failed.stderr
  )
  one_line = _one_error_line(mistake, str(bug / 'missing'))
  detail = [
    f'bug: {f"a traceback of {len(lines)} lines, exit 1" if kept else f"rc {failed.returncode}, {lines[-1:]}"}',
    f'mistake: {"one line, exit 2" if one_line else f"rc {mistake.returncode}, {mistake.stderr.strip()[-200:]}"}',
  ]
  return {'tried': 2, 'crashes': int(not kept) + int(not one_line), 'lost': 0, 'detail': '; '.join(detail)}


def _interrupted(args: list[str], out: pathlib.Path, pieces: int) -> int:
  """Runs a command in a session of its own and sends SIGINT to its group (a terminal's Ctrl-C) once `pieces`
  pieces are kept in `out`; returns its exit status."""
  proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
  while len(list((out / '.searchless-resume').glob('*.pkl.zst'))) < pieces and proc.poll() is None:
    time.sleep(0.05)
  if proc.poll() is None:
    os.killpg(proc.pid, signal.SIGINT)
  return proc.wait()


def kept_work_faults(work: pathlib.Path, engine: str, trials: int) -> dict:
  """Kept work that is no longer true, `trials` times each, interrupted at a random piece: an import whose input
  changes before its rerun (refused in one line, nothing dropped; then ``--restart`` gives a fresh run's records),
  and an annotation whose kept pieces are then cut to zero length or garbled (one warning line each, redone, the
  dataset byte for byte an uninterrupted run's) or rerun with another ``--limit`` (refused, nothing dropped)."""
  from searchless.data import resume

  rng = random.Random(17)
  tried, crashes, lost, detail = 0, 0, 0, []
  inputs = work / 'kept_inputs'
  shutil.rmtree(inputs, ignore_errors=True)
  inputs.mkdir()
  eval_db = ROOT / 'tests/fixtures/lichess_db_eval_sample.jsonl'
  first_game_gone = '[Event ' + GAMES.read_text().split('\n[Event ', 1)[1]
  for trial in range(trials):
    copies = [inputs / f'games-{trial}-{i}.pgn' for i in range(2)]
    for copy in copies:
      copy.write_bytes(GAMES.read_bytes())
    common = [*map(str, copies), str(eval_db), '--test_fraction', '0.5', '--chunk_games', '100']
    out = work / f'kept_import_{trial}'
    shutil.rmtree(out, ignore_errors=True)
    command = [str(BIN / 'searchless-import'), *common, '--out', str(out)]
    _interrupted(command, out, rng.randint(1, 6))
    before = sorted(p.name for p in (out / '.searchless-resume').iterdir())
    copies[1].write_text(first_game_gone)  # Another version of the file under the same name.
    refused = subprocess.run(command, capture_output=True, text=True, timeout=600)
    tried += 1
    ok = _one_error_line(refused, f'error: the kept pieces in {out / ".searchless-resume"} were made from {copies[1]}')
    crashes += int(not ok)
    kept_all = sorted(p.name for p in (out / '.searchless-resume').iterdir()) == before
    restarted = subprocess.run([*command, '--restart'], capture_output=True, text=True, timeout=900)
    fresh = work / f'kept_import_fresh_{trial}'
    shutil.rmtree(fresh, ignore_errors=True)
    _cli('searchless-import', *common, '--out', str(fresh))
    same = restarted.returncode == 0 and _dataset(out) == _dataset(fresh)
    lost += int(not kept_all or not same)
    detail.append(
      f'import, input changed after {len(before) - 1} pieces: {"refused" if ok else "NOT REFUSED"}, '
      f'{"nothing dropped" if kept_all else "PIECES DROPPED"}, --restart {"= fresh run" if same else "DIFFERENT"}'
    )

  reference = work / 'kept_annotate_reference'
  shutil.rmtree(reference, ignore_errors=True)
  args = lambda out: [
    '--input', str(GAMES), '--max_games', '4', '--limit', 'nodes=300', '--chunk_boards', '10',
    '--engine_path', engine, '--no_progress', '--out', str(out),
  ]  # fmt: skip
  assert _cli('searchless-annotate', *args(reference)).returncode == 0
  want = _dataset(reference)
  for trial in range(trials):
    for fault in ('zero-length', 'garbled', 'another --limit'):
      out = work / f'kept_annotate_{trial}_{fault.split()[-1]}'
      shutil.rmtree(out, ignore_errors=True)
      command = [str(BIN / 'searchless-annotate'), *args(out)]
      _interrupted(command, out, rng.randint(2, 8))
      piece = pathlib.Path(resume.pieces(str(out))[0])
      before = sorted(p.name for p in (out / '.searchless-resume').iterdir())
      tried += 1
      if fault == 'another --limit':
        result = subprocess.run([*command, '--limit', 'nodes=3000'], capture_output=True, text=True, timeout=900)
        ok = _one_error_line(result, 'were made with --limit nodes=300, not nodes=3000: ')
        kept_all = sorted(p.name for p in (out / '.searchless-resume').iterdir()) == before
        crashes += int(not ok)
        lost += int(not kept_all)
        detail.append(f'annotate, {fault}: {"refused" if ok else "NOT REFUSED"}, {len(before) - 2} pieces kept')
        continue
      data = piece.read_bytes()
      piece.write_bytes(b'' if fault == 'zero-length' else data[: len(data) // 2] + os.urandom(len(data) // 2 + 1))
      result = subprocess.run(command, capture_output=True, text=True, timeout=900)
      warnings = [line for line in result.stderr.splitlines() if line.startswith('warning: ')]
      ok = result.returncode == 0 and len(warnings) == 1 and str(piece) in warnings[0]
      ok = ok and 'Traceback' not in result.stderr
      same = result.returncode == 0 and _dataset(out) == want
      crashes += int(not ok)
      lost += int(not same)
      detail.append(
        f'annotate, a {fault} piece of {len(before) - 2}: {"one warning" if ok else "NOT SAID"}, '
        f'{"identical" if same else "DIFFERENT"}'
      )
  return {'tried': tried, 'crashes': crashes, 'lost': lost, 'detail': '; '.join(detail)}


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('--workdir', required=True)
  p.add_argument('--games', type=int, default=1200)
  p.add_argument('--uci_lines', type=int, default=1200)
  p.add_argument('--kills', type=int, default=5)
  p.add_argument('--trainer_kills', type=int, default=3)
  p.add_argument('--annotation_kills', type=int, default=3)
  p.add_argument('--download_kills', type=int, default=3)
  p.add_argument('--download_races', type=int, default=3)
  p.add_argument('--kept_work_trials', type=int, default=2)
  p.add_argument('--engine_path', default=None)
  p.add_argument('--only', default='', help='the campaigns to run, by number, e.g. 8,9,10 (default: all)')
  args = p.parse_args()
  work = pathlib.Path(args.workdir)
  work.mkdir(parents=True, exist_ok=True)
  engine = launch.require_stockfish(args.engine_path)
  campaigns = [
    ('malformed games -> searchless-annotate', lambda: malformed_games(work, engine, args.games)),
    ('hostile UCI lines -> searchless-uci', lambda: hostile_uci(args.uci_lines)),
    ('Stockfish SIGKILLed mid-annotation', lambda: engine_kills(work, engine, args.kills)),
    ('searchless-train SIGKILLed, resumed', lambda: trainer_kills(work, args.trainer_kills)),
    ('bad command lines (annotate, train, evaluate, uci)', lambda: bad_command_lines(work, engine)),
    ('searchless-annotate SIGKILLed, resumed', lambda: annotation_kills(work, engine, args.annotation_kills)),
    ('second writer, full disk, abbreviated flags', lambda: writers_disks_flags(work, engine)),
    (
      'searchless-download: changes, formats, streams',
      lambda: reliability_downloads.download_faults(work, args.download_kills, args.download_races),
    ),
    ("a bug's traceback, a mistake's one line", lambda: bug_traceback(work)),
    ('kept work no longer true: inputs, pieces', lambda: kept_work_faults(work, engine, args.kept_work_trials)),
  ]
  if args.only:
    chosen = {int(n) for n in args.only.split(',')}
    if not chosen <= set(range(1, len(campaigns) + 1)):
      p.error(f'--only {args.only}: campaigns are numbered 1-{len(campaigns)}')
    campaigns = [c for i, c in enumerate(campaigns, 1) if i in chosen]
  print(f'{"campaign":42s} {"tried":>6s} {"crashes":>8s} {"lost":>5s}  seconds  detail')
  totals = collections.Counter()
  for name, campaign in campaigns:
    start = time.perf_counter()
    figures = campaign()
    seconds = time.perf_counter() - start
    totals.update({k: figures[k] or 0 for k in ('tried', 'crashes', 'lost')})
    print(
      f'{name:42s} {figures["tried"]:6d} {figures["crashes"]:8d} {figures["lost"]!s:>5s}  {seconds:7.1f}  '
      f'{figures["detail"]}',
      flush=True,
    )
  print(f'{"all":42s} {totals["tried"]:6d} {totals["crashes"]:8d} {totals["lost"]:5d}')
  print(
    f'crashes / tried: {totals["crashes"] / totals["tried"]:.3f}; lost / tried: {totals["lost"] / totals["tried"]:.3f}'
  )


if __name__ == '__main__':
  main()
