"""Board packing vs the per-move model: training and play throughput, and what each learns.

    .venv/bin/python benchmarks/packing.py --quick          # throughput only, < 3 minutes on 2 cores
    .venv/bin/python benchmarks/packing.py --data ANNOTATED/chunk_000 ANNOTATED/chunk_001 --budget_s 1200 \\
        --puzzles ../shared/data/puzzles/lichess_puzzles_dev.csv --workdir runs/packing   # + the learning comparison

Side by side, same width / depth / heads (tiny vs tiny_packed,
the same parameters), same real Lichess boards:

* training action-values per second: the jitted update of each (per-move: the
  tiny config's batch of 256 sequences; packed: its batch of 32 boards, every
  real move of a board a target), timed after compilation in 3 interleaved rounds
  (the median round of each);
* play: the time to score every legal move of a board (`Player.analyse`, after
  `warm_up`), median over >= 100 real boards from many games;
* the learning comparison (with ``--data``): both trained for the same wall-clock
  budget (``train.max_seconds``) on the same annotated boards (the action_value
  and board_value records of the train splits of ``--data``), then action
  accuracy and Kendall tau-b on the held-out test boards and accuracy on the
  puzzles.

Ends with ``packed/per-move: train <X>x action-values/s, play <Y>x boards/s``.
"""

import argparse
import json
import os
import pathlib
import platform
import statistics
import sys
import time

import chess
import jax
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import boards as boards_lib  # noqa: E402

from searchless import configs as config_files  # noqa: E402
from searchless.core import records  # noqa: E402
from searchless.core import values  # noqa: E402
from searchless.data import packing as packing_lib  # noqa: E402
from searchless.data import sequences as sequences_lib  # noqa: E402
from searchless.data.boards import from_action_values, to_chessbench  # noqa: E402
from searchless.evaluation import metrics  # noqa: E402
from searchless.model import network  # noqa: E402
from searchless.model.config import ModelConfig  # noqa: E402
from searchless.play import player as player_lib  # noqa: E402
from searchless.play import policy as policy_lib  # noqa: E402
from searchless.play import predictor as predictor_lib  # noqa: E402
from searchless.training import sharding  # noqa: E402
from searchless.training import step as step_lib  # noqa: E402
from searchless.training import train  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONFIGS = {'per-move': 'tiny', 'packed': 'tiny_packed'}


def _labelled_boards(fens: list[str]) -> list:
  """Board records of `fens` with arbitrary labels (a step's cost does not depend on them)."""
  rng = np.random.default_rng(0)
  return [
    from_action_values(fen, [(m.uci(), float(rng.random())) for m in chess.Board(fen).legal_moves]) for fen in fens
  ]


def train_throughput(
  board_records: list, steps: int, configs: dict[str, str | tuple[str, list[str]]] = CONFIGS, rounds: int = 3
) -> dict:
  """Action-values per second of each update on the same boards (`configs`: name -> config, or (config, overrides)).

  All are compiled first, then timed in `rounds` interleaved rounds of `steps` steps each, and each reports its
  median round: a shared machine's drift then moves every config's figure alike, not only one config's."""
  edges, _ = values.uniform_buckets(128)
  runs = {}
  for name, spec in configs.items():
    path, overrides = (spec, []) if isinstance(spec, str) else spec
    config = config_files.load(str(path), ['data.train=unused', 'train.compute_dtype=float32', *overrides])
    fns = step_lib.make_functions(config, sharding.make_mesh(1))
    state = fns.init(jax.random.PRNGKey(0))
    batch = config.data.batch_size
    if packing_lib.packed(config):
      rows = packing_lib.packed_rows(board_records, config.data.max_moves, edges)  # [N, 77 + 2M + 1]
      batches = [rows[i : i + batch] for i in range(0, len(rows) - batch + 1, batch)]
      targets = [int((packing_lib.split_packed(b)[1] >= 0).sum()) for b in batches]
    else:
      raw = [records.encode('action_value', av) for b in board_records for av in to_chessbench(b)['action_value']]
      sequences = sequences_lib.to_sequences('action_value', raw, 128)  # [sum M, 79]
      batches = [sequences[i : i + batch] for i in range(0, len(sequences) - batch + 1, batch)]
      targets = [batch] * len(batches)
    put = [jax.device_put(b, fns.batch_sharding) for b in batches]
    state, metrics = fns.update(state, put[0])  # Compile.
    jax.block_until_ready(metrics)
    runs[name] = {
      'fns': fns,
      'state': state,
      'put': put,
      'batch': batch,
      'seconds': [],
      'done': sum(targets[i % len(put)] for i in range(steps)),  # Action-values in a round.
      'params': network.num_params(state.params),
    }
  for _ in range(rounds):
    for run in runs.values():
      state, start = run['state'], time.perf_counter()
      for i in range(steps):
        state, metrics = run['fns'].update(state, run['put'][i % len(run['put'])])
      jax.block_until_ready(metrics)
      run['seconds'].append(time.perf_counter() - start)
      run['state'] = state
  out = {}
  for name, run in runs.items():
    seconds = statistics.median(run['seconds'])
    out[name] = {
      'batch': run['batch'],
      'steps': steps,
      'rounds': rounds,
      'step_ms': 1000 * seconds / steps,
      'params': run['params'],
      'action_values_per_step': run['done'] / steps,
      'action_values_per_s': run['done'] / seconds,
    }
  return out


def _random_player(config_name: str) -> player_lib.Player:
  config = config_files.load(config_name, ['data.train=unused'])
  model_config = ModelConfig.from_config(config)
  params = network.init_params(model_config)  # Transformers: the same values for both (same shapes, same seed).
  predictor = predictor_lib.predictor_for(model_config, params)
  policy = policy_lib.make_policy('action_value', predictor)
  policy.warm_up()
  return player_lib.Player(policy)


def play_latency(fens: list[str], configs: dict[str, str] = CONFIGS) -> dict:
  out = {}
  for name, config_name in configs.items():
    player = _random_player(config_name)
    seconds = []
    for fen in fens:
      board = chess.Board(fen)
      start = time.perf_counter()
      player.analyse(board)
      seconds.append(time.perf_counter() - start)
    out[name] = {
      'boards': len(fens),
      'median_ms': 1000 * statistics.median(seconds),
      'p95_ms': 1000 * float(np.percentile(seconds, 95)),
      'boards_per_s': 1 / statistics.median(seconds),
    }
  return out


def learning(
  data: list[str],
  budget_s: float,
  workdir: pathlib.Path,
  puzzles: str | None,
  eval_boards: int,
  num_puzzles: int | None = None,
  configs: dict[str, str] = CONFIGS,
  overrides: tuple[str, ...] = (),
) -> dict:
  """Trains each of `configs` for `budget_s` seconds on the train splits of `data`; evaluates them on its test ones."""
  from searchless.core import bags
  from searchless.data import puzzles as puzzles_lib
  from searchless.evaluation import evaluate, puzzles as puzzle_eval

  spec = lambda split, kind: ','.join(bags.find(f'{d}/{split}', kind) for d in data)
  train_av, train_boards = spec('train', 'action_value'), spec('train', 'board_value')
  boards, dropped, _ = evaluate.load_boards(spec('test', 'action_value'), eval_boards)
  out = {
    'data': data,
    'train_action_values': len(bags.reader(train_av)),
    'train_boards': len(bags.reader(train_boards)),
    'budget_s': budget_s,
    'test_boards': len(boards),
    'test_boards_dropped': dropped,
  }
  puzzle_set = list(puzzles_lib.read_puzzles(puzzles, limit=num_puzzles)) if puzzles else []
  for name, path in configs.items():
    run_dir = workdir / name
    train_spec = train_boards if packing_lib.packed(config_files.load(path, ['data.train=unused'])) else train_av
    config = config_files.load(
      str(path),
      [
        *overrides,
        f'data.train={train_spec}',
        f'train.max_seconds={budget_s}',
        'train.num_steps=10000000',
        'train.eval_every=10000000',
        'train.ckpt_every=500',
        'train.log_every=25',
      ],
    )
    if not (run_dir / 'done.json').exists():
      started = time.perf_counter()
      state = train.train(config, run_dir)
      (run_dir / 'done.json').write_text(
        json.dumps({'steps': int(state.step), 'seconds': time.perf_counter() - started})
      )
    train_log = [r for r in map(json.loads, (run_dir / 'metrics.jsonl').read_text().splitlines()) if 'loss' in r]
    done = json.loads((run_dir / 'done.json').read_text())
    player = player_lib.Player.load(str(run_dir), compute_dtype='float32')
    results = evaluate.evaluate(player.policy, boards, progress=False)
    summary = metrics.summarise([r['metrics'] for r in results])
    entry = {
      'steps': done['steps'],
      'train_seconds': round(done['seconds'], 1),
      'action_values_trained': int(sum(r['targets'] for r in train_log)),
      'final_train_loss': train_log[-1]['loss'],
      'action_accuracy': summary['action_accuracy'],
      'kendall_tau_b': summary['kendall_tau'],
      'log_loss_bits': summary['log_loss'],
    }
    if puzzle_set:
      solved = puzzle_eval.evaluate(puzzle_set, player, progress=False)
      entry['puzzle_accuracy'] = puzzle_eval.accuracy(solved)
      entry['puzzles'] = len(solved)
    out[name] = entry
    print(f'{name}: {json.dumps(entry)}', flush=True)
  return out


def parse_args(description: str, argv, budget_s: float, micro_batch: bool = False) -> argparse.Namespace:
  """The command line of this benchmark and of those built on it (benchmarks/graph.py)."""
  p = argparse.ArgumentParser(description=description)
  p.add_argument('--quick', action='store_true', help='throughput only, on fewer boards and steps (< 3 minutes)')
  p.add_argument('--boards', type=int, default=100, help='real boards for the play latency (>= 100 for the record)')
  p.add_argument(
    '--steps', type=int, default=20, help='timed training steps of each, per round (3 interleaved rounds, median)'
  )
  p.add_argument(
    '--data',
    nargs='+',
    default=None,
    help='annotation output dirs with train/ and test/ action_value '
    'and board_value records: runs the learning comparison',
  )
  p.add_argument('--budget_s', type=float, default=budget_s, help='training wall-clock budget of each model')
  p.add_argument('--eval_boards', type=int, default=1000, help='test boards to evaluate each model on')
  p.add_argument('--puzzles', default=None, help='puzzle CSV for the learning comparison')
  p.add_argument('--num_puzzles', type=int, default=None, help='the first N puzzles (default: all)')
  p.add_argument('--workdir', default=None, help='where the training runs go (resumable; needed with --data)')
  if micro_batch:
    p.add_argument(
      '--micro_batch',
      type=int,
      nargs='*',
      default=[2, 4, 8],
      help='also time the board models with these train.micro_batch values',
    )
  args = p.parse_args(argv)
  if args.quick:
    args.steps = min(args.steps, 8)
  if args.data and not args.workdir:
    p.error('--data needs --workdir')
  return args


def main(argv=None) -> None:
  args = parse_args(__doc__.split('\n\n')[0], argv, budget_s=1200)

  print(
    f'machine: {platform.processor() or platform.machine()}, {jax.device_count()} {jax.default_backend()} '
    f'device(s), {len(os.sched_getaffinity(0))} cores'
  )
  fens = boards_lib.spread_boards(boards_lib.LICHESS_999, max(args.boards, 256))
  results = {'train': train_throughput(_labelled_boards(fens[:256]), args.steps)}  # 8 packed batches.
  fens = fens[: args.boards]
  for name, r in results['train'].items():
    print(
      f'train {name:9s}: {r["action_values_per_s"]:8.0f} action-values/s ({r["step_ms"]:.0f} ms/step, '
      f'{r["action_values_per_step"]:.0f} action-values/step)'
    )
  results['play'] = play_latency(fens)
  for name, r in results['play'].items():
    print(
      f'play  {name:9s}: median {r["median_ms"]:.1f} ms per board (p95 {r["p95_ms"]:.1f}) over {r["boards"]} '
      f'boards, {sum(chess.Board(f).legal_moves.count() for f in fens) / len(fens):.1f} legal moves on average'
    )
  if args.data:
    results['learning'] = learning(
      args.data, args.budget_s, pathlib.Path(args.workdir), args.puzzles, args.eval_boards, args.num_puzzles
    )
    for key in ('action_accuracy', 'kendall_tau_b', 'puzzle_accuracy'):
      if key in results['learning']['packed']:
        a, b = results['learning']['packed'][key], results['learning']['per-move'][key]
        print(f'learning: {key} packed {a:.4f} vs per-move {b:.4f} ({a - b:+.4f})')
  x = results['train']['packed']['action_values_per_s'] / results['train']['per-move']['action_values_per_s']
  y = results['play']['per-move']['median_ms'] / results['play']['packed']['median_ms']
  if args.workdir:
    pathlib.Path(args.workdir).mkdir(parents=True, exist_ok=True)
    (pathlib.Path(args.workdir) / 'packing.json').write_text(json.dumps(results, indent=2))
  print(f'packed/per-move: train {x:.1f}x action-values/s, play {y:.1f}x boards/s')


if __name__ == '__main__':
  main()
