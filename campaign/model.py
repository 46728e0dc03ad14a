"""Which model is the strength campaign's: its training run, or a model trained elsewhere that it adopted.

A run on a lent GPU (the GPU playbook) comes back as an export with its run's record (`export_run`);
the adopt step (``python -m campaign --steps adopt --model DIR``) makes it the campaign's model:
evaluated and shipped as it is, and the start of the next run. A campaign in a new folder (a new
machine) starts from the shipped model; only what the ship step ships outlives the machine.
"""

import json
import pathlib
import shutil
from typing import Any

from searchless.core import artefacts
from searchless.model import loading
from searchless.plumbing import errors


def latest_step(train_dir: pathlib.Path) -> int:
  """The latest checkpoint of the training run `train_dir` (`loading.latest_step`); 0 before the first."""
  return loading.latest_step(train_dir / 'checkpoints') or 0


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


EXPORT_FILES = ('train_summary.json', loading.EXPORT_METADATA, 'train_metrics.jsonl')  # What adopt reads.
CPU = 'CPU'  # export.json's device for a run on CPU cores (e.g. an A/B's winning arm): core-hours, no accelerator.


def export_run(
  run_dir: pathlib.Path, out: pathlib.Path, device: dict[str, Any], *, dtype: str = 'float32'
) -> pathlib.Path:
  """A training run as the adopt step takes it: its EMA parameters in `dtype` with its record (`loading.export`'s
  `run`) and `device` (where it ran: export.json). Returns `out`."""
  from searchless.core import config as config_lib

  params = loading.load_params(str(run_dir), ema=True)
  loading.export(
    str(out),
    params,
    config_lib.from_json((run_dir / 'config.json').read_text()),
    dtype=dtype,
    run=str(run_dir),
    metadata=device,
  )
  return out


def device_of(model: pathlib.Path) -> dict[str, Any]:
  """Where an exported run was trained (`export_run`'s `device`)."""
  return json.loads((model / loading.EXPORT_METADATA).read_text())


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
  the run's record: its steps (train_summary.json), the device and its wall-clock (export.json's seconds: every
  stretch of the run, else the summary's last one). A run on the CPU (device `CPU`) costs core-hours (its seconds
  times its `cpu_cores`), not accelerator hours.
  """
  for needed in EXPORT_FILES:
    if not (model / needed).exists():
      raise errors.MissingInput(f'{model / needed}: not an exported run (campaign.model.export_run)')
  summary, device = json.loads((model / 'train_summary.json').read_text()), device_of(model)
  target = workdir / 'adopted' / model.name
  if target.exists():
    raise errors.OutputExists(f'{target} exists: {model.name} was adopted already')
  shutil.copytree(model, target)
  train_dir = workdir / 'train'
  if step := latest_step(train_dir):
    train_dir.rename(workdir / f'train_until_{step}')
  (workdir / 'adopted.json').write_text(json.dumps({'model': str(target.relative_to(workdir))}) + '\n')
  log = [json.loads(line) for line in (model / 'train_metrics.jsonl').read_text().splitlines() if line.strip()]
  log = [r for r in log if 'loss' in r]
  wall = device.get(
    'seconds', summary['wall_seconds']
  )  # The device's wall-clock for the whole run (all its stretches).
  on_cpu = device['device'] == CPU
  return {
    'step': 'train',
    'model': str(target.relative_to(workdir)),
    'device': device['device'],
    'steps': summary['step'],
    'wall_seconds': wall,
    'core_hours': round(wall * device['cpu_cores'] / 3600, 4) if on_cpu else 0.0,
    'device_hours': 0.0 if on_cpu else round(wall / 3600, 4),
    'device_cpu_cores': device['cpu_cores'],
    'models_sharing_the_device': device['models'],
    'batch_size': summary['batch_size'],
    'action_values_trained': int(sum(r.get('targets', 0) for r in log)),
    'final_train_loss': log[-1]['loss'] if log else None,
    'distinct_boards': distinct_boards,
  }
