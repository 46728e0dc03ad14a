r"""The strength campaign: labels for every shared game, a long resumable training, evaluation, shipping.

    python -m campaign --workdir ~/searchless-data/campaign --shared ../shared     # everything, resumable
    python -m campaign --workdir DIR --steps labels --max_chunks 1                  # one more chunk of labels

Run from the repository's root (a tool of the checkout, not of the package). Steps (each resumable:
rerunning the same command continues where it stopped; in a new folder it starts from ``--shared``
and the shipped model):

1. games     the game files of ``--sources`` (`sources.json`: data, not code) as chunk PGN files
             (WORKDIR/games/SOURCE_NNN.pgn; `campaign.games`);
2. labels    each chunk not labelled yet, with the shipped recipe (`campaign.labels`) ->
             WORKDIR/labels/SOURCE_NNN (done when its manifest.json exists). The chunks already
             in ``--shared``/data/labels are used as they are, never labelled again;
   pack      every labelled train board, one record per position (WORKDIR/boards), packed as
             columns within a device call's carry (``--device_mib``) -> WORKDIR/device/data: the
             next lent-GPU call's ``--data`` (`benchmarks/gpu_playbook.py`);
3. adopt     (by name, with ``--model DIR``) a model trained elsewhere, e.g. on a lent GPU by the
             GPU playbook, becomes the campaign's model (`campaign.model`): evaluated and shipped as
             it is, and the start of the next run;
4. train     the campaign config on every labelled board, one record per position across chunks
             (WORKDIR/boards, `searchless.data.distinct`, rebuilt when labels were added), for
             ``--train_seconds`` more, resuming WORKDIR/train; a new run starts from the adopted
             model, else from ``--start_from`` (default: the shipped ``pretrained``). Training
             is for an accelerator: without one it is refused unless ``--cpu_training`` is given
             (CPU stretches stopped moving the model: benchmarks/RESULTS.md, "The strength campaign");
5. evaluate  the campaign's model on the held-out boards (the shared chunks' test splits) and the
             dev puzzles (`searchless.evaluation.strength`) -> WORKDIR/eval/STEP, one line of
             WORKDIR/curve.jsonl per run, and WORKDIR/curve.png, the campaign's curve so far;
6. match     the same model against Stockfish at UCI_Elo 1350, ``--games`` games from the named
             openings (the strength ladder) -> WORKDIR/eval/STEP/match, its score and BayesElo in
             WORKDIR/runs.jsonl;
7. ship      (by name) export, measure and (``--install``) ship the campaign's model when it beats
             the shipped one (`campaign.ship`).

Every step appends what it did and what it cost (wall-clock, core-hours of CPU, hours of an
accelerator) to WORKDIR/runs.jsonl, and WORKDIR/README.md is rewritten from it (`campaign.log`).

SIGTERM or Ctrl-C stops it cleanly: training saves a checkpoint; a label job is stopped with its
workers and engines, and its chunk, left unfinished, is labelled again by the next run.
"""

import argparse
from collections.abc import Sequence
import json
import pathlib
import time
from typing import Any

from campaign import boards
from campaign import games as games_lib
from campaign import labels as campaign_labels
from campaign import log as campaign_log
from campaign import model as campaign_model
from campaign import ship as campaign_ship
from searchless import configs
from searchless.evaluation import strength
from searchless.model import loading
from searchless.plumbing import cli
from searchless.plumbing import errors

STEPS = ('games', 'labels', 'pack', 'adopt', 'train', 'evaluate', 'match', 'ship')
# What a machine without an accelerator does: labels, and the next GPU call's boards. 'adopt' needs --model and
# 'ship' writes into the package: they, 'train', 'evaluate' and 'match' are asked for by name.
DEFAULT_STEPS = ('games', 'labels', 'pack')
OPPONENT_ELO = 1350  # The game target: a positive score against Stockfish at this UCI_Elo.
GAMES = 100  # The match step's games: BayesElo within about +-65.
CONFIGS = pathlib.Path(__file__).parent / 'configs'  # The campaign's own configs (campaign_deep6): not shipped.


def config_file(name: str) -> str:
  """The config `name` as `searchless.configs.load` takes it: the campaign's own (campaign/configs/NAME.py) by its
  path, else `name` as it is (a config of the package, or a .py path).

  >>> pathlib.Path(config_file('campaign_deep6')).relative_to(CONFIGS.parent).as_posix()
  'configs/campaign_deep6.py'
  >>> config_file('pretrained')
  'pretrained'
  """
  own = CONFIGS / f'{name}.py'
  return str(own) if '/' not in name and own.exists() else name


def named_openings(shared: pathlib.Path) -> list[pathlib.Path]:
  """The opening files a match samples from, in the order sampled: SHARED/data/openings/*.tsv, sorted. Matches
  pair game by game only if they sample the same list."""
  return sorted((shared / 'data' / 'openings').glob('*.tsv'))


def train_model(
  config_name: str, data: str, train_dir: pathlib.Path, seconds: float, overrides: Sequence[str] = ()
) -> dict[str, Any]:
  """Trains (resuming) `config_name` (with `overrides`) on the bag `data` for `seconds` more; returns its cost."""
  from searchless.training import plot
  from searchless.training import train

  overrides = [*overrides, f'data.train={data}', f'train.max_seconds={seconds}']
  config = configs.load(config_file(config_name), overrides)
  start, cpu = time.time(), time.process_time()
  state = train.train(config, str(train_dir), overrides=overrides)
  log = [r for r in plot.read_metrics(train_dir) if 'loss' in r]  # A stopped run logs its steps too (`train`).
  return {
    'step': 'train',
    'config': config_name,
    'steps': int(state.step),
    'wall_seconds': round(time.time() - start, 1),
    'core_hours': round((time.process_time() - cpu) / 3600, 6),
    'action_values_trained': int(sum(r.get('targets', 0) for r in log)),
    'final_train_loss': log[-1]['loss'] if log else None,
    'learning_rate': config.optim.learning_rate,
    'ema_decay': config.optim.ema_decay,
  }  # The model card's.


def evaluate_model(
  model_dir: pathlib.Path, heldout: str, puzzles: pathlib.Path, out: pathlib.Path, *, num_boards: int
) -> dict[str, Any]:
  """Held-out metrics (first `num_boards` boards of `heldout`) and the dev puzzles of `model_dir` (a run or an
  export), measured by `strength.measure` into the evaluation folder `out`."""
  start, cpu = time.time(), time.process_time()
  done = strength.measure(
    str(model_dir), out, strength.Protocol(puzzles=str(puzzles), heldout=heldout, heldout_boards=num_boards)
  )
  h, p = done['heldout'], done['puzzles']
  return {
    'step': 'evaluate',
    'heldout_boards': h['boards'],
    **{k: h[k] for k in ('action_accuracy', 'kendall_tau', 'log_loss') if k in h},
    'puzzles_solved': p['solved'],
    'puzzles': p['n'],
    'puzzles_wilson95': p['wilson95'],
    'wall_seconds': round(time.time() - start, 1),
    'core_hours': round((time.process_time() - cpu) / 3600, 6),
  }


def match_model(
  model_dir: pathlib.Path, out: pathlib.Path, openings: Sequence[pathlib.Path], *, games: int = GAMES, workers: int = 2
) -> dict[str, Any]:
  """Plays `model_dir` against Stockfish at `OPPONENT_ELO` for `games` games (the strength ladder of one level) into
  the evaluation folder `out`; its record. Core-hours count this process and the workers and engines it started."""
  start, cpu = time.time(), time.process_time() + campaign_log.children_cpu_seconds()
  protocol = strength.Protocol(ladder=(OPPONENT_ELO,), games=games, openings=tuple(map(str, openings)), workers=workers)
  m = strength.measure(str(model_dir), out, protocol)['match']
  pair = m['pairs'][0]
  record: dict[str, Any] = {
    'step': 'match',
    'opponent': strength.opponents(protocol)[0],
    'games': pair['games'],
    'wins': pair['wins'],
    'draws': pair['draws'],
    'losses': pair['losses'],
    'score': pair['score'],
    **{k: m[k] for k in ('bayeselo', 'bayeselo95') if k in m},
  }
  used = time.process_time() + campaign_log.children_cpu_seconds() - cpu
  return {**record, 'wall_seconds': round(time.time() - start, 1), 'core_hours': round(used / 3600, 6)}


def start_model(workdir: pathlib.Path, start_from: str) -> pathlib.Path | None:
  """Where a new training run starts: the adopted model, else `start_from` (a shipped name or a model folder; ''
  for a random initialisation)."""
  if (adopted := campaign_model.adopted(workdir)) is not None:
    return adopted
  return loading.model_folder(start_from) if start_from else None


def run(
  workdir: str | pathlib.Path,
  shared: str | pathlib.Path,
  *,
  steps: Sequence[str] = DEFAULT_STEPS,
  workers: int = 2,
  max_chunks: int | None = None,
  config_name: str = 'campaign_deep6',
  overrides: Sequence[str] = (),
  train_seconds: float = 3 * 3600,
  heldout_boards: int = 2000,
  puzzles: str | None = None,
  sources: pathlib.Path = games_lib.SOURCES_FILE,
  install: bool = False,
  model: str | None = None,
  ship_as: str = 'pretrained',
  games: int = GAMES,
  start_from: str = 'pretrained',
  device_mib: float = boards.DEVICE_DATA_MIB,
  cpu_training: bool = False,
) -> None:
  """Runs `steps` of the campaign in WORKDIR (see the module docstring).

  Args:
    workdir: the campaign's folder.
    shared: the shared data folder (data/games, data/labels, data/puzzles, data/openings, data/epd).
    steps: which of STEPS to run (the games are always written, once).
    workers: annotation worker processes (one engine each), and games played at once.
    max_chunks: label at most this many more chunks (None: all).
    config_name: the training config; `overrides` (key=value) change it.
    train_seconds: this run's training wall-clock.
    heldout_boards: held-out boards evaluated.
    puzzles: the puzzle CSV evaluated (None: SHARED/data/puzzles/lichess_puzzles_dev.csv).
    sources: the sources file: the game files labelled, in order (`games.read_sources`).
    install: the ship step copies a shipped model into the package.
    model: the adopt step's model (`campaign.model.export_run`; a shipped name or a folder); without adopt,
      evaluate, match and ship act on it instead of the campaign's model.
    ship_as: the shipped model the ship step must beat and replaces (`loading.SHIPPED`).
    games: the match step's games against Stockfish 1350.
    start_from: a new run's parameters when nothing was adopted: a shipped name, a model folder or '' (random).
    device_mib: the pack step's budget for the columns, in MiB.
    cpu_training: let the train step run without an accelerator.
  """
  unknown = set(steps) - set(STEPS)
  if unknown:
    raise errors.BadInput(f'unknown step(s) {sorted(unknown)}: expected some of {",".join(STEPS)}')
  if 'adopt' in steps and model is None:
    raise errors.BadInput('the adopt step needs the model: --steps adopt --model DIR')
  if 'match' in steps and games < 1:
    raise errors.BadInput(f'--games must be >= 1 for the match step, got {games}')
  if 'train' in steps and not cpu_training:
    import jax

    if jax.default_backend() == 'cpu':
      raise errors.BadInput(
        'the train step has no accelerator here: CPU training stretches stopped moving the model; make labels '
        '(--steps games,labels,pack) and train on a lent GPU (benchmarks/gpu_playbook.py), or pass --cpu_training'
      )
  workdir, shared = pathlib.Path(workdir).resolve(), pathlib.Path(shared).resolve()
  game_files, games_per_chunk = games_lib.read_sources(pathlib.Path(sources))
  (workdir / 'logs').mkdir(parents=True, exist_ok=True)
  chunks = games_lib.write_games(shared, workdir / 'games', game_files, games_per_chunk)
  readme = lambda: campaign_log.write_readme(workdir, shared, config_name)
  readme()
  if 'labels' in steps:
    for _ in campaign_labels.label_chunks(chunks, workdir / 'labels', workdir, workers=workers, max_chunks=max_chunks):
      readme()
  if 'pack' in steps:
    merged = boards.merge_boards(boards.label_folders(shared, workdir), workdir / 'boards', 'train')
    packed = boards.pack_for_device(merged, workdir / 'device', device_mib)
    print(
      f'[pack] {packed["boards"]:,} of {merged["distinct_boards"]:,} distinct train boards as columns in '
      f'{packed["data"]} ({packed["bytes"] / 2**20:.1f} MiB of {device_mib:g})',
      flush=True,
    )
    readme()
  train_dir = workdir / 'train'
  puzzle_csv = pathlib.Path(puzzles) if puzzles else shared / 'data' / 'puzzles' / 'lichess_puzzles_dev.csv'
  if 'adopt' in steps and model is not None:  # (Checked above: adopt comes with its model.)
    index = workdir / 'boards' / 'train.json'
    record = campaign_model.adopt(
      workdir, loading.model_folder(model), json.loads(index.read_text())['distinct_boards'] if index.exists() else None
    )
    campaign_log.log_run(workdir, record)
    print(f'[adopt] {record["model"]}: {record["steps"]} steps on {record["device"]}', flush=True)
    readme()
  if 'train' in steps:
    folders = boards.label_folders(shared, workdir)
    merged = boards.merge_boards(folders, workdir / 'boards', 'train')
    print(
      f'[boards] {merged["distinct_boards"]:,} distinct train boards of {merged["records_read"]:,} records '
      f'in {len(folders)} label folders',
      flush=True,
    )
    # A new run (no checkpoint yet) starts from the adopted model's parameters, else from `start_from`'s.
    start = start_model(workdir, start_from) if not campaign_model.latest_step(train_dir) else None
    record = train_model(
      config_name,
      merged['bag'],
      train_dir,
      train_seconds,
      [*overrides, *([f'train.init_from={start}', 'train.init_grow=True'] if start else [])],
    )
    started = (
      {'started_from': str(start.relative_to(workdir)) if start.is_relative_to(workdir) else start.name}
      if start
      else {}
    )
    campaign_log.log_run(workdir, {**record, 'distinct_boards': merged['distinct_boards'], **started})
    print(f'[train] step {record["steps"]}, {record["wall_seconds"]:.0f} s', flush=True)
    readme()
  if model is not None and 'adopt' not in steps:  # A side model (e.g. a transformer beside the campaign's graph).
    model_dir, model_name, step = campaign_model.side_model(loading.model_folder(model))
  else:
    model_dir, model_name, step = campaign_model.current_model(workdir)
  out = workdir / 'eval' / (str(step) if model_name == 'train' else model_dir.name)
  if 'evaluate' in steps:
    heldout = boards.merge_boards(
      boards.label_folders(shared), workdir / 'boards', 'test'
    )  # Fixed: the curve's points compare.
    record = {
      **evaluate_model(model_dir, heldout['bag'], puzzle_csv, out, num_boards=heldout_boards),
      'checkpoint_step': step,
      'model': model_name,
    }
    campaign_log.log_run(workdir, record)
    with open(workdir / 'curve.jsonl', 'a') as f:
      f.write(json.dumps({**record, **campaign_log.totals(campaign_log.read_runs(workdir))}) + '\n')
    campaign_log.plot_curve(workdir)
    print(f'[evaluate] {json.dumps(record)}', flush=True)
    readme()
  openings = named_openings(shared)
  if 'match' in steps:
    if not openings:
      raise errors.BadInput(
        f'no named openings (*.tsv) in {shared / "data" / "openings"}: the match step plays from them'
      )
    record = {
      **match_model(model_dir, out, openings, games=games, workers=workers),
      'checkpoint_step': step,
      'model': model_name,
    }
    campaign_log.log_run(workdir, record)
    print(f'[match] {json.dumps(record)}', flush=True)
    readme()
  if 'ship' in steps:
    measured = [
      r
      for r in campaign_log.read_curve(workdir)
      if r['checkpoint_step'] == step and r.get('model', 'train') == model_name
    ]
    if not measured:
      raise errors.BadInput(
        f"the campaign's model ({model_dir}, step {step}) has no evaluation yet: run --steps evaluate,ship"
      )
    sts = shared / 'data' / 'epd' / 'sts01_undermine.epd'
    protocol = strength.Protocol(
      puzzles=str(puzzle_csv),
      sts=str(sts) if sts.exists() else None,
      ladder=campaign_ship.SHIP_LADDER,
      games=campaign_ship.SHIP_GAMES,
      openings=tuple(map(str, openings)),
      workers=workers,
    )
    record = campaign_ship.ship(
      workdir,
      measured[-1],
      puzzle_csv,
      campaign_log.totals(campaign_log.read_runs(workdir)),
      protocol,
      install=install,
      model_dir=model_dir,
      name=ship_as,
    )
    campaign_log.log_run(workdir, record)
    print(f'[ship] {json.dumps(record)}', flush=True)
    readme()


def _parser() -> argparse.ArgumentParser:
  p = cli.ArgumentParser(prog='python -m campaign', description=__doc__.split('\n\n')[0])
  p.add_argument(
    '--workdir', required=True, type=cli.output_dir, help='the campaign folder (e.g. ~/searchless-data/campaign)'
  )
  p.add_argument(
    '--shared',
    required=True,
    help='the shared data folder: data/games, data/labels, data/puzzles, data/openings, data/epd',
  )
  p.add_argument(
    '--steps', default=','.join(DEFAULT_STEPS), help=f'steps to run, comma-separated, of {",".join(STEPS)}'
  )
  p.add_argument('--sources', default=str(games_lib.SOURCES_FILE), help='the game files to label (a sources.json)')
  p.add_argument('--install', action='store_true', help='the ship step replaces the shipped model in the package')
  p.add_argument(
    '--workers', type=int, default=2, help='annotation worker processes, one engine each, and games played at once'
  )
  p.add_argument('--games', type=int, default=GAMES, help='games of the match step against Stockfish 1350')
  p.add_argument('--max_chunks', type=int, default=None, help='label at most N more chunks in this run (default: all)')
  p.add_argument(
    '--config',
    default='campaign_deep6',
    help='the model and training config: one of campaign/configs/ or of the package, by name, or a .py file',
  )
  p.add_argument(
    '--set', nargs='*', default=[], metavar='KEY=VALUE', help='config overrides, e.g. optim.learning_rate=3e-4'
  )
  p.add_argument(
    '--puzzles', default=None, help='puzzle CSV to evaluate on (default: SHARED/data/puzzles/lichess_puzzles_dev.csv)'
  )
  p.add_argument('--train_seconds', type=float, default=3 * 3600, help='training wall-clock of this run (default: 3 h)')
  p.add_argument(
    '--model',
    default=None,
    help="the adopt step's model (an exported run, e.g. from a GPU, or a "
    "shipped name); without adopt, evaluate, match and ship act on it instead of the campaign's model",
  )
  p.add_argument(
    '--start_from',
    default='pretrained',
    help="a new run's parameters when nothing was adopted: a "
    "shipped name, a model folder, or '' for a random initialisation",
  )
  p.add_argument(
    '--ship_as',
    default='pretrained',
    choices=sorted(loading.SHIPPED),
    help='the shipped model the ship step must beat and replaces',
  )
  p.add_argument('--heldout_boards', type=int, default=2000, help='held-out boards evaluated')
  p.add_argument(
    '--device_mib',
    type=float,
    default=boards.DEVICE_DATA_MIB,
    help="the pack step's columns at most this size (a device call's carry, less the checkout and the wheels)",
  )
  p.add_argument('--cpu_training', action='store_true', help='let the train step run without an accelerator')
  return p


def main(argv: Sequence[str] | None = None) -> None:
  args = _parser().parse_args(argv)
  with errors.one_line_errors():
    run(
      args.workdir,
      args.shared,
      steps=args.steps.split(','),
      workers=args.workers,
      max_chunks=args.max_chunks,
      config_name=args.config,
      overrides=args.set,
      train_seconds=args.train_seconds,
      heldout_boards=args.heldout_boards,
      puzzles=args.puzzles,
      sources=pathlib.Path(args.sources),
      install=args.install,
      model=args.model,
      ship_as=args.ship_as,
      games=args.games,
      start_from=args.start_from,
      device_mib=args.device_mib,
      cpu_training=args.cpu_training,
    )
