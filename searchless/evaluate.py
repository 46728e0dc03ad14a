"""Test-set metrics of a checkpoint on action-value records (the paper's Table/Fig. metrics).

    searchless-evaluate --checkpoint WORKDIR --data DIR_OR_BAG [--policy P] [--num_boards N] --out DIR

`--data` is a bag spec (file, ``name@N``, shards, glob) or a directory holding
``action_value`` records (e.g. the ``test`` split of `searchless-annotate`), or
``board_value`` records (the same boards, one record each).
Every policy is evaluated on action-value records, as in the reference: they
hold Stockfish's value of every legal move. Writes into ``--out``:

* ``metrics.json``: the means (see `searchless.metrics`), the dropped-board
  count, the checkpoint, data and policy;
* ``boards.jsonl``: one line per board: FEN, metrics, the policy's move and
  value per move next to Stockfish's (for calibration plots and inspection).
"""

import argparse
import json
import math
import pathlib
import sys
import time
from collections.abc import Sequence

import chess
import tqdm

from searchless import bags
from searchless import boards as boards_lib
from searchless import dataset
from searchless import metrics
from searchless import policy as policy_lib
from searchless import records



def load_boards(data: str, num_boards: int | None = None) -> tuple[list[metrics.Board], int, str]:
  """(complete boards, dropped count, reader spec) of the action-value or board_value records in `data`."""
  kind = metrics.AV
  if pathlib.Path(data).is_dir():
    try:
      spec = bags.find(data, metrics.AV)
    except FileNotFoundError:
      try:
        spec, kind = bags.find(data, records.BOARD_VALUE), records.BOARD_VALUE
      except FileNotFoundError:
        raise FileNotFoundError(f'no action_value or board_value records in {data} (looked for'
                                ' action_value_data.bag[z], board_value_data.bag[z] and their shards)') from None
  else:
    spec = data
    try:
      dataset.check_kind(spec, metrics.AV)
    except ValueError as not_action_values:
      try:
        dataset.check_kind(spec, records.BOARD_VALUE)
      except ValueError:
        raise not_action_values from None  # Neither: say what the records are.
      kind = records.BOARD_VALUE
  if kind == records.BOARD_VALUE:  # The same boards as their action-value records (terminal ones have none).
    action_values = [av for b in bags.read_records(spec, kind) for av in boards_lib.to_chessbench(b)[metrics.AV]]
  else:
    action_values = bags.read_records(spec, metrics.AV)
  boards, dropped = metrics.group_boards(action_values)
  if num_boards is not None:
    boards = boards[:num_boards]
  return boards, dropped, spec


def evaluate(policy, boards: Sequence[metrics.Board], *, batch_boards: int = 32,
             progress: bool = True) -> list[dict]:
  """Per-board results: metrics plus the policy's values (moves in reference order)."""
  results = []
  bar = tqdm.tqdm(total=len(boards), unit='board', desc='evaluate', disable=not progress, file=sys.stderr)
  for start in range(0, len(boards), batch_boards):
    chunk = boards[start:start + batch_boards]
    for board, analysis in zip(chunk, policy.analyse_many([chess.Board(b.fen) for b in chunk])):
      if tuple(m.uci() for m in analysis.moves) != board.moves:
        raise AssertionError(f'move order mismatch on {board.fen}')
      values = analysis.win_probs if analysis.win_probs is not None else analysis.scores
      results.append({
          'fen': board.fen,
          'metrics': metrics.board_metrics(policy.kind, analysis.log_probs, board.win_probs, value=analysis.value),
          'moves': list(board.moves),
          'stockfish': [round(float(v), 6) for v in board.win_probs],
          'predicted': [round(float(v), 6) for v in values],
          'value': analysis.value,
      })
    bar.update(len(chunk))
  bar.close()
  return results


def _table(summary: dict) -> str:
  lines = []
  for name, value in summary.items():
    text = (str(value) if isinstance(value, int) else f'{value:.4f}') if isinstance(value, (int, float)) else str(value)
    lines.append(f'  {name:32s} {text}')
  return '\n'.join(lines)


def run(checkpoint_path: str, data: str, out: str, *, policy: str | None = None, num_boards: int | None = None,
        dtype: str = 'auto', batch_boards: int = 32, progress: bool = True) -> dict:
  """Evaluates a checkpoint on `data`; writes metrics.json and boards.jsonl under `out`."""
  from searchless import player as player_lib  # JAX only once the inputs are checked.

  boards, dropped, spec = load_boards(data, num_boards)
  if not boards:
    raise ValueError(f'no complete boards in {spec} ({dropped} dropped)')
  player = player_lib.Player.load(checkpoint_path, policy=policy, compute_dtype=dtype)
  started = time.perf_counter()
  results = evaluate(player.policy, boards, batch_boards=batch_boards, progress=progress)
  seconds = time.perf_counter() - started
  summary = metrics.summarise([r['metrics'] for r in results])
  summary.update({
      'dropped_boards': dropped,
      'policy': player.policy.kind,
      'checkpoint': str(checkpoint_path),
      'data': spec,
      'seconds': round(seconds, 2),
  })
  out_dir = pathlib.Path(out)
  out_dir.mkdir(parents=True, exist_ok=True)
  with open(out_dir / 'boards.jsonl', 'w') as f:
    for r in results:
      r['metrics'] = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r['metrics'].items()}
      f.write(json.dumps(r) + '\n')
  (out_dir / 'metrics.json').write_text(json.dumps(summary, indent=2) + '\n')
  return summary


def main(argv: Sequence[str] | None = None) -> None:
  parser = argparse.ArgumentParser(prog='searchless-evaluate', description=__doc__.split('\n\n')[0])
  parser.add_argument('--checkpoint', required=True, help='Workdir, checkpoint dir or published-layout model dir.')
  parser.add_argument('--data', required=True, help='Action-value or board_value bag spec, or a directory holding one.')
  parser.add_argument('--out', required=True, help='Output directory (metrics.json, boards.jsonl).')
  parser.add_argument('--policy', choices=policy_lib.POLICIES, help="Default: the checkpoint's.")
  parser.add_argument('--num_boards', type=int, help='Evaluate the first N complete boards.')
  parser.add_argument('--dtype', default='auto', choices=('auto', 'float32', 'bfloat16'))
  parser.add_argument('--batch_boards', type=int, default=32, help='Boards per batched forward pass.')
  args = parser.parse_args(argv)
  try:
    summary = run(args.checkpoint, args.data, args.out, policy=args.policy, num_boards=args.num_boards,
                  dtype=args.dtype, batch_boards=args.batch_boards)
  except (FileNotFoundError, ValueError) as e:
    sys.exit(f'error: {e}')
  print(f'{summary["policy"]} on {summary["boards"]} boards of {summary["data"]}'
        f' ({summary["dropped_boards"]} dropped: moves not exactly the legal moves)')
  print(_table({k: v for k, v in summary.items() if k not in ('policy', 'checkpoint', 'data')}))
  print(f'wrote {pathlib.Path(args.out) / "metrics.json"} and boards.jsonl')


if __name__ == '__main__':
  main()
