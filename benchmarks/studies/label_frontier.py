"""The label-cost frontier: which engine labels give the most chess per engine core-hour.

    .venv/bin/python benchmarks/studies/label_frontier.py --workdir RUNS/frontier \\
        --puzzles ../shared/data/puzzles/lichess_puzzles_dev.csv          # ~1.5 hours on 2 cores

Every label mode annotates the same real Lichess boards (`../shared/data/games/`,
the two files interleaved game by game, boards in game order, de-duplicated by
FEN) until its engine has used ``--budget_core_hours`` of CPU time (the engine
process's own user + system time, one thread, so other load on the machine does
not change a mode's budget). Then the same small model is trained on each mode's
records for the same wall-clock budget (``--train_seconds``) and measured on

* one fixed set of test boards (one board of each held-out game: 5% of the
  games by the pipeline's hash split, none of which any mode annotates), labelled
  by a deep reference (``--reference``, one MultiPV search per board): action
  accuracy (the model's best move is a reference best move) and Kendall's tau-b
  between the model's and the reference's move values, averaged over boards;
* the puzzles of ``--puzzles`` (every move of the solution must be found).

Modes: the paper's per-move search (at its node-limited equivalent, 50k nodes
per move, ~50 ms here), per-move node limits, MultiPV at two node counts, and
one search per board (its state value and best move), which trains a
state-value model and a behavioral-cloning model. Action-value modes train the
board-packed model (tiny_packed); the others tiny with
their policy, whose per-record cost suits one record per board.

Resumable: each mode's records, each model and each evaluation are kept under
--workdir and reused by a rerun. Ends with the table and the cheapest mode per
point of puzzle accuracy.
"""

import argparse
import json
import multiprocessing
import os
import pathlib
import platform
import time

import chess
import numpy as np

from searchless.core import bags
from searchless import configs
from searchless.core import records
from searchless.data import annotation_records
from searchless.data import pgn
from searchless.data import splits
from searchless.engines import annotator as engine_lib
from searchless.engines import launch
from searchless.evaluation import metrics
from searchless.training import plot

ROOT = pathlib.Path(__file__).resolve().parents[2]
GAMES = sorted(str(p) for p in (ROOT.parent / 'shared' / 'data' / 'games').glob('*.pgn'))
TEST_FRACTION = 0.05  # The pipeline's hash split (annotate.split_of): these games are held out.
# (name, engine mode, limit, policies trained on its records).
MODES = (
  ('per_move nodes=50000 (paper, ~50 ms)', 'per_move', 'nodes=50000', ('action_value',)),
  ('per_move nodes=5000', 'per_move', 'nodes=5000', ('action_value',)),
  ('multipv nodes=200000', 'multipv', 'nodes=200000', ('action_value',)),
  ('multipv nodes=20000', 'multipv', 'nodes=20000', ('action_value',)),
  ('board nodes=20000', 'board', 'nodes=20000', ('state_value', 'behavioral_cloning')),
)
CONFIGS = {'action_value': 'tiny_packed', 'state_value': 'tiny', 'behavioral_cloning': 'tiny'}


def slug(name: str) -> str:
  return name.split(' (')[0].replace(' ', '_').replace('=', '')


def games_in_order(paths: list[str]):
  """Parsed games of `paths`, the files interleaved game by game."""
  for raw in pgn.interleave_raw_games(paths):
    game = pgn.parse_game(raw)
    if isinstance(game, pgn.Game):
      yield game


def split_boards(paths: list[str], seed: int = 0) -> tuple[list[str], list[str]]:
  """(train boards in game order, de-duplicated; one random non-terminal board per held-out game, distinct)."""
  rng = np.random.default_rng(seed)
  train, seen, test = [], set(), []
  for game in games_in_order(paths):
    if splits.split_of(game.key, TEST_FRACTION) == 'test':
      playable = [f for f in game.fens if not chess.Board(f).is_game_over()]
      if playable:
        fen = playable[rng.integers(len(playable))]
        if fen not in test:  # Openings repeat: a board counts once.
          test.append(fen)
      continue
    for fen in game.fens:
      if fen not in seen:
        seen.add(fen)
        train.append(fen)
  return train, test


def cpu_seconds(pid: int) -> float:
  """User + system CPU seconds of process `pid` (Linux /proc)."""
  fields = pathlib.Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()
  return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def annotate_mode(args) -> dict:
  """Annotates `fens` in order until the engine has used `budget_s` CPU seconds; writes the mode's bags."""
  name, mode, limit, fens, budget_s, out_dir, engine_path = args
  out_dir = pathlib.Path(out_dir)
  done = out_dir / 'annotation.json'
  if done.exists():
    return json.loads(done.read_text())
  out_dir.mkdir(parents=True, exist_ok=True)
  config = engine_lib.EngineConfig(
    path=engine_path,
    limit=launch.SearchLimit.parse(limit),
    mode=mode,
    state_value='search' if mode == 'board' else 'best_move',
  )
  annotations, start = [], time.time()
  with engine_lib.BoardAnnotator(config) as annotator:
    used = 0.0
    for fen in fens:
      annotations.append(annotator.annotate(fen))
      pid = annotator.pid
      used = cpu_seconds(pid) if pid else used  # Terminal boards need no engine.
      if used >= budget_s:
        break
    engine_id = annotator.engine_id
  kinds = annotation_records.record_kinds('chessbench' if mode == 'board' else 'board', mode)
  counts = {}
  for kind in kinds:
    items = [r for a in annotations for r in annotation_records.RECORDS_OF[kind](a)]
    counts[kind] = bags.write_records(str(out_dir / f'{kind}_data.bag'), kind, items)
  result = {
    'name': name,
    'mode': mode,
    'limit': limit,
    'engine_cpu_seconds': round(used, 1),
    'wall_seconds': round(time.time() - start, 1),
    'boards': len(annotations),
    'action_values': sum(len(a.action_values) for a in annotations),
    'records': counts,
    'engine': engine_id,
  }
  done.write_text(json.dumps(result, indent=2) + '\n')
  print(f'annotated {name}: {json.dumps({k: v for k, v in result.items() if k != "engine"})}', flush=True)
  return result


def reference_chunk(args) -> list:
  fens, limit, engine_path = args
  config = engine_lib.EngineConfig(
    path=engine_path, limit=launch.SearchLimit.parse(limit), mode='multipv', state_value='best_move', deadline=300
  )
  with engine_lib.BoardAnnotator(config) as annotator:
    return [annotator.annotate(fen) for fen in fens]


def reference_boards(fens: list[str], limit: str, workdir: pathlib.Path, engine_path: str, processes: int):
  path = workdir / 'reference' / 'board_value_data.bag'
  if not path.exists():
    path.parent.mkdir(parents=True, exist_ok=True)
    start = time.time()
    chunks = [fens[i::processes] for i in range(processes)]
    with multiprocessing.get_context('spawn').Pool(processes) as pool:
      annotations = [a for part in pool.map(reference_chunk, [(c, limit, engine_path) for c in chunks]) for a in part]
    by_fen = {a.fen: a for a in annotations}
    items = [annotation_records.board_value_records(by_fen[f])[0] for f in fens]
    tmp = path.with_suffix('.tmp')
    bags.write_records(str(tmp), records.BOARD_VALUE, items)
    tmp.rename(path)
    (path.parent / 'reference.json').write_text(
      json.dumps(
        {
          'limit': limit,
          'mode': 'multipv',
          'boards': len(items),
          'wall_seconds': round(time.time() - start, 1),
          'processes': processes,
        },
        indent=2,
      )
      + '\n'
    )
  from searchless.evaluation import evaluate

  boards, dropped, _ = evaluate.load_boards(str(path))
  return boards


def train_and_measure(
  name: str, policy: str, data: pathlib.Path, run_dir: pathlib.Path, train_seconds: float, ref_boards, puzzle_set
) -> dict:
  from searchless.evaluation import evaluate, puzzles as puzzle_eval
  from searchless.play import player as player_lib
  from searchless.training import train

  done = run_dir / 'measured.json'
  if done.exists():
    return json.loads(done.read_text())
  kind = records.BOARD_VALUE if policy == 'action_value' else policy
  overrides = [
    f'data.train={data / f"{kind}_data.bag"}',
    f'policy={policy}',
    f'train.max_seconds={train_seconds}',
    'train.num_steps=10000000',
    'train.eval_every=10000000',
    'train.ckpt_every=500',
    'train.log_every=25',
  ]
  config = configs.load(str(CONFIGS[policy]), overrides)
  trained = run_dir / 'trained.json'
  if not trained.exists():
    start = time.time()
    state = train.train(config, str(run_dir))
    trained.write_text(json.dumps({'steps': int(state.step), 'seconds': round(time.time() - start, 1)}))
  log = [r for r in plot.read_metrics(run_dir) if 'loss' in r]
  player = player_lib.Player.load(str(run_dir), compute_dtype='float32')
  results = evaluate.evaluate(player.policy, ref_boards, progress=False)
  summary = metrics.summarise([r['metrics'] for r in results])
  entry = {
    'name': name,
    'policy': policy,
    **json.loads(trained.read_text()),
    'records_trained': int(sum(r.get('targets', 0) for r in log)),
    'final_train_loss': log[-1]['loss'],
    'action_accuracy': summary['action_accuracy'],
    'kendall_tau_b': summary['kendall_tau'],
    'test_boards': len(ref_boards),
  }
  if puzzle_set:
    solved = puzzle_eval.evaluate(puzzle_set, player, progress=False)
    entry['puzzles'] = len(solved)
    entry['puzzles_solved'] = sum(r.solved for r in solved)
    entry['puzzle_accuracy'] = puzzle_eval.accuracy(solved)
  done.write_text(json.dumps(entry, indent=2) + '\n')
  print(f'measured {name} [{policy}]: {json.dumps(entry)}', flush=True)
  return entry


def table(rows: list[dict]) -> str:
  head = (
    '| mode | policy | engine core-hours | boards | records | train budget (steps) | action accuracy '
    '| Kendall tau-b | dev puzzles (95% interval) |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |'
  )
  lines = [head]
  for r in rows:
    puzzles = '-'
    if 'puzzles' in r:
      low, high = metrics.wilson(r['puzzles_solved'], r['puzzles'])
      puzzles = (
        f'{100 * r["puzzle_accuracy"]:.2f}% ({r["puzzles_solved"]}/{r["puzzles"]}; {100 * low:.1f}-{100 * high:.1f}%)'
      )
    acc_low, acc_high = metrics.wilson(round(r['action_accuracy'] * r['test_boards']), r['test_boards'])
    lines.append(
      f'| {r["name"]} | {r["policy"]} | {r["engine_core_hours"]:.3f} | {r["boards"]:,} | {r["records"]:,} '
      f'| {r["seconds"]:.0f} s ({r["steps"]:,}) | {r["action_accuracy"]:.3f} ({acc_low:.2f}-{acc_high:.2f}) '
      f'| {r["kendall_tau_b"]:.3f} | {puzzles} |'
    )
  return '\n'.join(lines)


def main(argv=None) -> None:
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('--workdir', required=True, help='annotations, models and results (resumable)')
  p.add_argument('--games', nargs='+', default=GAMES, help='PGN files (default: ../shared/data/games/*.pgn)')
  p.add_argument('--budget_core_hours', type=float, default=0.1, help='engine CPU budget of each mode')
  p.add_argument('--train_seconds', type=float, default=300, help='training wall-clock budget of each model')
  p.add_argument(
    '--reference', default='nodes=1000000', help='limit of the deep reference (one MultiPV search per board)'
  )
  p.add_argument('--reference_boards', type=int, default=200, help='test boards (one per held-out game)')
  p.add_argument('--puzzles', default=None, help='puzzle CSV (e.g. ../shared/data/puzzles/lichess_puzzles_dev.csv)')
  p.add_argument('--processes', type=int, default=2, help='engine processes at once (modes annotated in parallel)')
  p.add_argument('--modes', default=None, help='comma-separated indexes into MODES (default: all)')
  args = p.parse_args(argv)
  workdir = pathlib.Path(args.workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  engine_path = launch.find_stockfish()
  modes = [MODES[int(i)] for i in args.modes.split(',')] if args.modes else list(MODES)
  print(f'machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores', flush=True)

  train_fens, test_fens = split_boards(args.games)
  test_fens = test_fens[: args.reference_boards]
  print(f'{len(train_fens):,} train boards, {len(test_fens)} test boards (held-out games)', flush=True)
  budget_s = args.budget_core_hours * 3600
  jobs = [
    (name, mode, limit, train_fens, budget_s, str(workdir / 'labels' / slug(name)), engine_path)
    for name, mode, limit, _ in modes
  ]
  with multiprocessing.get_context('spawn').Pool(args.processes) as pool:
    annotated = {r['name']: r for r in pool.map(annotate_mode, jobs, chunksize=1)}
  ref = reference_boards(test_fens, args.reference, workdir, engine_path, args.processes)

  from searchless.data import puzzles as puzzles_lib

  puzzle_set = list(puzzles_lib.read_puzzles(args.puzzles)) if args.puzzles else []
  rows = []
  for name, mode, limit, policies in modes:
    for policy in policies:
      a = annotated[name]
      entry = train_and_measure(
        name,
        policy,
        workdir / 'labels' / slug(name),
        workdir / 'models' / f'{slug(name)}-{policy}',
        args.train_seconds,
        ref,
        puzzle_set,
      )
      kind = records.BOARD_VALUE if policy == 'action_value' else policy
      rows.append(
        {
          **entry,
          'engine_core_hours': a['engine_cpu_seconds'] / 3600,
          'boards': a['boards'],
          'records': a['action_values'] if policy == 'action_value' else a['records'][kind],
        }
      )
  (workdir / 'frontier.json').write_text(
    json.dumps(
      {
        'rows': rows,
        'annotation': annotated,
        'budget_core_hours': args.budget_core_hours,
        'train_seconds': args.train_seconds,
        'reference': args.reference,
      },
      indent=2,
    )
    + '\n'
  )
  print(table(rows))
  if puzzle_set:
    best = max(rows, key=lambda r: r['puzzle_accuracy'] / max(r['engine_core_hours'], 1e-9))
    others = [r for r in rows if r is not best]
    separated = all(
      metrics.wilson(r['puzzles_solved'], r['puzzles'])[1] < metrics.wilson(best['puzzles_solved'], best['puzzles'])[0]
      for r in others
    )
    print(
      f'cheapest per point of puzzle accuracy: {best["name"]} [{best["policy"]}] '
      f'({100 * best["puzzle_accuracy"]:.2f}% at {best["engine_core_hours"]:.3f} engine core-hours); '
      + (
        "its 95% interval is above every other mode's"
        if separated
        else "not significant: its 95% interval overlaps another mode's"
      )
    )


if __name__ == '__main__':
  main()
