"""The model card of a campaign model: the model, its data and labels, every run that made it, its strength.

`training_lines` writes the training section from the campaign's records (runs.jsonl): CPU runs, the runs
adopted from elsewhere (a lent GPU's, an A/B arm's) and the CPU runs since, each with its cost and settings.
"""

from collections.abc import Sequence
import json
import pathlib
from typing import Any

from campaign import labels
from campaign import model as campaign_model
from searchless.model import loading


def _priors(experiment: Any) -> list[str]:
  """The transformer's structural priors that an experiment config switches on, in words."""
  from searchless.model.config import ModelConfig

  m = ModelConfig.from_config(experiment)  # The model's fields with their defaults (its one home).
  if m.kind != 'transformer':
    return []
  return [
    text
    for on, text in (
      (m.mover_view, "the mover's view"),
      (m.move_squares != 'none', f'move squares ({m.move_squares})'),
      (m.move_gather, 'move gather'),
      (m.square_bias != 'none', f'square biases ({m.square_bias})'),
      (m.smolgen, f'smolgen ({m.smolgen})'),
    )
    if on
  ]


def card(
  experiment: Any,
  num_params: int,
  evaluation: dict[str, Any],
  totals: dict[str, float],
  boards: dict[str, Any],
  strength_md: str,
  name: str = 'pretrained',
  training: Sequence[str] = (),
  device_run: bool = False,
) -> str:
  """The model card of a campaign model: model, data and labels, compute (`training`: its lines, as
  `training_lines` writes them), measured strength, how to reproduce (`device_run`: part of it on a GPU)."""
  m = experiment.model
  low, high = evaluation['puzzles_wilson95']
  lines = [
    f'# searchless {name} model',
    '',
    f'Shipped as `{name}`: '
    + (
      'the strongest model this project has made.'
      if name == 'pretrained'
      else "the strongest model of the paper's architecture this project has made."
    ),
    (
      "The strength campaign's model, a "
      if name == 'pretrained'
      else 'Made by the strength campaign beside its model: a '
    )
    + f'{m.kind} model '
    f'({m.num_layers} layers, width {m.embedding_dim}'
    + (f', edges {m.graph_edge_dim}' if m.kind == 'graph' else '')
    + f', {m.num_heads} heads'
    + ''.join(f', {prior}' for prior in _priors(experiment))
    + f'; {num_params:,} parameters; one forward pass scores every legal move), parameters in bfloat16; its whole '
    'experiment config is `config/config.json`.'
    + (" The paper's architecture ships beside it as `pretrained-transformer`." if name == 'pretrained' else ''),
    '',
    '## Data and labels',
    '',
    f'- Boards: {boards["distinct_boards"]:,} distinct train boards (de-duplicated by position across '
    f"{len(boards['folders'])} label folders of real Lichess games: the shared label chunks and the campaign's own).",
    f'- Labels: Stockfish, one MultiPV search of {labels.ANNOTATE_RECIPE.limit} per board scoring every legal move '
    f"(`searchless-annotate {' '.join(labels.ANNOTATE_RECIPE.flags())}`); the campaign's own labels cost "
    f"{totals['labels_core_hours']:.2f} core-hours (the shared chunks' are in their manifests).",
    '',
    '## Training',
    '',
    *training,
    '',
    '## Measured strength',
    '',
    f'- Dev puzzles at export: {evaluation["puzzles_solved"]}/{evaluation["puzzles"]} '
    f'(95% interval {100 * low:.1f}-{100 * high:.1f}%); held-out boards: action accuracy '
    f'{evaluation.get("action_accuracy", float("nan")):.3f}, '
    f'Kendall tau-b {evaluation.get("kendall_tau", float("nan")):.3f}.',
    '',
    strength_md.strip(),
    '',
    '## Reproduce',
    '',
    '    python -m campaign --workdir DIR --steps games,labels,train,evaluate   # from the checkout; resumable, '
    'a few hours at a time',
  ]
  if device_run:  # The GPU part: the playbook (campaign/README.md says how it travels and comes back).
    lines += [
      '    # on a lent GPU: the GPU playbook (campaign/README.md), which exports OUT/NAME',
      '    python -m campaign --workdir DIR '
      + (
        '--steps adopt,evaluate,ship --install --model OUT/NAME'
        if name == 'pretrained'
        else f'--steps evaluate,ship --install --ship_as {name} --model OUT/NAME'
      ),
      '',
    ]
  else:
    lines += ['    python -m campaign --workdir DIR --steps ship --install', '']
  return '\n'.join(lines)


def _device_run(model_dir: pathlib.Path, experiment: Any) -> str:
  """An exported run's training (`campaign_model.export_run`), in words."""
  summary, device = json.loads((model_dir / 'train_summary.json').read_text()), campaign_model.device_of(model_dir)
  seconds = f'{device.get("seconds", summary["wall_seconds"]):.0f} s of wall-clock'
  on_cpu = device['device'] == campaign_model.CPU
  if on_cpu:
    cores = device['cpu_cores']
    where = f'on {cores} CPU core{"s" if cores > 1 else ""} ({seconds})'
  else:
    sharing = f', {device["models"]} models sharing it' if device.get('models', 1) > 1 else ''
    where = f'on a lent {device["device"]} ({seconds}{sharing}; {device["cpu_cores"]} CPU cores feeding it)'
  # A grown model (`train.init_grow`) starts as the function of the smaller one it was grown from.
  grown = (
    f' in a model grown from them ({experiment.model.num_layers} layers, MLPs '
    f'{experiment.model.widening_factor} wide; `train.init_grow`: the same function at its first step)'
    if experiment.train.get('init_grow')
    else ''
  )
  return (
    f'{summary["step"]:,} steps of {summary["batch_size"]} boards{grown} {where}, learning rate '
    f'{experiment.optim.learning_rate:g}, EMA {experiment.optim.ema_decay}, {experiment.train.compute_dtype} compute'
    + ('' if on_cpu else ' (the GPU playbook)')
    + (f'. {device["note"][0].upper()}{device["note"][1:]}' if device.get('note') else '')
  )


def _shipped_history(experiment: Any) -> tuple[str, list[str]]:
  """(name, the training lines of its model card) of the shipped model a run started from, else ('', []).

  A run started from one when its ``train.init_from`` is a package folder of a shipped model (`loading.SHIPPED`:
  ``.../searchless/pretrained_transformer``, or the shipped name itself); the card read is the installed one,
  before the ship step replaces it.
  """
  init = pathlib.PurePath(experiment.train.get('init_from') or '')
  for name, folder in loading.SHIPPED.items():
    card = pathlib.Path(str(loading.pretrained_dir(name))) / 'MODEL_CARD.md'
    started_here = str(init) == name or init.parts[-2:] == ('searchless', folder)
    text = card.read_text() if started_here and card.exists() else ''
    if '\n## Training\n' in text:
      section = text.split('\n## Training\n', 1)[1].split('\n## ', 1)[0]
      return name, [line for line in section.splitlines() if line.startswith('- ')]
  return '', []


def _rates(runs: Sequence[dict[str, Any]], experiment: Any) -> str:
  """The learning rate and EMA of consecutive CPU runs, in words: each value with the step it held to.

  A run records its `learning_rate` and `ema_decay` (`campaign.train_model`); one without them had the experiment's.
  """
  said = []
  for key, name, default in (
    ('learning_rate', 'learning rate', experiment.optim.learning_rate),
    ('ema_decay', 'EMA', experiment.optim.ema_decay),
  ):
    spans: list[list[Any]] = []  # [value, last step]
    for run in runs or [{'steps': 0}]:  # No run yet: the experiment's.
      value = run.get(key, default)
      if spans and spans[-1][0] == value:
        spans[-1][1] = run['steps']
      else:
        spans.append([value, run['steps']])
    said.append(
      name
      + ' '
      + ', then '.join(
        f'{value:g}' + (f' to step {step:,}' if i < len(spans) - 1 else '') for i, (value, step) in enumerate(spans)
      )
    )
  return ', '.join(said)


def _cost(runs: Sequence[dict[str, Any]]) -> str:
  """The wall-clock and core-hours of consecutive CPU training runs, in words."""
  return (
    f'{sum(r["wall_seconds"] for r in runs) / 3600:.1f} h of wall-clock, '
    f'{sum(r["core_hours"] for r in runs):.1f} core-hours'
  )


def _cpu_line(runs: Sequence[dict[str, Any]], experiment: Any) -> str:
  """Consecutive CPU training runs of the campaign, in words."""
  return (
    f'{runs[-1]["steps"] if runs else 0:,} steps of {experiment.data.batch_size} boards, '
    f'{_rates(runs, experiment)}, on 2 CPU cores in resumed runs: {_cost(runs)}'
  )


def _first_device_run(model_dir: pathlib.Path, experiment: Any) -> list[str]:
  """An exported run that no campaign run came before: the shipped model it started from (if any) has its own
  lines first."""
  shipped, lines = _shipped_history(experiment)
  start = f'Then, from those parameters (the `{shipped}` they made) with a new optimiser: ' if lines else ''
  return [*lines, f'- {start}{_device_run(model_dir, experiment)}.']


def _lineage(workdir: pathlib.Path, train: Sequence[dict[str, Any]], experiment: Any, *, tail: bool) -> list[str]:
  """The card's lines for the campaign's training runs `train`, oldest first: each adopted run (a record with a
  `device`) started from the parameters of the runs before it, and the CPU runs after it from its own. `tail`:
  the runs after the last adopted one make the model (the campaign's run; else the last adopted run is it)."""
  from searchless.core import config as config_lib

  lines: list[str] = []
  adopted = [i for i, r in enumerate(train) if 'device' in r]
  for n, k in enumerate([*adopted, len(train)] if tail else adopted):
    before = adopted[n - 1] if n else -1
    cpu = list(train[before + 1 : k])
    last = k == len(train)
    name = train[before]['model'] if n else ''
    source = workdir / name
    described = n and (source / 'train_config.json').exists()
    if cpu and not n and not last:  # Before the first adoption: its config is not at hand, its cost is.
      lines.append(
        f'- First on 2 CPU cores: {cpu[-1]["steps"]:,} steps in resumed runs, {_cost(cpu)}; '
        'then, from those parameters:'
      )
    elif cpu or last:
      start = f"Then, from those parameters (the campaign's `{name}`): " if described else ''
      from_adopted = f' (from the adopted `{name}`)' if n and not described else ''
      lines.append(
        f'- {start}{_cpu_line(cpu, experiment)}{from_adopted}' + ('.' if last else '; then, from those parameters:')
      )
    if not last:
      model = workdir / train[k]['model']
      config = (
        config_lib.from_json((model / 'train_config.json').read_text())
        if (model / 'train_config.json').exists()
        else experiment
      )
      lines += [f'- {_device_run(model, config)}.'] if lines else _first_device_run(model, config)
  return lines


def training_lines(model_dir: pathlib.Path, experiment: Any, runs: Sequence[dict[str, Any]]) -> list[str]:
  """The model card's training section: every run that made the model in `model_dir`, oldest first.

  `runs`: the campaign's records (runs.jsonl). An exported run (a GPU's, or an A/B arm's on CPU cores) is its
  own line; an adopted one follows the campaign's runs before its adoption, which it started from (earlier
  adopted runs and the CPU runs between them); the campaign's training run lists them all and the CPU runs
  since. A record marked `superseded` (e.g. the losing arm of an A/B whose winner became the run) made nothing
  shipped: left out.
  """
  train = [r for r in runs if r.get('step') == 'train' and not r.get('superseded')]
  if (
    model_dir / loading.EXPORT_METADATA
  ).exists():  # An exported run: adopted (after the runs before it) or a side model.
    here = [i for i, r in enumerate(train) if 'device' in r and pathlib.Path(r['model']).name == model_dir.name]
    if here:
      return _lineage(model_dir.parent.parent, train[: here[-1] + 1], experiment, tail=False)
    return _first_device_run(model_dir, experiment)
  return _lineage(model_dir.parent, train, experiment, tail=True)
