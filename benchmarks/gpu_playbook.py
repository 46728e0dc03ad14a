"""The GPU playbook: the paper's models measured, then the design card's transformer trained at full speed.

Here, once, before a device call (both folders git-excluded; together under the call's 64 MiB):

    echo /.whl/ >> .git/info/exclude; echo /.device/ >> .git/info/exclude
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \\
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \\
        dm-haiku==0.0.17 jmp==0.0.4 grain==0.2.18 array-record portpicker bagz==0.3.8 ml_collections==1.1.0 \\
        tensorboardX==2.6.5 zstandard          # what the image (jax, optax, orbax, numpy) lacks
    pip wheel --no-deps -w .whl chess==1.11.2   # an sdist only
    python -m campaign --workdir ~/searchless-data/campaign --shared ../shared --steps pack   # the labelled boards,
    cp -r ~/searchless-data/campaign/device/data .device/data                              # packed within the carry

Then one device call (`run`, carry ['.whl', '.device'], timeout_s 600), the command on one line:

    python3 benchmarks/gpu_playbook.py --wheels .whl --data .device/data --out $OUT --seconds 540

(`--wheels`: those installed first into a folder of the scratch's, on the path of every process it starts; two
calls: `--parts measure` then `--parts train`, each with its own `--seconds`). In order:

a. measure (`--measure-seconds`, 120): MEASURE's configs at `--batch` (4096) with the library's own update
   (`benchmarks/train_step.py`: loss, grads, clip, Adam, EMA on random tokens), each in turn: ms a step,
   examples/s, MFU = model FLOPs (3 x `model.flops_per_sequence`: forward + backward matmuls) / s / the dense peak
   (H200 bf16 989 TFLOP/s, fp32 494), beside XLA's own count (`compiled.cost_analysis()`, every op); peak memory;
   the largest batch that fits, by doubling while XLA's memory analysis of the compiled update fits the device.
   A config over the device's memory at `--batch` runs in micro-batches (`train.micro_batch`). Where bf16 MFU is
   under 45%, two steps are traced (`jax.profiler`) into OUT/profiles.tar.gz. Then the training config at
   TRAIN_BATCHES, for the smallest batch at >= 30% MFU (the largest measured where none is).
b. train: `--train` (pretrained_transformer_gpu: the shipped 4M board-packed transformer with priors, continued
   from `--init`, a shipped name or a folder; `--train 9m --init none` is the paper's 9M from scratch, on per-move
   data) (its GPU variant's
   settings; `--set`'s and that batch), by `searchless.commands.train` for the time left, on the boards carried
   (`campaign.board_columns`, unpacked with every core). Then exported (`loading.export`: EMA parameters
   in float32, the run's metrics, summary and config beside them) as OUT/model.tar, split in 16 MiB parts
   (model.tar.00, .01, ...) when larger: `cat model.tar.* > model.tar`.

OUT gets playbook.json (every number above), playbook.md (the table), playbook.log (the trainer's log), the
model's tar (or its parts) and profiles.tar.gz: at most 8 files. Locally, a toy run of it all: `--quick`.
"""

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import time

MEASURE = ['9m:bfloat16', '9m:float32', '136m:bfloat16', '270m:bfloat16']  # In this order; the budget may end it.
TRAIN_BATCHES = [1024, 2048, 4096, 8192]  # Boards (or sequences) a step tried for the trained model.
TARGET_MFU = 0.30
PROFILE_BELOW = 0.45
# The trained model's config: a GPU variant (configs/*_gpu.py: bfloat16, the whole batch, no periodic evaluation,
# one checkpoint kept); the playbook overrides only the batch, the wall-clock and the loader workers (and `--set`).
TRAIN_CONFIG = 'pretrained_transformer_gpu'
# --quick: tiny models in float32 (XLA:CPU compiles bfloat16 slowly), a few steps.
QUICK = {
  'measure': ['tiny:float32'],
  'train': 'tiny_packed',
  'batch': 8,
  'batches': [4, 8],
  'steps': 2,
  'set': ['model.embedding_dim=16', 'model.num_layers=1', 'model.num_heads=2', 'train.compute_dtype=float32'],
}
ROOT = pathlib.Path(__file__).resolve().parents[1]  # The checkout.
sys.path.insert(0, str(ROOT))  # The campaign's board columns: a tool of the checkout, carried with it.
PART_LIMIT = 16 * 2**20 - 4096  # The device's limit on a returned file, with room to spare.
EXPORT_SECONDS = 60  # Kept back from training for the export.


def log(message: str) -> None:
  print(f'[{time.strftime("%H:%M:%S")}] {message}', flush=True)


def measure_part(args, scratch: pathlib.Path) -> dict:
  """Part a, in this process: every MEASURE row, the largest batches, the trained config's batch."""
  import jax  # Here only: the parent process leaves the GPU to the training process.

  sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
  import train_step  # pylint: disable=import-outside-toplevel

  deadline = time.time() + args.measure_seconds
  device = jax.devices()[0]
  stats = device.memory_stats() or {}
  limit = stats.get('bytes_limit')
  result = {
    'device': device.device_kind,
    'platform': device.platform,
    'devices': jax.device_count(),
    'memory_bytes_per_device': limit,
    'batch': args.batch,
    'flops': 'model: 3 x model.flops_per_sequence (forward + backward matmuls); xla: cost_analysis()',
    'rows': [],
    'skipped': [],
  }
  profiles = scratch / 'profiles'
  for item in args.measure:  # First what the call is for: every row measured.
    name, _, dtype = item.partition(':')
    if time.time() > deadline:
      result['skipped'].append(f'{item}: out of the measure budget')
      continue
    trace = profiles / f'{name}_{dtype}' if dtype == 'bfloat16' else None
    row, micro = None, args.batch
    while row is None:  # Over the device's memory in one pass: micro-batches (train.micro_batch), halved until it fits.
      overrides = [f'train.micro_batch={micro}'] if micro < args.batch else []
      try:
        row = train_step.measure(name, dtype, args.batch, args.steps, overrides, trace and str(trace), limit)
      except Exception as error:  # pylint: disable=broad-except  # XLA's out-of-memory is a plain runtime error.
        if not (isinstance(error, MemoryError) or 'RESOURCE_EXHAUSTED' in str(error)) or micro <= 64:
          raise
        log(f'{item}: {error}'.splitlines()[0][:300])
        micro = micro // 4 if micro == args.batch else micro // 2
    if trace and row['mfu'] is not None and row['mfu'] >= PROFILE_BELOW:
      shutil.rmtree(trace, ignore_errors=True)  # Profiles only where MFU is low.
    row['profiled'] = bool(trace and trace.exists())
    result['rows'].append(row)
    log(row_line(row))
  result['train'] = train_batch(train_step, args, deadline)  # Then what part b needs.
  for row in result['rows']:  # Then, in the time left, how far each batch could grow in one pass.
    if row['micro_batch']:  # The batch did not fit in one pass; its micro-batch did.
      row['largest_batch'] = {'batch': row['micro_batch'], 'exact': False, 'note': 'the micro-batch that ran'}
    else:
      row['largest_batch'] = largest_batch(train_step, row['config'], row['dtype'], row['batch'], limit, deadline)
  if profiles.exists() and any(profiles.iterdir()):
    with tarfile.open(scratch / 'profiles.tar.gz', 'w:gz') as t:
      t.add(profiles, arcname='profiles')
  return result


def largest_batch(train_step, name: str, dtype: str, batch: int, limit: int | None, deadline: float) -> dict:
  """The largest power-of-two multiple of `batch` (which ran) whose compiled update fits `limit` (XLA's memory
  analysis, nothing run), by doubling while time is left: {'batch', 'bytes', 'exact': whether the next doubling was
  seen not to fit}."""
  if not limit:
    return {'batch': None, 'note': 'the device reports no memory limit'}
  fits, size, exact = batch, None, False  # `batch` itself ran.
  candidate = 2 * batch
  while time.time() < deadline and candidate <= 64 * batch:
    needed = train_step.compiled_bytes(name, dtype, candidate)
    if needed > limit:
      exact = True
      break
    fits, size = candidate, needed
    candidate *= 2
  return {'batch': fits, 'bytes': size, 'exact': exact}


def train_batch(train_step, args, deadline: float) -> dict:
  """The trained config's smallest batch of TRAIN_BATCHES at >= TARGET_MFU (bfloat16, random data)."""
  tried = []
  for batch in args.train_batches:
    if tried and time.time() > deadline:
      break
    row = train_step.measure(args.train, 'bfloat16', batch, args.steps, args.set)  # --set may say float32.
    tried.append(row)
    log(row_line(row))
    if row['mfu'] is None or row['mfu'] >= TARGET_MFU:
      break
  chosen = next((r for r in tried if r['mfu'] is None or r['mfu'] >= TARGET_MFU), tried[-1])
  return {'config': args.train, 'batch': chosen['batch'], 'mfu': chosen['mfu'], 'rows': tried}


def row_line(row: dict) -> str:
  mfu = lambda x: f'{100 * x:.1f}%' if x is not None else 'n/a'
  peak = row.get('peak_mib_per_device')
  return (
    f'{row["config"]} {row["dtype"]} batch {row["batch"]} (micro {row["micro_batch"] or "-"}): '
    f'{row["params"] / 1e6:.1f}M params, {row["step_ms"]:.1f} ms/step, {row["examples_per_s"]:,.0f} examples/s, '
    f'MFU {mfu(row["mfu"])} (XLA count {mfu(row["mfu_xla"])}), peak {peak and f"{peak:,.0f}"} MiB'
  )


def table(result: dict) -> str:
  """playbook.md: one row per measured config."""
  lines = [
    f'# GPU playbook on {result["device"]}',
    '',
    '| config | dtype | batch | micro | params | ms/step | '
    'examples/s | MFU (model) | MFU (XLA) | peak MiB | largest batch |',
    '|' + ' --- |' * 11,
  ]
  for r in result['rows'] + result.get('train', {}).get('rows', []):
    largest = r.get('largest_batch', {}).get('batch')
    pct = lambda x: f'{100 * x:.1f}%' if x is not None else 'n/a'
    peak = r.get('peak_mib_per_device')
    lines.append(
      f'| {r["config"]} | {r["dtype"]} | {r["batch"]} | {r["micro_batch"] or "-"} | '
      f'{r["params"] / 1e6:.1f}M | {r["step_ms"]:.1f} | {r["examples_per_s"]:,.0f} | {pct(r["mfu"])} | '
      f'{pct(r["mfu_xla"])} | {f"{peak:,.0f}" if peak else "n/a"} | {largest or "n/a"} |'
    )
  if 'training' in result:
    t = result['training']
    lines += [
      '',
      f'Trained {t["config"]} for {t["seconds"]:.0f} s: {t.get("step")} steps of {t["batch"]}, '
      f'{t.get("examples_per_s", 0):,.0f} examples/s, MFU {t.get("mfu")}, final loss {t.get("loss")}.',
    ]
  return '\n'.join(lines) + '\n'


def train_part(args, scratch: pathlib.Path, out: pathlib.Path, batch: int, seconds: float, env: dict) -> dict:
  """Part b: the training process for `seconds`, then the export into OUT."""
  data = pathlib.Path(args.data)
  if data.is_dir():
    from campaign import board_columns  # The campaign's carry format: the checkout travels with the call.

    bag = scratch / 'train_board_value_data.bag'
    log(f'data: {board_columns.unpack(data, bag, workers=os.cpu_count() or 1):,} boards unpacked')
  else:
    bag = data
  workdir = scratch / 'train'
  overrides = [
    f'data.batch_size={batch}',
    f'train.max_seconds={seconds:.0f}',
    f'data.worker_count={args.workers}',
    *args.set,
  ]
  if args.init != 'none':  # A shipped model's name, or a folder.
    from searchless.model import loading

    init = loading.model_folder(args.init)
    overrides.append(f'train.init_from={init}')
  cmd = [
    sys.executable,
    '-m',
    'searchless.commands.train',
    '--config',
    args.train,
    '--workdir',
    str(workdir),
    '--data',
    str(bag),
    *overrides,
  ]
  log(' '.join(cmd[1:]))
  with open(out / 'playbook.log', 'w') as trainer_log:
    trainer = subprocess.Popen(cmd, stdout=trainer_log, stderr=subprocess.STDOUT, env=env)
    while trainer.poll() is None:  # Its progress, every 30 s: what the device's output shows.
      time.sleep(1 if args.quick else 30)
      last = last_metrics(workdir)
      if last:
        log(
          f'step {last["step"]}, loss {last["loss"]:.4f}, {last["examples_per_s"]:,.0f} examples/s, '
          f'MFU {last.get("mfu") or 0:.1%}'
        )
  if trainer.returncode:
    raise SystemExit(
      f'training failed (exit {trainer.returncode}); see playbook.log:\n' + (out / 'playbook.log').read_text()[-3000:]
    )
  last = last_metrics(workdir) or {}
  return {
    'config': args.train,
    'overrides': overrides,
    'batch': batch,
    'seconds': seconds,
    **{k: last.get(k) for k in ('step', 'loss', 'examples_per_s', 'mfu', 'targets_per_s')},
    'files': export(workdir, scratch / 'export' / args.train, out),
  }


def last_metrics(workdir: pathlib.Path) -> dict | None:
  """The run's last logged training metrics (metrics.jsonl), None before the first."""
  path = workdir / 'metrics.jsonl'
  for line in reversed(path.read_text().splitlines() if path.exists() else []):
    try:
      row = json.loads(line)
    except json.JSONDecodeError:  # A line the trainer is writing now.
      continue
    if 'loss' in row:
      return row
  return None


def device_metadata(workdir: pathlib.Path) -> dict:
  """Where the run trained, as the campaign's adopt step reads it (`loading.export`'s metadata): the device, the CPU
  cores feeding it, the models sharing it and the run's wall-clock."""
  import jax  # After training: the device is free.

  device = jax.devices()[0]
  summary = workdir / 'summary.json'
  seconds = json.loads(summary.read_text()).get('wall_seconds') if summary.exists() else None
  return {
    'device': 'CPU' if device.platform == 'cpu' else device.device_kind,
    'cpu_cores': os.cpu_count(),
    'models': 1,
    'seconds': seconds,
  }


def export(workdir: pathlib.Path, stage: pathlib.Path, out: pathlib.Path) -> list[str]:
  """The run as a model to play (float32 EMA parameters, its metrics, summary and config), as OUT/model.tar or, over
  PART_LIMIT, its parts OUT/model.tar.00, .01, ... Returns the files' names."""
  from searchless.core import config as config_lib
  from searchless.model import loading

  params = loading.load_params(str(workdir), ema=True)
  loading.export(
    str(stage),
    params,
    config_lib.from_json((workdir / 'config.json').read_text()),
    dtype='float32',
    run=str(workdir),
    metadata=device_metadata(workdir),
  )
  tar = stage.parent / 'model.tar'
  with tarfile.open(tar, 'w') as t:
    t.add(stage, arcname=stage.name)
  if tar.stat().st_size <= PART_LIMIT:
    shutil.copy(tar, out / 'model.tar')
    return ['model.tar']
  names = []
  with open(tar, 'rb') as f:
    while chunk := f.read(PART_LIMIT):
      names.append(f'model.tar.{len(names):02d}')
      (out / names[-1]).write_bytes(chunk)
  return names


def parse(argv=None) -> argparse.Namespace:
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('--out', required=True, help='what comes back: playbook.json/.md/.log, model.tar*, profiles.tar.gz')
  p.add_argument('--data', help='the train boards: a folder of board_columns or a bag (needed by part train)')
  p.add_argument('--parts', nargs='+', default=['measure', 'train'], choices=['measure', 'train'])
  p.add_argument('--seconds', type=float, default=540, help="the whole playbook's wall-clock")
  p.add_argument('--measure-seconds', type=float, default=120, help="part a's share of it")
  p.add_argument('--measure', nargs='*', default=MEASURE, metavar='CONFIG:DTYPE')
  p.add_argument('--batch', type=int, default=4096, help="part a's batch")
  p.add_argument('--steps', type=int, default=5, help='timed steps a measurement')
  p.add_argument('--train', default=TRAIN_CONFIG, help='the config part b trains')
  p.add_argument('--train-batches', type=int, nargs='+', default=TRAIN_BATCHES)
  p.add_argument('--train-batch', type=int, help="part b's batch (default: part a's choice, else 2048)")
  p.add_argument(
    '--init',
    default=None,
    help='start from these parameters (default: the shipped '
    'pretrained-transformer for --train pretrained_transformer, else none); none: from scratch',
  )
  p.add_argument('--set', nargs='*', default=[], metavar='KEY=VALUE', help='overrides of the trained config')
  p.add_argument('--wheels', help="a folder of wheels the machine lacks: installed first (a device's image)")
  p.add_argument('--workers', type=int, default=12, help='loader processes feeding the GPU')
  p.add_argument('--scratch', default=os.path.join(os.environ.get('TMPDIR', '/tmp'), 'gpu_playbook'))
  p.add_argument('--quick', action='store_true', help='a toy run of it all (tiny configs, a few steps): for a CPU')
  p.add_argument('--phase', default='all', choices=['all', 'measure'], help=argparse.SUPPRESS)
  args = p.parse_args(argv)
  if args.quick:
    args.measure, args.train, args.batch = QUICK['measure'], QUICK['train'], QUICK['batch']
    args.train_batches, args.steps, args.workers = QUICK['batches'], QUICK['steps'], 0
    args.set = [*QUICK['set'], *args.set]
  if 'train' in args.parts and not args.data and args.phase == 'all':
    p.error('--data is needed by part train')
  return args


def prepare(wheels: str | None, scratch: pathlib.Path) -> dict[str, str]:
  """The environment of the processes the playbook starts (and its own path): with `wheels`, those installed into
  SCRATCH/site first and that and the checkout on the path; the checkout's configs where the package finds them."""
  env = dict(os.environ, PYTHONUNBUFFERED='1')
  if not wheels:
    return env
  site = scratch / 'site'
  subprocess.run(
    [
      sys.executable,
      '-m',
      'pip',
      'install',
      '-q',
      '--no-index',
      '--no-deps',
      '--no-compile',
      '--target',
      str(site),
      *map(str, sorted(pathlib.Path(wheels).glob('*.whl'))),
    ],
    check=True,
  )
  paths = [str(site), str(ROOT)]
  sys.path[:0] = paths
  env['PYTHONPATH'] = os.pathsep.join([*paths, *filter(None, [env.get('PYTHONPATH')])])
  configs = ROOT / 'searchless' / 'configs'
  if not configs.exists():  # A checkout run from its tree, not installed: configs/ maps to searchless.configs.
    configs.symlink_to(pathlib.Path('..') / 'configs', target_is_directory=True)
  return env


def main(argv=None) -> dict:
  started = time.time()
  args = parse(argv)
  scratch, out = pathlib.Path(args.scratch), pathlib.Path(args.out)
  if args.phase == 'measure':  # The child process of part a.
    result = measure_part(args, scratch)
    (scratch / 'measure.json').write_text(json.dumps(result, indent=1) + '\n')
    return result
  shutil.rmtree(scratch, ignore_errors=True)
  scratch.mkdir(parents=True)
  out.mkdir(parents=True, exist_ok=True)
  env = prepare(args.wheels, scratch)
  if args.init is None:  # The shipped pretrained-transformer for its own config.
    from searchless.model import loading

    shipped = args.train in ('pretrained_transformer', TRAIN_CONFIG)
    args.init = str(loading.pretrained_dir(loading.PRETRAINED_TRANSFORMER)) if shipped else 'none'
  result: dict = {'rows': [], 'skipped': []}
  if 'measure' in args.parts:  # In its own process, so that the GPU is whole again for training.
    cmd = [
      sys.executable,
      __file__,
      *(argv if argv is not None else sys.argv[1:]),
      '--phase',
      'measure',
      '--scratch',
      str(scratch),
    ]
    if args.quick:
      cmd.append('--quick')
    code = subprocess.run(cmd, check=False, timeout=args.measure_seconds + 240, env=env).returncode
    if code:
      raise SystemExit(f'part measure failed (exit {code})')
    result = json.loads((scratch / 'measure.json').read_text())
    if (scratch / 'profiles.tar.gz').exists():
      shutil.copy(scratch / 'profiles.tar.gz', out / 'profiles.tar.gz')
  if 'train' in args.parts:
    batch = args.train_batch or result.get('train', {}).get('batch') or 2048
    seconds = max(10.0, args.seconds - (time.time() - started) - EXPORT_SECONDS)
    result['training'] = train_part(args, scratch, out, batch, seconds, env)
    log(f'trained {args.train}: {result["training"]["step"]} steps, loss {result["training"]["loss"]:.4f}')
  result['seconds'] = time.time() - started
  (out / 'playbook.json').write_text(json.dumps(result, indent=1) + '\n')
  if 'device' in result:
    (out / 'playbook.md').write_text(table(result))
    print(table(result), flush=True)
  log(f'done in {result["seconds"]:.0f} s; OUT: {", ".join(sorted(p.name for p in out.iterdir()))}')
  return result


if __name__ == '__main__':
  main()
