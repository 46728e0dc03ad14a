"""The campaign's training on a lent GPU machine: several models side by side on one GPU, for minutes.

Here, first: the campaign's merged boards as columns (`searchless.data.board_columns`: FENs, moves and
one return bucket a value, xz; 948,674 boards in 38.3 MB, under the machine's 64 MiB a call), the
campaign model's parameters, and the wheels the machine lacks (its image has jax, optax, orbax and numpy):

    python benchmarks/device_campaign.py --pack /root/searchless-data/campaign/boards/train_board_value_data.bag \\
        --data .device/data              # 6 min on 2 busy cores (3 compressing processes)
    python -c "from searchless.commands import campaign_model as m; import pathlib as p; m.export_run(\\
        p.Path('/root/searchless-data/campaign/train'), p.Path('.device/init_graph_deep6'), {'device': 'CPU'})"
    pip download --no-deps --only-binary=:all: --python-version 3.12 ... -d .whl dm-haiku==0.0.17 jmp==0.0.4 \\
        grain==0.2.18 array-record portpicker bagz==0.3.8 ml_collections==1.1.0 tensorboardX==2.6.5 zstandard
    pip wheel --no-deps -w .whl chess==1.11.2      # an sdist only

Then on the device machine (`.device` and `.whl` carried, both in .git/info/exclude), from the repository
root, the package run from the tree (its configs copied where the wheel would put them):

    pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && cp -r configs searchless/configs \\
        && export PYTHONPATH=/tmp/site:$PWD
    python3 benchmarks/device_campaign.py --data .device/data --out $OUT --seconds 480 \\
        --models graph_deep6 packed_priors_wide --workers 7 \\
        --init graph_deep6=.device/init_graph_deep6 packed_priors_wide=searchless/pretrained_transformer

Each model of MODELS trains with ``searchless.commands.train`` in its own process (the GPU is
shared; each process keeps a quarter of its memory and a few loader workers), on the same
boards, for ``--seconds`` of wall-clock, in float32 (the configs' ``train.compute_dtype``). Then each
run is exported as the campaign's adopt step takes it (``campaign_model.export_run``: EMA
parameters in float32, metrics, summary, config, the device), one tar per model in ``--out``:
what comes back from the machine, small enough for its limits (16 MiB a file). Locally:

    tar -xf graph_tiny.tar -C /tmp && python -m searchless.commands.campaign \\
        --workdir /root/searchless-data/campaign --steps adopt,evaluate --model /tmp/graph_tiny

Prints each run's progress every 30 s (step, loss, examples/s, the GPU's use) and ends with one
line per model: ``<name>: <steps> steps, <examples/s> boards/s, final loss <x>``.

Measured (benchmarks/RESULTS.md "The campaign on a lent GPU"): one H200, 2026-11-26, 407,056 boards:
the three side by side kept the GPU 100% busy at 9,571 (graph_tiny), ~3,240 (graph_wide)
and ~4,860 (packed_priors_wide) boards/s; graph_tiny alone ran 29,830 boards/s at 1.4% MFU (small
kernels: a bigger batch is the next lever), 207x the 2 CPU cores. One H100, 2026-11-27, 948,674
boards, two side by side for 460 s: graph_tiny ~12,100 boards/s (19,927 steps), packed_priors_wide
~6,900 (12,111 steps); the whole call 544 s. One H200, 2026-11-28, 462,929 boards, two side by side for 480 s:
graph_deep6 (the campaign's 6-layer model, from its CPU step 11,240) ~9,900 boards/s (16,807 steps),
packed_priors_wide (from the shipped transformer) ~7,600 (14,377 steps); the whole call 562 s.

Locally, to check the driver end to end (a minute of CPU): ``--quick``.
"""

import argparse
import json
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import tarfile
import time

# Name -> (config, overrides). Batch 256 boards a step on the GPU (32 on 2 CPU cores), EMA 0.999
# (a run is tens of thousands of steps), learning rates as on the CPU for the graph models,
# halved for the 4M-parameter transformer (no warm-up in the trainer). Every config computes in
# float32 (tiny's train.compute_dtype); graph_tiny, the campaign's CPU model continued, says so too.
GRAPH_ON_GPU = ['data.batch_size=256', 'optim.ema_decay=0.999', 'train.compute_dtype=float32', 'train.micro_batch=0']
MODELS = {
    'graph_tiny': ('campaign', GRAPH_ON_GPU),
    'graph_deep6': ('campaign_deep6', GRAPH_ON_GPU),  # The campaign's model from session 18 on.
    'graph_wide': ('campaign', ['model.embedding_dim=128', 'model.num_layers=6', 'model.graph_edge_dim=64',
                                'model.num_heads=8', 'data.batch_size=256', 'optim.ema_decay=0.999', 'train.micro_batch=0']),
    'packed_priors_wide': ('tiny_packed', ['model.embedding_dim=192', 'model.num_layers=6', 'model.num_heads=6',
                                           'model.mover_view=True', 'model.move_squares=tied',
                                           'model.square_bias=relative', 'data.batch_size=256',
                                           'optim.learning_rate=5e-4', 'optim.ema_decay=0.999']),
}
COMMON = ['train.num_steps=100000000', 'train.log_every=500', 'train.eval_every=100000000',
          'train.ckpt_every=3000', 'train.ckpt_keep=1']  # An early save shows a broken checkpointer early.
QUICK = ['data.batch_size=8', 'train.log_every=5']  # --quick: a CPU check of the driver.
TAR_LIMIT = 16 * 2**20  # The device's limit on a returned file.


def decompress(src: pathlib.Path, dst: pathlib.Path) -> None:
  """`src` (a folder of `board_columns`, or .zst with any window) -> `dst`; a plain file is linked."""
  if src.is_dir():
    from searchless.data import board_columns
    print(f'data: {board_columns.unpack(src, dst, workers=os.cpu_count() or 1):,} boards unpacked', flush=True)
    return
  if src.suffix != '.zst':
    dst.symlink_to(src.resolve())
    return
  import zstandard
  with open(src, 'rb') as fin, open(dst, 'wb') as fout:
    zstandard.ZstdDecompressor(max_window_size=2**31).copy_stream(fin, fout)


def last_metrics(workdir: pathlib.Path) -> dict | None:
  path = workdir / 'metrics.jsonl'
  if not path.exists():
    return None
  rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
  rows = [r for r in rows if 'loss' in r]
  return rows[-1] if rows else None


def device_name() -> str:
  """The GPU's name (nvidia-smi), else the processor's."""
  try:
    return subprocess.run(['nvidia-smi', '--query-gpu=name', '--format=csv,noheader'], capture_output=True, text=True,
                          check=True).stdout.strip().splitlines()[0]
  except (OSError, subprocess.CalledProcessError, IndexError):
    return f'CPU ({platform.processor() or platform.machine()})'


def gpu_use() -> str:
  """The GPU's utilisation and memory in use (nvidia-smi), or why not."""
  try:
    return subprocess.run(['nvidia-smi', '--query-gpu=utilization.gpu,memory.used', '--format=csv,noheader'],
                          capture_output=True, text=True, check=True, timeout=10).stdout.strip()
  except (OSError, subprocess.SubprocessError):
    return 'no nvidia-smi'


def pack(name: str, workdir: pathlib.Path, stage: pathlib.Path, out: pathlib.Path, device: dict) -> pathlib.Path:
  """OUT/NAME.tar: `workdir` as the campaign's adopt step takes it (`campaign_model.export_run`), its parameters
  in float32, or bfloat16 when that tar is over TAR_LIMIT."""
  from searchless.commands import campaign_model
  for dtype in ('float32', 'bfloat16'):
    export = campaign_model.export_run(workdir, stage / dtype / name, device, dtype=dtype)
    tar = out / f'{name}.tar'
    with tarfile.open(tar, 'w') as t:
      t.add(export, arcname=name)
    if tar.stat().st_size <= TAR_LIMIT:
      return tar
  raise ValueError(f'{tar}: {tar.stat().st_size} bytes even in bfloat16')


def main(argv=None) -> None:
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('--data', required=True,
                 help='the merged train boards: a folder of board_columns, a board_value bag, or .zst of one')
  p.add_argument('--pack', metavar='BAG', help='here, before a call: pack this board_value bag into --data (a folder), then stop')
  p.add_argument('--out', help='one NAME.tar per model lands here (needed but with --pack)')
  p.add_argument('--seconds', type=float, default=420, help='training wall-clock of each model (they run at once)')
  p.add_argument('--init', nargs='*', default=[], metavar='NAME=PATH', help='start NAME from this checkpoint\'s params')
  p.add_argument('--models', nargs='*', default=list(MODELS), help='which of MODELS')
  p.add_argument('--set', nargs='*', default=[], metavar='NAME:KEY=VALUE',
                 help="a config override of one model, e.g. graph_tiny:data.batch_size=1024")
  p.add_argument('--workers', type=int, default=4, help='grain loader workers per model')
  p.add_argument('--scratch', default='/tmp/device_campaign', help='runs and the decompressed bag')
  p.add_argument('--quick', action='store_true', help='tiny batches: a CPU check of the driver')
  args = p.parse_args(argv)
  if args.pack:
    from searchless.data import board_columns
    print(f'{args.data}: {board_columns.pack(args.pack, args.data)}', flush=True)
    return
  if not args.out:
    p.error('--out is needed to train (only --pack goes without it)')
  started = time.time()
  scratch, out = pathlib.Path(args.scratch), pathlib.Path(args.out)
  shutil.rmtree(scratch, ignore_errors=True)
  scratch.mkdir(parents=True)
  out.mkdir(parents=True, exist_ok=True)
  bag = scratch / 'train_board_value_data.bag'
  decompress(pathlib.Path(args.data), bag)
  print(f'data: {bag.stat().st_size:,} bytes ready after {time.time() - started:.0f} s', flush=True)
  inits = dict(item.split('=', 1) for item in args.init)
  extra: dict[str, list[str]] = {}
  for item in args.set:
    name, _, override = item.partition(':')
    if name not in MODELS or '=' not in override:
      p.error(f'--set {item}: expected NAME:KEY=VALUE with NAME one of {", ".join(MODELS)}')
    extra.setdefault(name, []).append(override)
  procs = {}
  for name in args.models:
    config, overrides = MODELS[name]
    overrides = [*overrides, *COMMON, f'train.max_seconds={args.seconds}', f'data.worker_count={args.workers}',
                 *(QUICK if args.quick else []), *extra.get(name, [])]
    if name in inits:
      overrides.append(f'train.init_from={pathlib.Path(inits[name]).resolve()}')
    workdir = scratch / name
    log = open(scratch / f'{name}.log', 'w')
    env = {**os.environ, 'XLA_PYTHON_CLIENT_MEM_FRACTION': '0.25', 'PYTHONUNBUFFERED': '1'}
    cmd = [sys.executable, '-m', 'searchless.commands.train', '--config', config, '--workdir', str(workdir),
           '--data', str(bag), *overrides]
    print(f'{name}: {" ".join(cmd[3:])}', flush=True)
    procs[name] = (subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env), workdir)
  while any(proc.poll() is None for proc, _ in procs.values()):
    time.sleep(2 if args.quick else 30)
    print(f'[{time.time() - started:4.0f} s] GPU: {gpu_use()}', flush=True)
    for name, (proc, workdir) in procs.items():
      m = last_metrics(workdir)
      state = 'running' if proc.poll() is None else f'exit {proc.returncode}'
      print(f'[{time.time() - started:4.0f} s] {name}: {state}'
            + (f", step {m['step']}, loss {m['loss']:.4f}, {m['examples_per_s']:.0f} boards/s" if m else ''), flush=True)
  note = ({'note': 'on boards carried as columns (`searchless.data.board_columns`): each value its return bucket\'s '
                   'centre, the same training targets'} if pathlib.Path(args.data).is_dir() else {})
  for name, (proc, workdir) in procs.items():
    if proc.returncode != 0:
      print(f'{name} failed (exit {proc.returncode}):\n' + (scratch / f'{name}.log').read_text()[-3000:], flush=True)
      continue
    tar = pack(name, workdir, scratch / 'export', out, {'device': device_name(), 'cpu_cores': os.cpu_count(),
                                                        'models': len(procs), 'seconds': args.seconds, **note})
    m = last_metrics(workdir) or {}
    print(f"{name}: {m.get('step')} steps, {m.get('examples_per_s', 0):.0f} boards/s, final loss {m.get('loss', float('nan')):.4f}"
          f' -> {tar.name} ({tar.stat().st_size:,} bytes)', flush=True)
  with tarfile.open(out / 'logs.tar', 'w') as t:
    for log in scratch.glob('*.log'):
      t.add(log, arcname=log.name)
  print(f'done in {time.time() - started:.0f} s', flush=True)


if __name__ == '__main__':
  main()
