r"""Reproduce the shipped pretrained model from scratch: games -> labels -> model -> package data.

    python -m searchless.commands.pretrained --games ../shared/data/games/*.pgn --workdir runs/pretrained
    python -m searchless.commands.pretrained ... --chunks 4 --train_seconds 600     # a smaller, faster version

Steps (each resumable: rerunning the same command continues where it stopped):

1. chunk     the games, files interleaved, into PGN files of ``--games_per_chunk``
             games (WORKDIR/chunks/chunk_NNN.pgn);
2. annotate  each chunk as ``searchless-annotate`` would (the recipe: ANNOTATE_RECIPE;
             5% of games, by a hash of the game, go to the test split) ->
             WORKDIR/data/chunk_NNN (done when its manifest.json exists);
3. train     ``pretrained`` on the board records of every annotated
             chunk's train split for ``--train_seconds`` -> WORKDIR/train;
4. export    the EMA parameters as bfloat16, the config and a model card ->
             WORKDIR/export;
5. evaluate  ``benchmarks/pretrained_strength.py`` on the export (puzzles by
             rating band, matches against Stockfish at UCI_Elo 1350/1500/1800,
             STS1; with ``--reference``, action accuracy against deep labels)
             -> WORKDIR/strength.json, and the numbers into the model card.

``--install`` then copies WORKDIR/export into the package
(``searchless/pretrained_transformer/``, which `Player.load('pretrained-transformer')` reads:
the shipped model of the paper's architecture). The cost of
each step is printed and kept in WORKDIR/pretrained.json.

A repository tool, not a console script: it runs ``benchmarks/`` code and
writes into the source tree. `run` is the whole job with typed arguments; each
step is a function of its own.
"""

import argparse
from collections.abc import Sequence
import dataclasses
import itertools
import json
import pathlib
import shlex
import shutil
import subprocess
import sys
import time
from typing import Any

import ml_collections

from searchless.commands import cli
from searchless.commands import errors
from searchless.core import artefacts

ROOT = pathlib.Path(__file__).resolve().parents[2]  # The source checkout: this job rebuilds the shipped model.
CONFIG = 'pretrained'
STEPS = ('chunk', 'annotate', 'train', 'export', 'evaluate')
# The label recipe (searchless-annotate's flags): one MultiPV search of 20k nodes per board scores every
# legal move (the most labels and the best move ranking per engine core-hour in benchmarks/RESULTS.md
# "The label-cost frontier").


@dataclasses.dataclass(frozen=True)
class AnnotateRecipe:
  """searchless-annotate's flags of the labels, in flag order."""

  mode: str
  limit: str
  state_value: str
  records: str
  test_fraction: float

  def flags(self) -> list[str]:
    """The recipe as searchless-annotate arguments.

    >>> AnnotateRecipe('multipv', 'nodes=1', 'best_move', 'board', 0.5).flags()[:4]
    ['--mode', 'multipv', '--limit', 'nodes=1']
    """
    return [arg for key, value in dataclasses.asdict(self).items() for arg in (f'--{key}', str(value))]


ANNOTATE_RECIPE = AnnotateRecipe(mode='multipv', limit='nodes=20000', state_value='best_move', records='board',
                                 test_fraction=0.05)


def _log(workdir: pathlib.Path, step: str, record: dict[str, Any]) -> None:
  path = workdir / 'pretrained.json'
  done = json.loads(path.read_text()) if path.exists() else {}
  done[step] = record
  path.write_text(json.dumps(done, indent=2) + '\n')


def make_chunks(games: list[str], out_dir: pathlib.Path, games_per_chunk: int) -> list[pathlib.Path]:
  """Writes the games of `games` (files interleaved, game by game) into chunk files; returns their paths."""
  from searchless.data import pgn
  from searchless.data import streams
  done = out_dir / 'chunks.json'
  if done.exists():
    return [out_dir / name for name in json.loads(done.read_text())['chunks']]
  out_dir.mkdir(parents=True, exist_ok=True)
  interleaved = pgn.interleave_raw_games(streams.match_files(games, '--games'))
  paths: list[pathlib.Path] = []
  count = 0
  while chunk := list(itertools.islice(interleaved, games_per_chunk)):
    path = out_dir / f'chunk_{len(paths):03d}.pgn'
    path.write_text(''.join(game.text + '\n' for game in chunk))
    paths.append(path)
    count += len(chunk)
  done.write_text(json.dumps({'games': count, 'games_per_chunk': games_per_chunk, 'sources': games,
                              'chunks': [p.name for p in paths]}, indent=2) + '\n')
  return paths


def _manifest(out: pathlib.Path) -> artefacts.AnnotationManifest:
  return artefacts.AnnotationManifest.read(out / artefacts.AnnotationManifest.FILE)


def annotate_chunks(chunks: list[pathlib.Path], data_dir: pathlib.Path, workers: int) -> list[pathlib.Path]:
  """Annotates each chunk not yet done (ANNOTATE_RECIPE); returns the chunks' output directories."""
  from searchless.data import annotate
  from searchless.data import annotation_job
  from searchless.engines import annotator
  from searchless.engines import launch
  recipe = ANNOTATE_RECIPE
  engine_config = annotator.EngineConfig(path=launch.require_stockfish(), limit=launch.SearchLimit.parse(recipe.limit),
                                         mode=recipe.mode, state_value=recipe.state_value)
  beam_args = [f'--direct_num_workers={workers}']
  outs = []
  for i, chunk in enumerate(chunks):
    out = data_dir / chunk.stem
    outs.append(out)
    if (out / artefacts.AnnotationManifest.FILE).exists():
      continue
    options = annotate.AnnotateOptions(input=(str(chunk),), output_dir=str(out), records=recipe.records,
                                       test_fraction=recipe.test_fraction, mode=recipe.mode)
    argv = ['--input', str(chunk), '--output_dir', str(out),
            *recipe.flags(), *beam_args, '--no_progress']
    print(f'[annotate {i + 1}/{len(chunks)}] searchless-annotate {shlex.join(argv)}', flush=True)
    start = time.time()
    manifest = annotation_job.run(options, engine_config, beam_args=beam_args, progress=False,
                                  command=['searchless-annotate', *argv])
    boards = sum(s['boards'] for s in manifest.splits.values())
    print(f'[annotate {i + 1}/{len(chunks)}] {boards} boards in {time.time() - start:.0f} s', flush=True)
  return outs


def annotation_cost(outs: list[pathlib.Path], workers: int) -> dict[str, Any]:
  """Boards and wall-clock of the annotated chunks `outs` (from their manifests)."""
  boards = seconds = 0
  for out in outs:
    manifest = _manifest(out)
    boards += sum(s['boards'] for s in manifest.splits.values())
    seconds += manifest.timings['wall_seconds']
  return {'chunks': len(outs), 'boards': boards, 'wall_seconds': round(seconds, 1),
          'worker_core_hours': round(seconds * workers / 3600, 3), 'workers': workers}


def train_model(outs: list[pathlib.Path], workdir: pathlib.Path, train_seconds: float) -> dict[str, Any]:
  """Trains pretrained on the train board records of `outs` (the same chunks on every rerun)."""
  from searchless.core import config as config_lib
  from searchless.training import plot
  from searchless.training import train
  record = workdir / 'train_data.json'
  if not record.exists():  # Fixed at the first run, so a resumed run reads the same records.
    record.write_text(json.dumps({'chunks': [o.name for o in outs]}, indent=2) + '\n')
  chunks = json.loads(record.read_text())['chunks']
  spec = ','.join(str(workdir / 'data' / c / 'train' / 'board_value_data.bag') for c in chunks)
  config = config_lib.load(str(CONFIG), [f'data.train={spec}', f'train.max_seconds={train_seconds}'])
  print(f'[train] {len(chunks)} chunks, {train_seconds:.0f} s -> {workdir / "train"}', flush=True)
  start = time.time()
  state = train.train(config, str(workdir / 'train'))
  log = [r for r in plot.read_metrics(workdir / 'train') if 'loss' in r]
  return {'chunks': len(chunks), 'steps': int(state.step), 'last_run_seconds': round(time.time() - start, 1),
          'action_values_trained': int(sum(r.get('targets', 0) for r in log)), 'final_train_loss': log[-1]['loss']}


def card(workdir: pathlib.Path) -> str:
  """The model card: data, labels, engine, training and the measured strength (if measured)."""
  from searchless.model import loading
  done = json.loads((workdir / 'pretrained.json').read_text())
  engine = _manifest(workdir / 'data' / 'chunk_000').engine
  experiment = loading.load_model(str(workdir / 'export'))[2]
  if experiment is None:
    raise ValueError(f'{workdir / "export"} has no experiment config: not a model this job exported')
  a, t = done['annotate'], done['train']
  lines = [
      '# searchless pretrained-transformer model', '',
      'A searchless chess policy: the board-packed transformer of `configs/pretrained.py`',
      f"({experiment.model.num_layers} layers, d={experiment.model.embedding_dim}, "
      f"{experiment.model.num_heads} heads; one forward pass scores every legal move), parameters in bfloat16.",
      '', '## Data and labels', '',
      f"- Games: real Lichess games (`../shared/data/games/`, both files interleaved), the first "
      f"{a['chunks']} chunks of 100 games; 5% of games (by a hash of the game) held out.",
      f"- Boards: {a['boards']:,} (every board of every game, de-duplicated by FEN).",
      f"- Labels: {engine['id'][0].get('name', 'Stockfish') if engine.get('id') else 'Stockfish'}, one MultiPV search of "
      f"{engine['limit']} per board scoring every legal move (`--mode {engine['mode']}`), Threads={engine['threads']}, "
      f"Hash={engine['hash_mb']} MiB, a fresh engine state per board.",
      f"- Annotation cost: {a['wall_seconds'] / 60:.0f} min of wall-clock on {a['workers']} worker(s) "
      f"({a['worker_core_hours']:.2f} worker core-hours, pipeline included; the engine's own CPU time for this "
      "mode is ~0.08 core-hours per 10k boards, benchmarks/RESULTS.md \"The label-cost frontier\").",
      '', '## Training', '',
      f"- {t['steps']:,} steps of {experiment.data.batch_size} boards, {t['action_values_trained']:,} action-values, "
      f"learning rate {experiment.optim.learning_rate:g} (Adam), EMA {experiment.optim.ema_decay}; "
      f"final train loss {t['final_train_loss']:.3f}; {experiment.train.max_seconds / 60:.0f} min on 2 CPU cores.",
  ]
  strength = workdir / 'strength.md'
  if strength.exists():
    lines += ['', '## Measured strength', '', strength.read_text().strip(), '',
              'What to expect: the strongest model this project has made on 2 CPU cores, and a weak player. '
              'It ranks moves far better than chance and plays legal, mostly sensible moves, but it does not '
              'see tactics: a tiny model trained on ~30k boards for about an hour, where the paper trained '
              'up to 270M parameters on ~15 billion action-values.']
  cost = f"annotation {a['wall_seconds'] / 3600:.1f} h on {a['workers']} worker(s), training {t['last_run_seconds'] / 60:.0f} min"
  if 'evaluate' in done:
    cost += f", evaluation {done['evaluate']['wall_seconds'] / 60:.0f} min"
  lines += ['', '## Reproduce', '', 'One command (annotation, training, export, evaluation; resumable):', '',
            '    python -m searchless.commands.pretrained --games ../shared/data/games/*.pgn --workdir runs/pretrained '
            f"--chunks {a['chunks']} --train_seconds {experiment.train.max_seconds:g} --install", '',
            f'Measured cost of this model on a 2-core x86_64 machine: {cost} '
            '(annotation and training shared the machine with other jobs; alone they take less).', '']
  return '\n'.join(lines)


def export_model(workdir: pathlib.Path) -> pathlib.Path:
  """WORKDIR/export: the trained EMA parameters in bfloat16, the config and the model card."""
  from searchless.model import loading
  out = workdir / 'export'
  if not (out / loading.PARAMS_EMA).exists():
    _, params, trained = loading.load_model(str(workdir / 'train'))
    if trained is None:
      raise ValueError(f'{workdir / "train"} has no experiment config: not a model this job trained')
    experiment = ml_collections.ConfigDict(trained.as_configdict())  # A mutable copy.
    chunks = json.loads((workdir / 'train_data.json').read_text())['chunks']
    experiment.data.train = f'WORKDIR/data/chunk_{{000..{len(chunks) - 1:03d}}}/train/board_value_data.bag'
    loading.export(str(out), params, experiment)
  (out / 'MODEL_CARD.md').write_text(card(workdir))
  return out


def install(export: pathlib.Path) -> pathlib.Path:
  """Replaces the package's shipped transformer ('pretrained-transformer') with `export`."""
  from searchless.model import loading
  target = ROOT / 'searchless' / loading.SHIPPED[loading.PRETRAINED_TRANSFORMER]
  if target.exists():
    shutil.rmtree(target)
  shutil.copytree(export, target)
  return target


def evaluate_export(workdir: pathlib.Path, reference: str | None = None) -> dict[str, Any]:
  """Runs benchmarks/pretrained_strength.py on WORKDIR/export; returns its cost."""
  command = [sys.executable, str(ROOT / 'benchmarks' / 'pretrained_strength.py'), '--checkpoint', str(workdir / 'export'),
             '--workdir', str(workdir)] + (['--reference', reference] if reference else [])
  print(f'[evaluate] {shlex.join(command)}', flush=True)
  start = time.time()
  subprocess.run(command, check=True)
  return {'wall_seconds': round(time.time() - start, 1)}


def run(games: Sequence[str], workdir: str | pathlib.Path, *, games_per_chunk: int = 100, chunks: int | None = None,
        workers: int = 1, train_seconds: float = 3600, steps: Sequence[str] = STEPS, reference: str | None = None,
        install_export: bool = False) -> dict[str, Any]:
  """Runs `steps` of the job (see the module docstring); returns WORKDIR/pretrained.json (each step's cost).

  Args:
    games: PGN files or globs (the real Lichess games).
    workdir: where chunks, annotated data, training and export go.
    games_per_chunk: games per annotation run.
    chunks: annotate and train on the first N chunks (None: all).
    workers: annotation worker processes (one engine each).
    train_seconds: training wall-clock budget.
    steps: which of STEPS to run (the chunks are always made, once).
    reference: deep-labelled board records for the evaluation.
    install_export: copy the export into the package (searchless/pretrained_transformer/).
  """
  unknown = set(steps) - set(STEPS)
  if unknown:
    raise ValueError(f'unknown step(s) {sorted(unknown)}: expected some of {",".join(STEPS)}')
  workdir = pathlib.Path(workdir).resolve()
  chunk_paths = make_chunks(list(games), workdir / 'chunks', games_per_chunk)[:chunks]
  outs = [workdir / 'data' / c.stem for c in chunk_paths]
  if 'annotate' in steps:
    outs = annotate_chunks(chunk_paths, workdir / 'data', workers)
    _log(workdir, 'annotate', annotation_cost(outs, workers))
  if 'train' in steps:
    done = [o for o in outs if (o / artefacts.AnnotationManifest.FILE).exists()]
    if 'annotate' not in steps:  # Train on the chunks annotated so far.
      _log(workdir, 'annotate', annotation_cost(done, workers))
    _log(workdir, 'train', train_model(done, workdir, train_seconds))
  out = workdir / 'export'
  if 'export' in steps:
    export_model(workdir)
    print(f'[export] {out}', flush=True)
  if 'evaluate' in steps:
    _log(workdir, 'evaluate', evaluate_export(workdir, reference))
    (out / 'MODEL_CARD.md').write_text(card(workdir))
  if install_export:
    print(f'[install] {install(out)}', flush=True)
  return json.loads((workdir / 'pretrained.json').read_text())


def _parser() -> argparse.ArgumentParser:
  p = cli.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('--games', nargs='+', required=True, help='PGN files or globs (the real Lichess games)')
  p.add_argument('--workdir', required=True, type=cli.output_dir, help='where chunks, annotated data, training and export go')
  p.add_argument('--games_per_chunk', type=int, default=100, help='games per annotation run')
  p.add_argument('--chunks', type=int, default=None, help='annotate and train on the first N chunks (default: all)')
  p.add_argument('--workers', type=int, default=1, help='annotation worker processes (one engine each)')
  p.add_argument('--train_seconds', type=float, default=3600, help='training wall-clock budget')
  p.add_argument('--steps', default=','.join(STEPS), help='steps to run (comma-separated)')
  p.add_argument('--reference', default=None, help='deep-labelled board records for the evaluation (e.g. the '
                 "label-cost frontier's WORKDIR/reference/board_value_data.bag)")
  p.add_argument('--install', action='store_true', help='copy the export into the package (searchless/pretrained_transformer/)')
  return p


def main(argv: Sequence[str] | None = None) -> None:
  args = _parser().parse_args(argv)
  with errors.one_line_errors():
    done = run(args.games, args.workdir, games_per_chunk=args.games_per_chunk, chunks=args.chunks,
               workers=args.workers, train_seconds=args.train_seconds, steps=args.steps.split(','),
               reference=args.reference, install_export=args.install)
  print(json.dumps(done, indent=2))


if __name__ == '__main__':
  main()
