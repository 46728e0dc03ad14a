r"""The main job: games -> annotated data -> trained model -> evaluation -> report.

    python -m searchless.commands.demo --run_dir runs/demo      # what `make run` does (the shipped sample games)
    python -m searchless.commands.demo --input 'lichess/*.pgn.zst' --run_dir runs/9m --config 9m \
        --annotate_args '--limit time=0.05 --mode per_move' --train_args 'train.num_steps=20000'

Every step is one of the project's own commands (`_table`: step -> command, inputs, outputs), run in this
process with the arguments printed before it (copy them to run a step alone; RUN_DIR/commands.json keeps them);
docs/demo.md says what each writes. ``--pretrained ''`` leaves the shipped model out of the comparison.

Rerunning continues: a step whose output is complete and newer than what it was made from is skipped, an
interrupted training resumes from its last checkpoint and an interrupted match from the games in its PGN.
Delete a step's directory to redo it. `--config` picks a config by name (``configs/<name>.py``, default
``demo``) or path; `--train_args`, `--annotate_args` pass anything else to those steps.
"""

import argparse
from collections.abc import Iterator, Sequence
import json
import pathlib
import shlex
import time

from searchless import configs
from searchless import samples
from searchless.commands import job_steps
from searchless.core import artefacts
from searchless.data import packing
from searchless.plumbing import cli
from searchless.plumbing import errors

Step = job_steps.Step

STEPS = ('annotate', 'train', 'evaluate', 'mine', 'puzzles', 'match', 'analyse_game', 'report')


def _parser() -> argparse.ArgumentParser:
  p = cli.ArgumentParser(prog='python -m searchless.commands.demo', description=__doc__.split('\n\n')[0])
  p.add_argument(
    '--input',
    nargs='+',
    default=[str(samples.GAMES)],
    help='PGN files or globs (.pgn, .pgn.zst, ...); default: the sample games shipped in the package',
  )
  p.add_argument('--run_dir', required=True, type=cli.output_dir, help='where every step writes')
  p.add_argument(
    '--data_dir',
    default=None,
    type=cli.output_dir,
    help='where the annotate step writes the dataset (default: RUN_DIR/data; make run: data/<run name>)',
  )
  p.add_argument(
    '--config',
    default='demo',
    help="model/training config: a shipped name (configs/) or a .py path; its 'demo' "
    "section (else the demo config's) gives the defaults of the flags below",
  )
  p.add_argument('--annotate_args', default=None, help='searchless-annotate flags (one string)')
  p.add_argument('--train_args', default='', help='extra key=value config overrides (one string)')
  p.add_argument('--engine_path', help='Stockfish binary (default: found on PATH or /usr/games)')
  p.add_argument(
    '--puzzles',
    default=str(samples.PUZZLES),
    help="a puzzle CSV (Lichess columns) to use instead of mining the test games ('' mines); default: "
    'the sample puzzles shipped in the package',
  )
  p.add_argument('--mine_limit', default=None, help='Stockfish limit for mining puzzles')
  p.add_argument('--max_puzzles', type=int, default=None, help='puzzles to mine at most')
  p.add_argument('--match_opponent', default=None, help='the match opponent (a UCI_Elo Stockfish anchors the Elo)')
  p.add_argument('--match_games', type=int, default=None, help='games of each pair of players (pairs of colours)')
  p.add_argument('--match_max_plies', type=int, default=None, help='plies before a game is drawn')
  p.add_argument('--workers', type=int, default=2, help='parallel games in the match')
  p.add_argument(
    '--pretrained',
    default='pretrained',
    help="checkpoint the fresh model is compared with (default: the model shipped in the package; '' = none)",
  )
  p.add_argument('--steps', nargs='+', choices=STEPS, default=list(STEPS), help='run only these steps')
  p.add_argument('--no_progress', action='store_true', help='no progress bars (logs, tests)')
  cli.add_deprecated_alias(p, '--preset', '--config')
  return p


def _repeated(flag: str, values: list[str]) -> list[str]:
  """['--flag', 'a', '--flag', 'b']: the commands take a repeated flag per file."""
  return [part for value in values for part in (flag, value)]


def _mining_games(args: argparse.Namespace, manifest_file: pathlib.Path) -> list[str]:
  """The test games of the annotation (its manifest says which): puzzles never come from training games."""
  manifest = artefacts.AnnotationManifest.read_or_none(manifest_file)
  if manifest is None:
    return _repeated('--games', args.input)
  if 'test' in manifest.inputs:  # --test_input files: every game is a test game.
    return [*_repeated('--games', manifest.inputs['test']), '--split', 'all']
  split = ['--split', 'test', '--test_fraction', str(manifest.split['test_fraction'])]
  return [*_repeated('--games', manifest.inputs['train']), *split]


def _table(
  args: argparse.Namespace, config: str, records: str, run_dir: pathlib.Path, data: pathlib.Path
) -> Iterator[Step]:
  """The job's steps, in order: step -> command, its arguments (inputs and outputs), the file that says it is done
  and those it is made from. A generator: each step's arguments are read when the steps before it have run."""
  train_dir, match_dir, game = run_dir / 'train', run_dir / 'match', run_dir / 'report' / 'sample_game.json'
  manifest = data / artefacts.AnnotationManifest.FILE  # Written last by annotate: the data is complete.
  trained = train_dir / artefacts.TrainingSummary.FILE  # Rewritten at the end of every training run.
  progress = ['--no_progress'] if args.no_progress else []
  engine = ['--engine_path', args.engine_path] if args.engine_path else []
  puzzle_csv = pathlib.Path(args.puzzles).absolute() if args.puzzles else run_dir / 'puzzles' / 'puzzles.csv'
  # (name, checkpoint, output suffix, what its evaluation is made after, what its puzzles are made after).
  Paths = tuple[pathlib.Path, ...]
  models: list[tuple[str, str, str, Paths, Paths]] = [
    ('searchless', str(train_dir), '', (trained,), (trained, puzzle_csv))
  ]
  if args.pretrained:
    models.append(('pretrained', args.pretrained, '_pretrained', (manifest,), (puzzle_csv,)))
  # --overwrite: annotate runs only while data/ has no manifest, so what is there is a crashed run's.
  annotate = [*_repeated('--input', args.input), '--out', str(data), '--overwrite', *engine, *progress]
  yield Step(1, 'annotate', 'annotate', (*annotate, *shlex.split(args.annotate_args)), manifest)

  train_args = shlex.split(args.train_args)
  summary = artefacts.TrainingSummary.read_or_none(trained)
  finished = (
    summary is not None
    and summary.complete
    and train_args == [o for o in summary.overrides if not o.startswith(('data.train=', 'data.eval='))]
  )
  train = ['--config', config, '--workdir', str(train_dir), '--data', str(data / 'train' / f'{records}*')]
  train += ['--eval_data', str(data / 'test' / f'{records}*'), *progress, *train_args]
  yield Step(2, 'train', 'train', tuple(train), trained if finished else None, after=(manifest,))

  for _, spec, suffix, made, _ in models:
    out = run_dir / f'eval{suffix}'
    evaluate = ('--checkpoint', spec, '--data', str(data / 'test'), '--out', str(out))
    yield Step(3, 'evaluate', 'evaluate', evaluate, out / 'metrics.json', made, f'evaluate{suffix}')

  mine = ['--out', str(puzzle_csv), '--limit', args.mine_limit, '--max_puzzles', str(args.max_puzzles), *progress]
  yield Step(
    4,
    'mine',
    'mine_puzzles',
    () if args.puzzles else (*_mining_games(args, manifest), *mine),
    puzzle_csv,
    (manifest,),
    skipped=f'puzzles from {puzzle_csv}' if args.puzzles else None,
  )

  for name, spec, suffix, _, made in models:
    out = run_dir / f'puzzles{suffix}'
    puzzles = ('--puzzles', str(puzzle_csv), '--agent', f'checkpoint:{spec},name={name}', '--out', str(out))
    yield Step(5, 'puzzles', 'puzzles', (*puzzles, *progress), out / 'summary.json', made, f'puzzles{suffix}')

  players = [part for name, spec, *_ in models for part in ('--agent', f'checkpoint:{spec},name={name}')]
  match = [*players, '--agent', args.match_opponent, *([] if args.pretrained else ['--gauntlet'])]
  match += ['--make_openings', str(max(1, args.match_games // 2)), '--workers', str(args.workers)]
  match += ['--max_plies', str(args.match_max_plies), '--out', str(match_dir), *progress]
  yield Step(6, 'match', 'tournament', tuple(match), match_dir / 'results.json', (trained,))

  analyse = ('--run_dir', str(run_dir), *engine)
  yield Step(7, 'analyse_game', 'analyse_game', analyse, game, (match_dir / 'results.json', trained))
  yield Step(8, 'report', 'report', ('--run_dir', str(run_dir), '--data_dir', str(data)), None)


def run(argv: Sequence[str] | None = None) -> pathlib.Path:
  """Runs (or continues) the job; returns the report's path."""
  args = _parser().parse_args(argv)
  run_dir = pathlib.Path(args.run_dir).absolute()
  data = pathlib.Path(args.data_dir).absolute() if args.data_dir else run_dir / 'data'
  experiment = configs.load(args.config)  # A shipped name or a .py file (else a one-line error).
  config = args.config if args.config in configs.names() else str(pathlib.Path(args.config).absolute())
  job = experiment.demo if 'demo' in experiment else configs.load('demo').demo
  for flag in ('annotate_args', 'mine_limit', 'max_puzzles', 'match_opponent', 'match_games', 'match_max_plies'):
    if getattr(args, flag) is None:
      setattr(args, flag, job[flag])
  started = time.perf_counter()
  steps = job_steps.Steps(run_dir, args.steps, len(STEPS))
  records = 'board_value' if packing.packed(experiment) else 'action_value'  # What the model trains on.
  for step in _table(args, config, records, run_dir, data):  # Its arguments read what the steps before wrote.
    steps.run(step)
  total = time.perf_counter() - started
  timings = {'seconds': round(total, 1), 'steps': steps.timings}
  (run_dir / 'timings.json').write_text(json.dumps(timings, indent=2) + '\n')
  report_path = run_dir / 'report' / 'report.html'
  print(f'\nDone in {total / 60:.1f} min. Report: {report_path}')
  train_dir = run_dir / 'train'
  print(f'Play the model (any UCI GUI, or python-chess):\n  searchless-uci --checkpoint {train_dir}')
  print(f'  searchless-tournament --agent checkpoint:{train_dir} --agent stockfish:nodes=1000,elo=1500 \\')
  print(f'      --make_openings 10 --out {run_dir}/ladder')
  return report_path


def main(argv: Sequence[str] | None = None) -> None:
  with errors.one_line_errors():
    run(argv)


if __name__ == '__main__':
  main()
