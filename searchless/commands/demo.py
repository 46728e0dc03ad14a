r"""The main job: games -> annotated data -> trained model -> evaluation -> report.

    python -m searchless.commands.demo --run_dir runs/demo      # what `make run` does (the shipped sample games)
    python -m searchless.commands.demo --input 'lichess/*.pgn.zst' --run_dir runs/9m --config 9m \
        --annotate_args '--limit time=0.05 --mode per_move' --train_args 'train.num_steps=20000'

Every step is one of the project's own commands, run in this process with the
arguments printed before it (copy them to run a step alone):

1. annotate  ``searchless-annotate``        -> DATA_DIR (train/test bags, manifest.json; default RUN_DIR/data)
2. train     ``searchless-train``           -> RUN_DIR/train (checkpoints, metrics.jsonl)
3. evaluate  ``searchless-evaluate``        -> RUN_DIR/eval (metrics.json, boards.jsonl);
                                             the pretrained model too -> RUN_DIR/eval_pretrained
4. mine      ``searchless-mine-puzzles``    -> RUN_DIR/puzzles/puzzles.csv (from the TEST games;
                                             or --puzzles CSV: a given set, e.g. the shipped one)
5. puzzles   ``searchless-puzzles``         -> RUN_DIR/puzzles (results.csv, summary.json);
                                             the pretrained model too -> RUN_DIR/puzzles_pretrained
6. match     ``searchless-tournament``      -> RUN_DIR/match (games.pgn, results.json, Elo): the fresh
                                             model, the pretrained one and Stockfish, every pair
7. analyse_game ``searchless-analyse-game`` -> RUN_DIR/report/sample_game.json: the model's and
                                             Stockfish's view of a match game
8. report    ``searchless-report``          -> RUN_DIR/report (report.html, report.md, figures),
                                             the fresh model beside the pretrained one (reads artefacts only)

``--pretrained ''`` leaves the pretrained model (``Player.load('pretrained')``,
the model shipped in the package) out of steps 3, 5 and 6.

The commands are also kept in RUN_DIR/commands.json.

Rerunning continues: a step whose output is complete (and newer than what it
was made from) is skipped (annotate:
manifest.json; train: summary.json saying complete, with the same overrides; evaluate: metrics.json;
mine: puzzles.csv; puzzles: summary.json; match: results.json; analyse_game: sample_game.json); an
interrupted training resumes
from its last checkpoint and an interrupted match from the games in its PGN. Delete a step's directory to
redo it. `--config` picks a config by name (``configs/<name>.py``, default ``demo``) or path; `--train_args`,
`--annotate_args` pass anything else to those steps.
"""

import argparse
from collections.abc import Sequence
import json
import pathlib
import shlex
import time

from searchless import samples
from searchless.commands import cli
from searchless.commands import errors
from searchless.commands import job_steps
from searchless.core import artefacts
from searchless import configs

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
    '--preset',
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
  p.add_argument(
    '--match_opponent', default=None, help='agent spec of the match opponent (a UCI_Elo Stockfish anchors the Elo)'
  )
  p.add_argument(
    '--match_games', type=int, default=None, help='games of each pair of players in the match (pairs of colours)'
  )
  p.add_argument('--match_max_plies', type=int, default=None, help='plies before a game is drawn')
  p.add_argument('--workers', type=int, default=2, help='parallel games in the match')
  p.add_argument(
    '--pretrained',
    default='pretrained',
    help="checkpoint the fresh model is compared with (default: the model shipped in the package; '' = none)",
  )
  p.add_argument('--steps', nargs='+', choices=STEPS, default=list(STEPS), help='run only these steps')
  p.add_argument('--no_progress', action='store_true', help='no progress bars (logs, tests)')
  return p


def _repeated(flag: str, values: list[str]) -> list[str]:
  """['--flag', 'a', '--flag', 'b']: the commands take a repeated flag per file."""
  return [part for value in values for part in (flag, value)]


def run(argv: Sequence[str] | None = None) -> pathlib.Path:
  """Runs (or continues) the job; returns the report's path."""
  args = _parser().parse_args(argv)
  run_dir = pathlib.Path(args.run_dir).absolute()
  data = pathlib.Path(args.data_dir).absolute() if args.data_dir else run_dir / 'data'
  train_dir, eval_dir = run_dir / 'train', run_dir / 'eval'
  puzzle_dir, match_dir = run_dir / 'puzzles', run_dir / 'match'
  pretrained_eval_dir, pretrained_puzzle_dir = run_dir / 'eval_pretrained', run_dir / 'puzzles_pretrained'
  experiment = configs.load(args.config)  # A shipped name or a .py file (else a one-line error).
  config = args.config if args.config in configs.names() else str(pathlib.Path(args.config).absolute())
  job = experiment.demo if 'demo' in experiment else configs.load('demo').demo
  for flag in ('annotate_args', 'mine_limit', 'max_puzzles', 'match_opponent', 'match_games', 'match_max_plies'):
    if getattr(args, flag) is None:
      setattr(args, flag, job[flag])
  progress = ['--no_progress'] if args.no_progress else []
  engine = ['--engine_path', args.engine_path] if args.engine_path else []
  started = time.perf_counter()
  steps = job_steps.Steps(run_dir, args.steps, len(STEPS))
  step, timings = steps.run, steps.timings

  def annotate(argv):
    from searchless.commands import annotate as command

    command.main(argv)

  manifest_file = data / artefacts.AnnotationManifest.FILE  # Written last by annotate: the data is complete.
  # --overwrite: this step runs only while data/ has no manifest, so what is there is a crashed run's.
  step(
    1,
    'annotate',
    [
      'searchless-annotate',
      *_repeated('--input', args.input),
      '--out',
      str(data),
      '--overwrite',
      *engine,
      *progress,
      *shlex.split(args.annotate_args),
    ],
    manifest_file,
    annotate,
  )

  train_args = shlex.split(args.train_args)
  train_done = train_dir / artefacts.TrainingSummary.FILE  # Rewritten at the end of every training run.

  def train(argv):
    from searchless.commands import train as command

    command.main(argv)

  summary = artefacts.TrainingSummary.read_or_none(train_done)
  finished = (
    summary is not None
    and summary.complete
    and [o for o in summary.overrides if not o.startswith(('data.train=', 'data.eval='))] == train_args
  )
  step(
    2,
    'train',
    [
      'searchless-train',
      '--config',
      config,
      '--workdir',
      str(train_dir),
      '--data',
      str(data / 'train' / 'action_value*'),
      '--eval_data',
      str(data / 'test' / 'action_value*'),
      *progress,
      *train_args,
    ],
    train_done if finished else None,
    train,
    after=(manifest_file,),
  )

  def evaluate(argv):
    from searchless.commands import evaluate as command

    command.main(argv)

  step(
    3,
    'evaluate',
    ['searchless-evaluate', '--checkpoint', str(train_dir), '--data', str(data / 'test'), '--out', str(eval_dir)],
    eval_dir / 'metrics.json',
    evaluate,
    after=(train_done,),
  )
  if args.pretrained:
    step(
      3,
      'evaluate',
      [
        'searchless-evaluate',
        '--checkpoint',
        args.pretrained,
        '--data',
        str(data / 'test'),
        '--out',
        str(pretrained_eval_dir),
      ],
      pretrained_eval_dir / 'metrics.json',
      evaluate,
      after=(manifest_file,),
      record_as='evaluate_pretrained',
    )

  def mine(argv):
    from searchless.commands import mine_puzzles as command

    command.main(argv)

  def mining_games() -> list[str]:
    """The test games of the annotation (its manifest says which): puzzles never come from training games."""
    manifest = artefacts.AnnotationManifest.read_or_none(manifest_file)
    if manifest is None:
      return _repeated('--games', args.input)
    if 'test' in manifest.inputs:  # --test_input files: every game is a test game.
      return [*_repeated('--games', manifest.inputs['test']), '--split', 'all']
    return [
      *_repeated('--games', manifest.inputs['train']),
      '--split',
      'test',
      '--test_fraction',
      str(manifest.split['test_fraction']),
    ]

  puzzle_csv = pathlib.Path(args.puzzles).absolute() if args.puzzles else puzzle_dir / 'puzzles.csv'
  if args.puzzles:
    if 'mine' in args.steps:
      print(f'\n[4/{len(STEPS)}] mine: skipped, puzzles from {puzzle_csv}', flush=True)
  else:
    step(
      4,
      'mine',
      [
        'searchless-mine-puzzles',
        *mining_games(),
        '--out',
        str(puzzle_csv),
        '--limit',
        args.mine_limit,
        '--max_puzzles',
        str(args.max_puzzles),
        *progress,
      ],
      puzzle_csv,
      mine,
      after=(manifest_file,),
    )

  def puzzles(argv):
    from searchless.commands import puzzles as command

    command.main(argv)

  step(
    5,
    'puzzles',
    [
      'searchless-puzzles',
      '--puzzles',
      str(puzzle_csv),
      '--agent',
      f'checkpoint:{train_dir},name=searchless',
      '--out',
      str(puzzle_dir),
      *progress,
    ],
    puzzle_dir / 'summary.json',
    puzzles,
    after=(train_done, puzzle_csv),
  )
  if args.pretrained:
    step(
      5,
      'puzzles',
      [
        'searchless-puzzles',
        '--puzzles',
        str(puzzle_csv),
        '--agent',
        f'checkpoint:{args.pretrained},name=pretrained',
        '--out',
        str(pretrained_puzzle_dir),
        *progress,
      ],
      pretrained_puzzle_dir / 'summary.json',
      puzzles,
      after=(puzzle_csv,),
      record_as='puzzles_pretrained',
    )

  def match(argv):
    from searchless.commands import tournament as command

    command.main(argv)

  pretrained_agent = ['--agent', f'checkpoint:{args.pretrained},name=pretrained'] if args.pretrained else []
  step(
    6,
    'match',
    [
      'searchless-tournament',
      '--agent',
      f'checkpoint:{train_dir},name=searchless',
      *pretrained_agent,
      '--agent',
      args.match_opponent,
      *([] if args.pretrained else ['--gauntlet']),
      '--make_openings',
      str(max(1, args.match_games // 2)),
      '--workers',
      str(args.workers),
      '--max_plies',
      str(args.match_max_plies),
      '--out',
      str(match_dir),
      *progress,
    ],
    match_dir / 'results.json',
    match,
    after=(train_done,),
  )

  def analyse_game(argv):
    from searchless.commands import analyse_game as command

    command.main(argv)

  step(
    7,
    'analyse_game',
    ['searchless-analyse-game', '--run_dir', str(run_dir), *engine],
    run_dir / 'report' / 'sample_game.json',
    analyse_game,
    after=(match_dir / 'results.json', train_done),
  )

  def report(argv):
    from searchless.commands import report as command

    command.main(argv)

  step(8, 'report', ['searchless-report', '--run_dir', str(run_dir), '--data_dir', str(data)], None, report)

  total = time.perf_counter() - started
  (run_dir / 'timings.json').write_text(json.dumps({'seconds': round(total, 1), 'steps': timings}, indent=2) + '\n')
  report_path = run_dir / 'report' / 'report.html'
  print(f'\nDone in {total / 60:.1f} min. Report: {report_path}')
  print('Play the model (any UCI GUI, or python-chess):')
  print(f'  searchless-uci --checkpoint {train_dir}')
  print(
    f'  searchless-tournament --agent checkpoint:{train_dir} --agent stockfish:nodes=1000,elo=1500 '
    f'--make_openings 10 --out {run_dir}/ladder'
  )
  return report_path


def main(argv: Sequence[str] | None = None) -> None:
  with errors.one_line_errors():
    run(argv)


if __name__ == '__main__':
  main()
