r"""The strength campaign's ship step: its model replaces a shipped model when significantly stronger.

    python -m campaign --workdir DIR --steps evaluate,ship --install

Stronger means: on the same puzzles (the dev puzzles), the lower end of the campaign
checkpoint's 95% Wilson interval lies above the upper end of the shipped model's
(`better`). Then the checkpoint's EMA parameters are exported in bfloat16
(WORKDIR/ship/STEP/export), measured as the shipped models are measured (`SHIP_LADDER`
with `searchless.evaluation.strength`: puzzles by rating band, games against Stockfish at
UCI_Elo 1350/1500/1800, STS1) and given a model card; with ``install`` the export replaces
the shipped model in the package (`loading.pretrained_dir`; `install_model`: without orbax's commit
marker, which names a folder of the machine), the one place the campaign writes into the package. The
shipped transformer keeps its own name, ``pretrained-transformer``, so the paper's architecture keeps a
model that plays.
"""

import dataclasses
import json
import pathlib
import shutil
import time
from typing import Any

from campaign import card
from campaign import log as campaign_log
from searchless.evaluation import strength
from searchless.model import loading
from searchless.plumbing import errors

SHIP_LADDER = (1350, 1500, 1800)  # The shipped models' games: 20 against each level (`ship`'s protocol).
SHIP_GAMES = 20


def better(candidate: tuple[int, int], shipped: tuple[int, int]) -> bool:
  """Whether `candidate` (solved, puzzles) is significantly above `shipped`: their 95% Wilson intervals apart.

  >>> better((80, 1500), (10, 1500)), better((16, 1500), (10, 1500))
  (True, False)
  """
  from searchless.evaluation import metrics

  return metrics.wilson(*candidate)[0] > metrics.wilson(*shipped)[1]


def shipped_puzzles(puzzles: pathlib.Path, out: pathlib.Path, name: str = 'pretrained') -> dict[str, Any]:
  """The shipped model `name` on `puzzles` (solved, n), measured once per shipped model card (cached in `out`)."""
  from searchless.evaluation import puzzles as puzzle_eval

  card = (pathlib.Path(str(loading.pretrained_dir(name))) / 'MODEL_CARD.md').read_text()
  key = {'card': card, 'puzzles': str(puzzles)}
  cache = out / ('shipped.json' if name == loading.PRETRAINED else f'shipped_{name}.json')
  if cache.exists() and (done := json.loads(cache.read_text()))['key'] == key:
    return done['result']
  result = puzzle_eval.run(
    puzzles=str(puzzles), agent=f'checkpoint:{name}', out=out / f'shipped_{name}', progress=False
  )
  result = {'solved': result['solved'], 'n': result['n']}
  out.mkdir(parents=True, exist_ok=True)
  cache.write_text(json.dumps({'key': key, 'result': result}) + '\n')
  return result


def portable(experiment: Any, workdir: pathlib.Path) -> Any:
  """`experiment` as a shipped config records it: no path of this machine. Its data is named relative to the
  campaign's folder, and a model it started from by its shipped name (or its path in the campaign's folder).

  >>> import ml_collections
  >>> c = portable(ml_collections.ConfigDict({'data': {'train': '/w/boards/train.bag'},
  ...                                         'train': {'init_from': '/x/searchless/pretrained'}}), pathlib.Path('/w'))
  >>> c.data.train, c.train.init_from
  ('boards/train.bag', 'pretrained')
  """
  import ml_collections

  out = ml_collections.ConfigDict(experiment.to_dict() if hasattr(experiment, 'to_dict') else dict(experiment))

  def named(path: str) -> str:
    if not path or not pathlib.PurePath(path).is_absolute():
      return path
    parts = pathlib.PurePath(path).parts
    for name, folder in loading.SHIPPED.items():
      if parts[-2:] == ('searchless', folder):
        return name
    try:
      return str(pathlib.PurePath(path).relative_to(workdir))
    except ValueError:
      return pathlib.PurePath(path).name

  out.data.train = ','.join(named(p) for p in str(out.data.train).split(','))
  if 'eval' in out.data:
    out.data.eval = named(str(out.data.eval))
  if 'init_from' in out.get('train', {}):
    out.train.init_from = named(str(out.train.init_from))
  return out


# What an export holds that the package must not: orbax's commit marker, which names the folder the export was
# written in (a path of the machine that made it). Loading needs none of it.
NOT_SHIPPED = ('commit_success.txt',)


def install_model(export: pathlib.Path, target: pathlib.Path) -> None:
  """Replaces the shipped model's folder `target` with the export `export`, leaving out `NOT_SHIPPED`."""
  shutil.rmtree(target, ignore_errors=True)
  shutil.copytree(export, target, ignore=shutil.ignore_patterns(*NOT_SHIPPED))


def ship(
  workdir: pathlib.Path,
  evaluation: dict[str, Any],
  puzzles: pathlib.Path,
  totals: dict[str, float],
  protocol: strength.Protocol,
  *,
  install: bool = False,
  model_dir: pathlib.Path | None = None,
  name: str = 'pretrained',
) -> dict[str, Any]:
  """The ship step for the model `evaluation` measured (a line of curve.jsonl); returns what it did.

  `model_dir`: the model (default WORKDIR/train, its latest checkpoint; an adopted export).
  `name`: the shipped model it must beat and replaces (`loading.SHIPPED`; a transformer can replace
  `pretrained-transformer`).
  `protocol`: how the export is measured for its card (`strength.measure`: the shipped models' protocol).
  """
  start = time.time()
  candidate = (evaluation['puzzles_solved'], evaluation['puzzles'])
  shipped = shipped_puzzles(puzzles, workdir / 'ship', name)
  record: dict[str, Any] = {
    'step': 'ship',
    'as': name,
    'checkpoint_step': evaluation['checkpoint_step'],
    'candidate': list(candidate),
    'shipped': [shipped['solved'], shipped['n']],
  }
  if not better(candidate, (shipped['solved'], shipped['n'])):
    return {**record, 'shipped_now': False, 'wall_seconds': round(time.time() - start, 1)}
  model_dir = model_dir or workdir / 'train'
  model = evaluation.get('model', 'train')
  out = workdir / 'ship' / (str(evaluation['checkpoint_step']) if model == 'train' else pathlib.Path(model).name)
  export = out / 'export'
  _, params, experiment = loading.load_model(str(model_dir))
  if experiment is None:
    raise errors.BadInput(f'{model_dir} has no experiment config: not a model the campaign trained')
  if name == loading.PRETRAINED_TRANSFORMER and experiment.model.kind != 'transformer':
    raise errors.BadInput(f"{model_dir} is a {experiment.model.kind} model: {name} ships the paper's architecture")
  if not (export / loading.PARAMS_EMA).exists():
    shutil.rmtree(export, ignore_errors=True)
    loading.export(str(export), params, portable(experiment, workdir))
  measured = strength.measure(str(export), out / 'strength', dataclasses.replace(protocol, heldout=None))
  from searchless.model import network

  boards = json.loads((workdir / 'boards' / 'train.json').read_text())
  training = card.training_lines(model_dir, experiment, campaign_log.read_runs(workdir))
  (export / 'MODEL_CARD.md').write_text(
    card.card(
      experiment,
      network.num_params(params),
      evaluation,
      totals,
      boards,
      strength.markdown(measured),
      name,
      training,
      (model_dir / loading.EXPORT_METADATA).exists(),
    )
  )
  if install:
    install_model(export, pathlib.Path(str(loading.pretrained_dir(name))))
  return {
    **record,
    'shipped_now': True,
    'export': str(export),
    'installed': install,
    'wall_seconds': round(time.time() - start, 1),
  }
