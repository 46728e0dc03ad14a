"""The download campaign of `reliability.py` (campaign 8): ``searchless-download`` and streamed inputs against a
file server on 127.0.0.1 (tests/http_fixture.py) that misbehaves as servers and mirrors do.

    .venv/bin/python benchmarks/reliability.py --workdir /tmp/rel --only 8
    .venv/bin/python benchmarks/reliability_downloads.py --workdir /tmp/rel           # the same, alone
    .venv/bin/python benchmarks/reliability_downloads.py --workdir /tmp/rel --code OLD  # another checkout's code

Cases: a file republished between an interrupted run and its rerun (same size, other size), one republished
during its download (once, and at every request), a mirror that sends no checksum, an unpack killed mid-extract
and before its zip went, `kills` SIGKILLs of a checkpoint's download and unpack; and, with no published checksum,
an HTML error page and a JSON error body answered with a 200, a Content-Length shorter and one longer than the
body, a truncated ``.zst`` and a ``.zip`` with a bad CRC on the server, a streamed input
(``searchless-import --input http://...``) whose connection drops half-way and whose file then changes, from a
server without a validator and from one with, a server that refuses HEAD, and `races` pairs of downloads started
together on one folder. Crash: an exit status or stderr other than expected (one ``error:`` line for a refusal);
lost: any wrong file kept (one that is not the server's current file, a ``.part`` or zip left, a dataset made
from a stream that changed, a ``downloads.json`` that lost an entry).

``--code DIR`` runs the commands from another checkout's code (``PYTHONPATH=DIR``): the comparison with the code
before a change.
"""

import argparse
import json
import os
import pathlib
import random
import shutil
import signal
import subprocess
import sys
import time
import zipfile

import zstandard

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / 'tests'))

from http_fixture import FileServer  # noqa: E402

EVAL_SAMPLE = ROOT / 'tests/fixtures/lichess_db_eval_sample.jsonl'


class _Campaign:
  """The counts and the one-line verdicts of the cases run so far; `code`: the checkout whose commands run."""

  def __init__(self, work: pathlib.Path, code: pathlib.Path):
    self.work, self.code = work, code
    self.tried, self.crashes, self.lost, self.detail = 0, 0, 0, []
    self.site = work / 'download_site'

  def case(self, name: str, ran: bool, right: bool) -> None:
    self.tried, self.crashes, self.lost = self.tried + 1, self.crashes + int(not ran), self.lost + int(not right)
    self.detail.append(f'{name}: {"ok" if ran and right else ("WRONG KEPT" if not right else "wrong exit or stderr")}')

  def out(self, name: str) -> pathlib.Path:
    out = self.work / f'download_{name}'
    shutil.rmtree(out, ignore_errors=True)
    return out

  def command(self, out: pathlib.Path, url: str, *args: str) -> list[str]:
    cli = [sys.executable, '-m', 'searchless.commands.download', *args]
    return [*cli, '--out', str(out), '--base_url', url, '--no_progress']

  def finish(self, args: list[str]) -> subprocess.CompletedProcess:  # A run that hangs counts as a crash.
    env = {**os.environ, 'PYTHONPATH': str(self.code)}
    try:
      return subprocess.run(args, capture_output=True, text=True, timeout=300, env=env, cwd=self.code)
    except subprocess.TimeoutExpired:
      return subprocess.CompletedProcess(args, -1, '', 'timed out')

  def popen(self, args: list[str]) -> subprocess.Popen:
    env = {**os.environ, 'PYTHONPATH': str(self.code)}
    quiet = subprocess.DEVNULL
    return subprocess.Popen(
      args, stdout=quiet, stderr=subprocess.PIPE, text=True, start_new_session=True, env=env, cwd=self.code
    )

  def kept_right(self, out: pathlib.Path, *paths: str) -> bool:  # Each file the server's current one; no leftovers.
    kept = [out / 'chessbench' / p for p in paths]
    site = self.site / 'searchless_chess'
    right = all(k.is_file() and k.read_bytes() == (site / p).read_bytes() for k, p in zip(kept, paths))
    return right and not [p for p in out.rglob('*') if p.name.endswith(('.part', '.part.json', '.zip', '.unpacking'))]


def _kept_nothing(out: pathlib.Path) -> bool:
  return not [p for p in out.rglob('*') if p.is_file() and p.name not in ('.lock', 'downloads.json')]


def _one_error(result: subprocess.CompletedProcess, *wanted: str) -> bool:
  said = result.stderr.splitlines()
  return (
    result.returncode == 2 and len(said) == 1 and said[0].startswith('error: ') and all(w in said[0] for w in wanted)
  )


def _puzzles_csv(rng: random.Random, size: int) -> bytes:
  """A ChessBench puzzles.csv of about `size` bytes: its header, then lines of text (passes the format check)."""
  lines = [f'{i},{rng.randrange(600, 3000)},1. e4 e5,e2e4 e7e5' for i in range(size // 24)]
  return ('PuzzleId,Rating,PGN,Moves\n' + '\n'.join(lines) + '\n').encode()


def _zst_puzzles(rng: random.Random) -> bytes:
  lines = ''.join(f'{i:05d},8/8/8/8/8/8/8/K1k5 w - - 0 1,a1a2 c1c2,{rng.randrange(600, 3000)}\n' for i in range(20_000))
  return zstandard.ZstdCompressor(write_checksum=True).compress(f'PuzzleId,FEN,Moves,Rating\n{lines}'.encode())


def _bad_crc_zip(zipped: pathlib.Path) -> bytes:
  with zipfile.ZipFile(zipped) as z:
    member = max(z.infolist(), key=lambda m: m.compress_size)
  data = bytearray(zipped.read_bytes())
  data[member.header_offset + 30 + len(member.filename.encode()) + member.compress_size // 2] ^= 1
  return bytes(data)


def _site(c: _Campaign, rng: random.Random) -> pathlib.Path:
  """The published layout: puzzles.csv, eco_openings.pgn, the 9M checkpoint's zip (the vendored reference
  checkpoint), Lichess's puzzle database and evaluation database."""
  site = c.site
  shutil.rmtree(site, ignore_errors=True)
  puzzles = site / 'searchless_chess/data/puzzles.csv'
  puzzles.parent.mkdir(parents=True)
  puzzles.write_bytes(_puzzles_csv(rng, 2_000_000))
  (site / 'searchless_chess/data/eco_openings.pgn').write_text('[Event "?"]\n\n1. e4 e5 *\n' * 2000)
  zipped = site / 'searchless_chess/checkpoints/9M.zip'
  zipped.parent.mkdir(parents=True)
  checkpoint = ROOT / 'tests/fixtures/compat/reference_local_checkpoint'
  with zipfile.ZipFile(zipped, 'w') as z:
    for file in sorted(p for p in checkpoint.rglob('*') if p.is_file()):
      z.write(file, pathlib.Path('9M') / file.relative_to(checkpoint))
  (site / 'lichess_db_puzzle.csv.zst').write_bytes(_zst_puzzles(rng))
  (site / 'lichess_db_eval.jsonl.zst').write_bytes(zstandard.compress(EVAL_SAMPLE.read_bytes() * 20))
  return site


def _changes_and_unpacks(c: _Campaign, rng: random.Random, kills: int) -> None:
  """The cases of the campaign before the format checks: files that change, a mirror, killed unpacks."""
  site, puzzles = c.site, c.site / 'searchless_chess/data/puzzles.csv'
  zipped = site / 'searchless_chess/checkpoints/9M.zip'

  def model_right(out: pathlib.Path) -> bool:
    model = out / 'chessbench/checkpoints/9M'
    with zipfile.ZipFile(zipped) as z:
      files = [n for n in z.namelist() if not n.endswith('/')]
      kept = [model / n.split('/', 1)[1] for n in files]
      right = all(k.is_file() and k.read_bytes() == z.read(n) for k, n in zip(kept, files))
    if not model.parent.is_dir():
      return False
    extra = [p for p in model.parent.iterdir() if p.name != '9M'] + [p for p in model.rglob('*') if p.is_file()]
    return right and len(extra) == len(files)

  def interrupt(out: pathlib.Path, *args: str) -> None:  # Ctrl-C once a first chunk is kept.
    part = out / 'chessbench/data/puzzles.csv.part'
    with FileServer(site, bytes_per_second=500_000) as server:
      proc = c.popen(c.command(out, server.url, *args))
      while not (part.exists() and part.stat().st_size) and proc.poll() is None:
        time.sleep(0.02)
      os.killpg(proc.pid, signal.SIGINT)
      proc.communicate()

  for size in ('same size', 'other size'):  # Republished between an interrupted run and its rerun.
    out = c.out(f'changed_{size[:4]}')
    interrupt(out, 'chessbench-data', 'puzzles')
    puzzles.write_bytes(_puzzles_csv(rng, 2_000_000 if size == 'same size' else 1_500_000))
    with FileServer(site) as server:
      result = c.finish(c.command(out, server.url, 'chessbench-data', 'puzzles'))
    said = result.stderr.splitlines()
    ran = result.returncode == 0 and len(said) == 1 and 'fetching it again from zero' in said[0]
    c.case(f'changed between runs, {size}', ran, c.kept_right(out, 'data/puzzles.csv'))
  for keeps in (False, True):  # Republished during the download: once, or at every request.
    out = c.out(f'changing_{keeps}')
    republish = lambda path, n: (keeps or n == 1) and (site / path[1:]).write_bytes(_puzzles_csv(rng, 2_000_000))
    with FileServer(site, drop_after=500_000, drops=100 if keeps else 1, before_get=republish) as server:
      result = c.finish(c.command(out, server.url, 'chessbench-data', 'puzzles'))
    said = result.stderr.splitlines()
    if keeps:
      ran = result.returncode == 2 and said[-1].startswith('error: ') and 'times during its download' in said[-1]
      right = _kept_nothing(out)
    else:
      ran, right = result.returncode == 0 and len(said) == 1, c.kept_right(out, 'data/puzzles.csv')
    c.case('changing at every request' if keeps else 'changed once during the download', ran, right)
  out = c.out('mirror')
  with FileServer(site) as server:  # A mirror that sends no checksum: each file said unverified, format checked.
    result = c.finish(c.command(out, server.url, 'chessbench-data', 'puzzles', 'openings'))
  ran = result.returncode == 0 and 'chessbench/data/puzzles.csv' in result.stdout and 'unverified' in result.stdout
  c.case('a mirror without checksums', ran, c.kept_right(out, 'data/puzzles.csv', 'data/eco_openings.pgn'))
  for state in ('killed mid-extract', 'killed before the zip went'):
    out = c.out(f'unpack_{state[7:10]}')
    model = out / 'chessbench/checkpoints/9M'
    model.parent.mkdir(parents=True)
    shutil.copy(zipped, model.parent / '9M.zip')
    with zipfile.ZipFile(zipped) as z:
      if state == 'killed mid-extract':
        z.extractall(model.parent / '.9M.unpacking', z.namelist()[: len(z.namelist()) // 2])
      else:
        z.extractall(model.parent / '.9M.unpacking')
        (model.parent / '.9M.unpacking/9M').rename(model)
    with FileServer(site) as server:
      result = c.finish(c.command(out, server.url, 'chessbench-checkpoints', '9M'))
      ran = result.returncode == 0 and not result.stderr and not server.gets('/searchless_chess/checkpoints/9M.zip')
    c.case(f'unpack {state}', ran, model_right(out))
  for trial in range(kills):  # SIGKILLed at a random moment of a download and unpack, then rerun.
    out = c.out(f'killed_{trial}')
    with FileServer(site, bytes_per_second=2_000_000) as server:
      args = c.command(out, server.url, 'chessbench-checkpoints', '9M')
      proc = c.popen(args)
      time.sleep(rng.uniform(0.5, 4.0))
      os.killpg(proc.pid, signal.SIGKILL)
      proc.communicate()
      result = c.finish(args)
    c.case(f'SIGKILL {trial + 1}', result.returncode == 0 and not result.stderr, model_right(out))


def _bad_files(c: _Campaign) -> None:
  """Files no checksum checks, wrong as a server or a mirror makes them: each refused, nothing kept."""
  site = c.site
  zst, evals, zipped = (
    '/lichess_db_puzzle.csv.zst',
    '/lichess_db_eval.jsonl.zst',
    '/searchless_chess/checkpoints/9M.zip',
  )
  good = {path: (site / path[1:]).read_bytes() for path in (zst, evals, zipped)}
  html = b'<!DOCTYPE html>\n<html><body><h1>503 Service Unavailable</h1></body></html>\n'
  cases = [  # name, target, path, the bytes served (None: the right ones), server options, words of the error
    ('an HTML error page', 'lichess-puzzles', zst, html, {}, 'an error page'),
    (
      'a JSON error body',
      'lichess-evals',
      evals,
      b'{"error": {"code": 403, "message": "denied"}}',
      {},
      'an error page',
    ),
    ('a short Content-Length', 'lichess-puzzles', zst, None, {'lengths': {zst: -1000}}, 'truncated'),
    ('a long Content-Length', 'lichess-puzzles', zst, None, {'lengths': {zst: 1000}}, 'Content-Length'),
    ('a truncated .zst', 'lichess-puzzles', zst, good[zst][:-1000], {}, 'truncated'),
    ('a .zip with a bad CRC', 'chessbench-checkpoints', zipped, _bad_crc_zip(site / zipped[1:]), {}, 'CRC'),
  ]
  for i, (name, target, path, data, options, words) in enumerate(cases):
    out = c.out(f'bad_{i}')
    (site / path[1:]).write_bytes(good[path] if data is None else data)
    with FileServer(site, **options) as server:
      result = c.finish(c.command(out, server.url, target, *(['9M'] if target.startswith('chessbench') else [])))
    (site / path[1:]).write_bytes(good[path])
    c.case(name, _one_error(result, server.url + path, words), _kept_nothing(out))
    if name == 'an HTML error page':  # Then the real file: fetched, as if nothing had been there.
      with FileServer(site) as server:
        result = c.finish(c.command(out, server.url, target))
      right = (out / 'lichess' / path[1:]).read_bytes() == good[path] if result.returncode == 0 else False
      c.case('the real file after an error page', result.returncode == 0 and not result.stderr, right)


def _streams(c: _Campaign) -> None:
  """``searchless-import`` of an http(s) input whose connection drops half-way and whose file then changes: from
  a server with no validator (a plain range request would splice two files) and from one with a validator."""
  site, name = c.site, 'evals.jsonl'
  first = EVAL_SAMPLE.read_bytes() * 20  # A few hundred kB: a drop half-way is after several reads.
  changed = first.split(b'\n', 1)[1] + first.split(b'\n', 1)[0] + b'\n'  # Another version: its lines in other order.
  for validators in (False, True):
    (site / name).write_bytes(first)
    out = c.out(f'stream_{validators}')
    republish = lambda path, n: n >= 1 and path == f'/{name}' and (site / name).write_bytes(changed)
    with FileServer(site, validators=validators, drop_after=len(first) // 2, before_get=republish) as server:
      args = [sys.executable, '-m', 'pipelines.import_labels', '--input', f'{server.url}/{name}', '--out', str(out)]
      result = c.finish([*args, '--direct_running_mode', 'in_memory'])
    words = 'cannot resume safely' if not validators else 'the file changed'
    dataset = [p for p in out.rglob('*') if p.is_file() and p.suffix in ('.bag', '.bagz', '.json')]
    c.case(
      f'a stream changed mid-read, {"with" if validators else "no"} validator', _one_error(result, words), not dataset
    )


def _head_refused(c: _Campaign) -> None:
  """A server that answers HEAD with 405: a download and a streamed input's identity ask with a GET instead."""
  out = c.out('head_refused')
  with FileServer(c.site, head_status=405) as server:
    result = c.finish(c.command(out, server.url, 'chessbench-data', 'puzzles'))
    c.case('a server that refuses HEAD: download', result.returncode == 0, c.kept_right(out, 'data/puzzles.csv'))
    (c.site / 'evals.jsonl').write_bytes(EVAL_SAMPLE.read_bytes())
    args = [sys.executable, '-m', 'pipelines.import_labels', '--input', f'{server.url}/evals.jsonl', '--out', str(out)]
    result = c.finish([*args, '--direct_running_mode', 'in_memory'])
  made = (out / 'manifest.json').is_file()  # Nothing wrong can be kept here: a refusal is a crash, not a loss.
  c.case('a server that refuses HEAD: streamed import', result.returncode == 0 and made, True)


def _races(c: _Campaign, rng: random.Random, races: int) -> None:
  """Two downloads of other files started together on one folder: one fetches, the other is refused in one line
  (the folder is in use), and reruns; both files kept right and both in ``downloads.json``."""
  for trial in range(races):
    out = c.out(f'race_{trial}')
    with FileServer(c.site, bytes_per_second=4_000_000) as server:
      first = c.popen(c.command(out, server.url, 'chessbench-data', 'puzzles'))
      time.sleep(rng.uniform(0.0, 0.3))
      second = c.popen(c.command(out, server.url, 'chessbench-data', 'openings'))
      said = [p.communicate()[1] for p in (first, second)]
      codes = [first.returncode, second.returncode]
      refused = [i for i, code in enumerate(codes) if code != 0]
      ran = all(
        code == 0 or (code == 2 and said[i].count('\n') == 1 and 'in use by' in said[i]) for i, code in enumerate(codes)
      )
      for i in refused:  # The refused one, once the folder is free.
        again = c.finish(c.command(out, server.url, 'chessbench-data', ('puzzles', 'openings')[i]))
        ran = ran and again.returncode == 0
    record = json.loads((out / 'downloads.json').read_text())['files'] if (out / 'downloads.json').exists() else {}
    names = {'chessbench/data/puzzles.csv', 'chessbench/data/eco_openings.pgn'}
    right = c.kept_right(out, 'data/puzzles.csv', 'data/eco_openings.pgn') and set(record) == names
    c.case(f'two downloads racing {trial + 1}', ran, right)


def download_faults(work: pathlib.Path, kills: int, races: int = 3, code: pathlib.Path = ROOT) -> dict:
  """The campaign: {'tried', 'crashes', 'lost', 'detail'} (see the module's docstring)."""
  c, rng = _Campaign(work, code), random.Random(11)
  _site(c, rng)
  _changes_and_unpacks(c, rng, kills)
  _bad_files(c)
  _streams(c)
  _head_refused(c)
  _races(c, rng, races)
  return {'tried': c.tried, 'crashes': c.crashes, 'lost': c.lost, 'detail': '; '.join(c.detail)}


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('--workdir', required=True)
  p.add_argument('--download_kills', type=int, default=3)
  p.add_argument('--races', type=int, default=3)
  p.add_argument('--code', default=str(ROOT), help='the checkout whose code runs (PYTHONPATH), default this one')
  args = p.parse_args()
  work = pathlib.Path(args.workdir)
  work.mkdir(parents=True, exist_ok=True)
  start = time.perf_counter()
  figures = download_faults(work, args.download_kills, args.races, pathlib.Path(args.code).resolve())
  tried, crashes, lost = figures['tried'], figures['crashes'], figures['lost']
  print(f'tried {tried}, crashes {crashes}, lost {lost} in {time.perf_counter() - start:.1f} s')
  print(f'crashes / tried: {crashes / tried:.3f}; lost / tried: {lost / tried:.3f}')
  print(figures['detail'].replace('; ', '\n'))


if __name__ == '__main__':
  main()
