r"""The main job: games -> annotated data -> trained model -> evaluation -> report.

    python -m pipelines.demo --input data/sample_games.pgn --run_dir runs/demo      # what `make run` does
    python -m pipelines.demo --input 'lichess/*.pgn.zst' --run_dir runs/9m --preset 9m \
        --annotate_args '--limit time=0.05 --mode per_move' --train_args 'train.num_steps=20000'

Every step is one of the project's own commands, run in this process with the
arguments printed before it (copy them to run a step alone):

1. annotate  ``searchless-annotate``        -> RUN_DIR/data (train/test bags, manifest.json)
2. train     ``searchless-train``           -> RUN_DIR/train (checkpoints, metrics.jsonl)
3. evaluate  ``searchless-evaluate``        -> RUN_DIR/eval (metrics.json, boards.jsonl);
                                             the pretrained model too -> RUN_DIR/eval_pretrained
4. mine      ``searchless-mine-puzzles``    -> RUN_DIR/puzzles/puzzles.csv (from the TEST games;
                                             or --puzzles CSV: a given set, e.g. the shipped one)
5. puzzles   ``searchless-puzzles``         -> RUN_DIR/puzzles (results.csv, summary.json);
                                             the pretrained model too -> RUN_DIR/puzzles_pretrained
6. match     ``searchless-tournament``      -> RUN_DIR/match (games.pgn, results.json, Elo): the fresh
                                             model, the pretrained one and Stockfish, every pair
7. report    ``searchless-report``          -> RUN_DIR/report (report.html, report.md, figures),
                                             the fresh model beside the pretrained one

``--pretrained ''`` leaves the pretrained model (``Player.load('pretrained')``,
the model shipped in the package) out of steps 3, 5 and 6.

The commands are also kept in RUN_DIR/commands.json.

Rerunning continues: a step whose output is complete (and newer than what it
was made from) is skipped (annotate:
manifest.json; train: complete.json; evaluate: metrics.json; mine: puzzles.csv;
puzzles: summary.json; match: results.json); an interrupted training resumes
from its last checkpoint and an interrupted match from the games in its PGN. Delete a step's directory to
redo it. `--preset` picks ``configs/<preset>.py``; `--train_args`,
`--annotate_args` pass anything else to those steps.
"""

import argparse
import json
import pathlib
import shlex
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
STEPS = ('annotate', 'train', 'evaluate', 'mine', 'puzzles', 'match', 'report')

# Settings per preset that differ from the config files, for a demo-sized run.
# tiny: ~8 minutes of training on 2 CPU cores (0.7 epochs of the sample); 9m: meant for a GPU.
PRESET_TRAIN_ARGS = {
    'tiny': ['train.num_steps=800', 'data.batch_size=128', 'train.eval_every=200', 'train.log_every=20',
             'train.ckpt_every=200', 'train.eval_records=8192'],
    '9m': ['train.num_steps=5000', 'train.eval_every=1000', 'train.ckpt_every=1000'],
}


def _parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(prog='python -m pipelines.demo', description=__doc__.split('\n\n')[0],
                              formatter_class=argparse.ArgumentDefaultsHelpFormatter)
  p.add_argument('--input', nargs='+', required=True, help='PGN files or globs (.pgn, .pgn.zst, ...)')
  p.add_argument('--run_dir', required=True, help='where every step writes')
  p.add_argument('--preset', default='tiny', help='model/training config: configs/<preset>.py or a path')
  p.add_argument('--annotate_args', default='--mode multipv --limit nodes=30000 --state_value best_move',
                 help='extra searchless-annotate flags (one string)')
  p.add_argument('--train_args', default='', help='extra key=value config overrides (one string)')
  p.add_argument('--engine_path', help='Stockfish binary (default: found on PATH or /usr/games)')
  p.add_argument('--puzzles', default='',
                 help="a puzzle CSV (Lichess columns) to use instead of mining the test games ('' mines)")
  p.add_argument('--mine_limit', default='nodes=20000', help='Stockfish limit for mining puzzles')
  p.add_argument('--max_puzzles', type=int, default=300, help='puzzles to mine at most')
  p.add_argument('--match_opponent', default='stockfish:time=0.05,elo=1350,name=stockfish-elo1350',
                 help='agent spec of the match opponent (a UCI_Elo Stockfish anchors the Elo)')
  p.add_argument('--match_games', type=int, default=8, help='games of each pair of players in the match (pairs of colours)')
  p.add_argument('--match_max_plies', type=int, default=200, help='plies before a game is drawn')
  p.add_argument('--workers', type=int, default=2, help='parallel games in the match')
  p.add_argument('--pretrained', default='pretrained',
                 help="checkpoint the fresh model is compared with (default: the model shipped in the package; '' = none)")
  p.add_argument('--steps', nargs='+', choices=STEPS, default=list(STEPS), help='run only these steps')
  p.add_argument('--no_progress', action='store_true', help='no progress bars (logs, tests)')
  return p


def _config_path(preset: str) -> str:
  path = pathlib.Path(preset)
  if path.suffix == '.py':
    return str(path)
  return str(ROOT / 'configs' / f'{preset}.py')


def _repeated(flag: str, values: list[str]) -> list[str]:
  """['--flag', 'a', '--flag', 'b']: the commands take a repeated flag per file."""
  return [part for value in values for part in (flag, value)]


def _record_command(run_dir: pathlib.Path, step: str, command: list[str]) -> None:
  """Keeps each step's command in RUN_DIR/commands.json (the report shows them for steps to rerun)."""
  path = run_dir / 'commands.json'
  recorded = json.loads(path.read_text()) if path.exists() else {}
  recorded[step] = shlex.join(command)
  run_dir.mkdir(parents=True, exist_ok=True)
  path.write_text(json.dumps(recorded, indent=2) + '\n')


def _announce(number: int, step: str, command: list[str]) -> None:
  print(f'\n[{number}/{len(STEPS)}] {step}: {shlex.join(command)}', flush=True)


def run(argv=None) -> pathlib.Path:
  """Runs (or continues) the job; returns the report's path."""
  args = _parser().parse_args(argv)
  run_dir = pathlib.Path(args.run_dir).absolute()
  data, train_dir, eval_dir = run_dir / 'data', run_dir / 'train', run_dir / 'eval'
  puzzle_dir, match_dir = run_dir / 'puzzles', run_dir / 'match'
  pretrained_eval_dir, pretrained_puzzle_dir = run_dir / 'eval_pretrained', run_dir / 'puzzles_pretrained'
  config = _config_path(args.preset)
  if not pathlib.Path(config).exists():
    raise FileNotFoundError(f'no config for preset {args.preset!r} at {config}')
  progress = ['--no_progress'] if args.no_progress else []
  engine = ['--engine_path', args.engine_path] if args.engine_path else []
  started = time.perf_counter()
  timings = {}

  def step(number: int, name: str, command: list[str], done: pathlib.Path | None, call,
           after: tuple[pathlib.Path, ...] = (), record_as: str | None = None) -> None:
    """Runs a step unless `done` exists and is newer than the outputs it was made `after`."""
    if name not in args.steps:
      return
    _announce(number, name, command)
    name = record_as or name
    _record_command(run_dir, name, command)
    if done is not None and done.exists() and all(
        not d.exists() or d.stat().st_mtime <= done.stat().st_mtime for d in after):
      print(f'  done already ({done.relative_to(run_dir)} exists): skipped', flush=True)
      return
    t = time.perf_counter()
    call(command[1:])
    timings[name] = round(time.perf_counter() - t, 1)
    print(f'  {name} took {timings[name]:.0f} s', flush=True)

  def annotate(argv):
    from pipelines import annotate as annotate_lib
    print(annotate_lib.summary(annotate_lib.run(argv)))

  step(1, 'annotate', ['searchless-annotate', *_repeated('--input', args.input), '--output_dir', str(data), *engine,
                       *shlex.split(args.annotate_args)], data / 'manifest.json', annotate)

  train_args = PRESET_TRAIN_ARGS.get(args.preset, []) + shlex.split(args.train_args)
  train_done = train_dir / 'complete.json'  # Written once the last step's checkpoint exists.

  def train(argv):
    from searchless import checkpoint
    from searchless import config as config_lib
    from searchless import train as train_lib
    train_lib.main(argv)
    num_steps = config_lib.load(config, train_args).train.num_steps
    with checkpoint.Checkpointer(str(train_dir / 'checkpoints')) as checkpointer:
      if checkpointer.latest_step() == num_steps:
        train_done.write_text(json.dumps({'num_steps': num_steps, 'train_args': train_args}) + '\n')

  if train_done.exists() and json.loads(train_done.read_text())['train_args'] != train_args:
    train_done.unlink()  # Different settings (e.g. more steps): train on from the last checkpoint.
  step(2, 'train', ['searchless-train', '--config', config, '--workdir', str(train_dir),
                    '--data', str(data / 'train' / 'action_value*'), '--eval_data', str(data / 'test' / 'action_value*'),
                    *train_args], train_done, train, after=(data / 'manifest.json',))

  def evaluate(argv):
    from searchless import evaluate as evaluate_lib
    evaluate_lib.main(argv)

  step(3, 'evaluate', ['searchless-evaluate', '--checkpoint', str(train_dir), '--data', str(data / 'test'),
                       '--out', str(eval_dir)], eval_dir / 'metrics.json', evaluate, after=(train_done,))
  if args.pretrained:
    step(3, 'evaluate', ['searchless-evaluate', '--checkpoint', args.pretrained, '--data', str(data / 'test'),
                         '--out', str(pretrained_eval_dir)], pretrained_eval_dir / 'metrics.json', evaluate,
         after=(data / 'manifest.json',), record_as='evaluate_pretrained')

  def mine(argv):
    from searchless import puzzle_mining
    puzzle_mining.main(argv)

  def mining_games() -> list[str]:
    """The test games of the annotation (its manifest says which): puzzles never come from training games."""
    manifest_path = data / 'manifest.json'
    if not manifest_path.exists():
      return _repeated('--games', args.input)
    manifest = json.loads(manifest_path.read_text())
    if 'test' in manifest['inputs']:  # --test_input files: every game is a test game.
      return [*_repeated('--games', manifest['inputs']['test']), '--split', 'all']
    return [*_repeated('--games', manifest['inputs']['train']), '--split', 'test',
            '--test_fraction', str(manifest['split']['test_fraction'])]

  puzzle_csv = pathlib.Path(args.puzzles).absolute() if args.puzzles else puzzle_dir / 'puzzles.csv'
  if args.puzzles:
    if 'mine' in args.steps:
      print(f'\n[4/{len(STEPS)}] mine: skipped, puzzles from {puzzle_csv}', flush=True)
  else:
    step(4, 'mine', ['searchless-mine-puzzles', *mining_games(), '--out', str(puzzle_csv),
                     '--limit', args.mine_limit, '--max_puzzles', str(args.max_puzzles), *progress],
         puzzle_csv, mine, after=(data / 'manifest.json',))

  def puzzles(argv):
    from searchless import puzzle_eval
    puzzle_eval.main(argv)

  step(5, 'puzzles', ['searchless-puzzles', '--puzzles', str(puzzle_csv),
                      '--agent', f'checkpoint:{train_dir},name=searchless', '--out', str(puzzle_dir), *progress],
       puzzle_dir / 'summary.json', puzzles, after=(train_done, puzzle_csv))
  if args.pretrained:
    step(5, 'puzzles', ['searchless-puzzles', '--puzzles', str(puzzle_csv),
                        '--agent', f'checkpoint:{args.pretrained},name=pretrained', '--out', str(pretrained_puzzle_dir),
                        *progress], pretrained_puzzle_dir / 'summary.json', puzzles, after=(puzzle_csv,),
         record_as='puzzles_pretrained')

  def match(argv):
    from searchless import tournament
    tournament.main(argv)

  pretrained_agent = ['--agent', f'checkpoint:{args.pretrained},name=pretrained'] if args.pretrained else []
  step(6, 'match', ['searchless-tournament', '--agent', f'checkpoint:{train_dir},name=searchless', *pretrained_agent,
                    '--agent', args.match_opponent, *([] if args.pretrained else ['--gauntlet']),
                    '--make_openings', str(max(1, args.match_games // 2)),
                    '--workers', str(args.workers), '--max_plies', str(args.match_max_plies),
                    '--out', str(match_dir), *progress], match_dir / 'results.json', match, after=(train_done,))

  def report(argv):
    from searchless import report as report_lib
    report_lib.main(argv)

  step(7, 'report', ['searchless-report', '--run_dir', str(run_dir)], None, report)

  total = time.perf_counter() - started
  (run_dir / 'timings.json').write_text(json.dumps({'seconds': round(total, 1), 'steps': timings}, indent=2) + '\n')
  report_path = run_dir / 'report' / 'report.html'
  print(f'\nDone in {total / 60:.1f} min. Report: {report_path}')
  print('Play the model (any UCI GUI, or python-chess):')
  print(f'  searchless-uci --checkpoint {train_dir}')
  print(f'  searchless-tournament --agent checkpoint:{train_dir} --agent stockfish:nodes=1000,elo=1500 '
        f'--make_openings 10 --out {run_dir}/ladder')
  return report_path


def main(argv=None) -> None:
  try:
    run(argv)
  except (FileNotFoundError, ValueError) as e:
    sys.exit(f'error: {e}')


if __name__ == '__main__':
  main()
