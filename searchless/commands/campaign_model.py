"""Which model is the strength campaign's: its training run, or a model trained elsewhere that it adopted.

A run on a lent GPU (``benchmarks/device_campaign.py``) comes back as an export; the adopt
step (``python -m searchless.commands.campaign --steps adopt --model DIR``) makes it the
campaign's model: evaluated and shipped as it is, and the start of the next CPU run.

The keep step (`keep`) writes the campaign's model and records to a folder in the checkout, to be
committed; a campaign started in a new folder restores them (`restore`), so a new machine loses
only its labels, which the shared games make again.
"""

import json
import os
import pathlib
import shutil
from typing import Any

from searchless.commands import campaign_log
from searchless.core import artefacts


def latest_step(train_dir: pathlib.Path) -> int:
  steps = [int(p.name) for p in (train_dir / 'checkpoints').glob('*') if p.name.isdigit()]
  return max(steps, default=0)


def adopted(workdir: pathlib.Path) -> pathlib.Path | None:
  """The model the campaign adopted last (`adopt`), if any."""
  index = workdir / 'adopted.json'
  return workdir / json.loads(index.read_text())['model'] if index.exists() else None


def current_model(workdir: pathlib.Path) -> tuple[pathlib.Path, str, int]:
  """The campaign's model: (its directory, its name in the records, its steps).

  WORKDIR/train once it holds a checkpoint; before that, the adopted model the next train step starts from.
  """
  train_dir = workdir / 'train'
  model = adopted(workdir)
  if latest_step(train_dir) or model is None:
    return train_dir, 'train', latest_step(train_dir)
  return model, str(model.relative_to(workdir)), side_model(model)[2]


EXPORT_FILES = ('train_summary.json', 'device.json', 'train_metrics.jsonl')  # Beside the parameters, what adopt reads.
CPU = 'CPU'  # device.json's device for a run on CPU cores (e.g. an A/B's winning arm): core-hours, no accelerator.


def export_run(run_dir: pathlib.Path, out: pathlib.Path, device: dict[str, Any], *, dtype: str = 'float32') -> pathlib.Path:
  """A training run as the adopt step takes it: its EMA parameters in `dtype` (`loading.export`) with its
  summary, metrics and config (``train_*``) and `device` (device.json: where it ran). Returns `out`."""
  from searchless.core import config as config_lib
  from searchless.model import loading
  params = loading.load_params(str(run_dir), ema=True)
  loading.export(str(out), params, config_lib.from_json((run_dir / 'config.json').read_text()), dtype=dtype)
  for name in ('summary.json', 'metrics.jsonl', 'config.json'):
    shutil.copy(run_dir / name, out / f'train_{name}')
  (out / 'device.json').write_text(json.dumps(device) + '\n')
  return out


def side_model(model: pathlib.Path) -> tuple[pathlib.Path, str, int]:
  """A model beside the campaign's (an exported run, or a training workdir): (its directory, its name in the
  records: the path, its steps)."""
  for summary in (model / 'train_summary.json', model / artefacts.TrainingSummary.FILE):
    if summary.exists():
      return model, str(model), json.loads(summary.read_text())['step']
  return model, str(model), 0


def adopt(workdir: pathlib.Path, model: pathlib.Path, distinct_boards: int | None) -> dict[str, Any]:
  """`model` (`export_run` of a run elsewhere, e.g. on a lent GPU) becomes the campaign's.

  Copies it to WORKDIR/adopted/NAME, moves WORKDIR/train (when it holds checkpoints) to train_until_STEP, and returns
  the run's record: its steps (train_summary.json), the device and its wall-clock (device.json's seconds: every
  stretch of the run, else the summary's last one). A run on the CPU (device `CPU`) costs core-hours (its seconds
  times its `cpu_cores`), not accelerator hours.
  """
  for needed in EXPORT_FILES:
    if not (model / needed).exists():
      raise FileNotFoundError(f'{model / needed}: not an exported run (campaign_model.export_run)')
  summary, device = (json.loads((model / name).read_text()) for name in ('train_summary.json', 'device.json'))
  target = workdir / 'adopted' / model.name
  if target.exists():
    raise FileExistsError(f'{target} exists: {model.name} was adopted already')
  shutil.copytree(model, target)
  train_dir = workdir / 'train'
  if step := latest_step(train_dir):
    train_dir.rename(workdir / f'train_until_{step}')
  (workdir / 'adopted.json').write_text(json.dumps({'model': str(target.relative_to(workdir))}) + '\n')
  log = [json.loads(line) for line in (model / 'train_metrics.jsonl').read_text().splitlines() if line.strip()]
  log = [r for r in log if 'loss' in r]
  wall = device.get('seconds', summary['wall_seconds'])  # The device's wall-clock for the whole run (all its stretches).
  on_cpu = device['device'] == CPU
  return {'step': 'train', 'model': str(target.relative_to(workdir)), 'device': device['device'],
          'steps': summary['step'], 'wall_seconds': wall,
          'core_hours': round(wall * device['cpu_cores'] / 3600, 4) if on_cpu else 0.0,
          'device_hours': 0.0 if on_cpu else round(wall / 3600, 4), 'device_cpu_cores': device['cpu_cores'],
          'models_sharing_the_device': device['models'], 'batch_size': summary['batch_size'],
          'action_values_trained': int(sum(r.get('targets', 0) for r in log)),
          'final_train_loss': log[-1]['loss'] if log else None, 'distinct_boards': distinct_boards}


KEPT_MODEL = 'model'  # In a keep folder: the campaign's model, as `export_run` writes it (float32 EMA parameters).
KEPT_RECORDS = ('runs.jsonl', 'curve.jsonl')  # And the campaign's records, the line of runs and the curve so far.


def _aside(keep_dir: pathlib.Path, pid: str, part: str) -> pathlib.Path:
  """Where `keep` writes its new folder (`part` 'tmp') and sets the previous one aside ('old'): beside `keep_dir`,
  hidden, named by the process."""
  return keep_dir.with_name(f'.{keep_dir.name}.{pid}.{part}')


def keep(workdir: pathlib.Path, keep_dir: pathlib.Path) -> dict[str, Any]:
  """Writes the campaign's model and records to `keep_dir` (replacing what it held), so that a new machine resumes
  from them (`restore`); returns the keep step's record.

  `keep_dir` is meant to be committed (e.g. in the checkout): the labels are made again from the shared games on a
  new machine, but the model's training is not. The model is `export_run` of WORKDIR/train, or the adopted model
  as it is; its device.json gives this machine's cores and the training wall-clock in WORKDIR/runs.jsonl.
  """
  model_dir, name, step = current_model(workdir)
  if name == 'train' and not step:
    raise FileNotFoundError(f'{workdir}: the campaign has no model to keep yet (no checkpoint, nothing adopted)')
  recover_kept(keep_dir)
  runs = campaign_log.read_runs(workdir)
  device = {'device': CPU, 'cpu_cores': os.cpu_count(), 'models': 1,
            'seconds': round(sum(r.get('wall_seconds', 0) for r in runs if r.get('step') == 'train'), 1)}
  tmp, old = (_aside(keep_dir, str(os.getpid()), part) for part in ('tmp', 'old'))
  shutil.rmtree(tmp, ignore_errors=True)
  tmp.mkdir(parents=True)
  if name == 'train':
    export_run(model_dir, tmp / KEPT_MODEL, device)
  else:
    shutil.copytree(model_dir, tmp / KEPT_MODEL)
  for record in KEPT_RECORDS:
    if (workdir / record).exists():
      shutil.copy(workdir / record, tmp / record)
  (tmp / 'README.md').write_text(
      '# The strength campaign, kept (issue 27)\n\n'
      'Written by `python -m searchless.commands.campaign --steps keep --keep_dir DIR`; do not edit by hand. '
      f'`{KEPT_MODEL}/` is the campaign\'s model at step {step} ({name}), its EMA parameters in float32 with its '
      'training run\'s config and metrics; `runs.jsonl` and `curve.jsonl` are the campaign\'s records. A campaign '
      'started in a new folder with `--keep_dir DIR` starts from them (`campaign_model.restore`): its next train '
      'step starts from these parameters, its labels are made again.\n')
  if keep_dir.exists():  # Set aside, not removed, until the new one is in place: a crash between loses neither.
    keep_dir.rename(old)
  tmp.rename(keep_dir)
  shutil.rmtree(old, ignore_errors=True)
  size = sum(p.stat().st_size for p in keep_dir.rglob('*') if p.is_file())
  return {'step': 'keep', 'model': name, 'checkpoint_step': step, 'keep_dir': str(keep_dir), 'bytes': size}


def recover_kept(keep_dir: pathlib.Path) -> None:
  """Mends what a `keep` that crashed between its two renames left: the previous kept folder, set aside as
  `.NAME.PID.old` beside `keep_dir`, goes back to `keep_dir` when that is missing (the newest, if several), and is
  removed when the new one is in place."""
  olds = sorted(keep_dir.parent.glob(_aside(keep_dir, '*', 'old').name), key=lambda p: p.stat().st_mtime)
  if olds and not keep_dir.exists():
    olds.pop().rename(keep_dir)
  for old in olds:
    shutil.rmtree(old)


def restore(workdir: pathlib.Path, keep_dir: pathlib.Path) -> dict[str, Any] | None:
  """A new campaign folder (no runs.jsonl yet) takes the model and records `keep` wrote to `keep_dir`: the records
  are copied, the model becomes the adopted one the next train step starts from. Returns the restore step's record
  (None when WORKDIR is not new or `keep_dir` holds nothing kept)."""
  recover_kept(keep_dir)
  if (workdir / 'runs.jsonl').exists() or not (keep_dir / KEPT_MODEL / 'train_summary.json').exists():
    return None
  step = side_model(keep_dir / KEPT_MODEL)[2]
  target = workdir / 'adopted' / f'kept_{step}'
  if target.exists():
    shutil.rmtree(target)  # Left by a restore that stopped before its records were written.
  shutil.copytree(keep_dir / KEPT_MODEL, target)
  (workdir / 'adopted.json').write_text(json.dumps({'model': str(target.relative_to(workdir))}) + '\n')
  for record in reversed(KEPT_RECORDS):  # runs.jsonl last: once it exists, the restore is done.
    if (keep_dir / record).exists():
      shutil.copy(keep_dir / record, workdir / record)
  return {'step': 'restore', 'model': str(target.relative_to(workdir)), 'checkpoint_step': step, 'from': str(keep_dir)}
