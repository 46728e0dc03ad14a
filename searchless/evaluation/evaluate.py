"""Test-set metrics of a checkpoint on action-value records (the paper's Table/Fig. metrics).

    searchless-evaluate --checkpoint WORKDIR --data DIR_OR_BAG [--policy P] [--num_boards N] --out DIR

(`searchless.commands.evaluate`).
`--data` is a bag spec (file, ``name@N``, shards, glob) or a directory holding
``action_value`` records (e.g. the ``test`` split of `searchless-annotate`), or
``board_value`` records (the same boards, one record each).
Every policy is evaluated on action-value records, as in the reference: they
hold Stockfish's value of every legal move. Writes into ``--out``:

* ``metrics.json``: the means (see `searchless.evaluation.metrics`), the dropped-board
  count, the checkpoint, data and policy;
* ``boards.jsonl``: one line per board: FEN, metrics, the policy's move and
  value per move next to Stockfish's (for calibration plots and inspection);
* ``tensorboard/``: the means as TensorBoard scalars at the checkpoint's step
  (`searchless.plumbing.tensorboard`).
"""

import json
import math
import os
import pathlib
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import chess

from searchless.core import artefacts
from searchless.core import bags
from searchless.core import codecs
from searchless.core import records
from searchless.data import boards as boards_lib
from searchless.evaluation import metrics
from searchless.plumbing import errors
from searchless.plumbing import progress_bars
from searchless.plumbing import tensorboard

if TYPE_CHECKING:
  from searchless.play import policy as policy_lib


def read_checked(spec: str, kind: str, chunk: int = 4096) -> list:
  """The records of `kind` in `spec`, decoded by the training loader's decoders.

  A record that does not decode as `kind`, or holds a win probability outside
  [0, 1] (NaN included), is a ValueError naming the spec and the record.
  """
  reader = bags.reader(spec)
  out: list = []
  for start in range(0, len(reader), chunk):
    raw = [reader[i] for i in range(start, min(start + chunk, len(reader)))]
    try:
      if kind == records.BOARD_VALUE:
        boards = codecs.decode_boards(raw)
        codecs.check_boards(boards)
        out += boards
      else:
        columns = codecs.decode_batch(kind, raw)
        assert columns.moves is not None and columns.win_probs is not None
        codecs.check_win_probs(columns.win_probs)
        out += [
          records.ActionValue(f, m, p) for f, m, p in zip(columns.fens, columns.moves, columns.win_probs.tolist())
        ]
    except codecs.BadRecord as e:
      raise errors.BadInput(f'{spec!r}, record {start + e.position}: {e.reason}') from None
  return out


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
        raise errors.MissingInput(
          f'no action_value or board_value records in {data} (looked for'
          ' action_value_data.bag[z], board_value_data.bag[z] and their shards)'
        ) from None
  else:
    spec = data
    try:
      codecs.check_kind(spec, metrics.AV)
    except ValueError as not_action_values:
      try:
        codecs.check_kind(spec, records.BOARD_VALUE)
      except ValueError:
        raise not_action_values from None  # Neither: say what the records are.
      kind = records.BOARD_VALUE
  if kind == records.BOARD_VALUE:  # The same boards as their action-value records (terminal ones have none).
    action_values = [av for b in read_checked(spec, kind) for av in boards_lib.to_chessbench(b)[metrics.AV]]
  else:
    action_values = read_checked(spec, metrics.AV)
  boards, dropped = metrics.group_boards(action_values)
  if num_boards is not None:
    boards = boards[:num_boards]
  return boards, dropped, spec


def evaluate(
  policy: 'policy_lib.Policy', boards: Sequence[metrics.Board], *, batch_boards: int = 32, progress: bool = True
) -> list[dict]:
  """Per-board results: metrics plus the policy's values (moves in reference order)."""
  results = []
  bar = progress_bars.bar(total=len(boards), unit='board', desc='evaluate', disable=not progress, file=sys.stderr)
  for start in range(0, len(boards), batch_boards):
    chunk = boards[start : start + batch_boards]
    for board, analysis in zip(chunk, policy.analyse_many([chess.Board(b.fen) for b in chunk])):
      if tuple(m.uci() for m in analysis.moves) != board.moves:
        raise AssertionError(f'move order mismatch on {board.fen}')
      values = analysis.win_probs if analysis.win_probs is not None else analysis.scores
      results.append(
        {
          'fen': board.fen,
          'metrics': metrics.board_metrics(policy.kind, analysis.log_probs, board.win_probs, value=analysis.value),
          'moves': list(board.moves),
          'stockfish': [round(float(v), 6) for v in board.win_probs],
          'predicted': [round(float(v), 6) for v in values],
          'value': analysis.value,
        }
      )
    bar.update(len(chunk))
  bar.close()
  return results


def table(summary: dict) -> str:
  """The summary's entries, one per line, floats to 4 places."""
  lines = []
  for name, value in summary.items():
    text = (str(value) if isinstance(value, int) else f'{value:.4f}') if isinstance(value, (int, float)) else str(value)
    lines.append(f'  {name:32s} {text}')
  return '\n'.join(lines)


def run(
  checkpoint_path: str,
  data: str,
  out: str | os.PathLike,
  *,
  policy: str | None = None,
  num_boards: int | None = None,
  dtype: str = 'auto',
  batch_boards: int = 32,
  progress: bool = True,
) -> dict:
  """Evaluates a checkpoint on `data`; writes metrics.json and boards.jsonl under `out`."""
  from searchless.model import loading
  from searchless.play import player as player_lib  # JAX only once the inputs are checked.

  boards, dropped, spec = load_boards(data, num_boards)
  if not boards:
    raise errors.BadInput(f'no complete boards in {spec} ({dropped} dropped)')
  player = player_lib.Player.load(checkpoint_path, policy=policy, compute_dtype=dtype)
  started = time.perf_counter()
  results = evaluate(player.policy, boards, batch_boards=batch_boards, progress=progress)
  seconds = time.perf_counter() - started
  summary: dict[str, Any] = metrics.summarise([r['metrics'] for r in results])
  summary.update(
    {
      'dropped_boards': dropped,
      'policy': player.policy.kind,
      'checkpoint': str(checkpoint_path),
      'data': spec,
      'seconds': round(seconds, 2),
    }
  )
  out_dir = pathlib.Path(out)
  out_dir.mkdir(parents=True, exist_ok=True)
  with open(out_dir / 'boards.jsonl', 'w') as f:
    for r in results:
      r['metrics'] = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r['metrics'].items()}
      f.write(json.dumps(r) + '\n')
  artefacts.EvaluationMetrics(**summary).write(out_dir / artefacts.EvaluationMetrics.FILE)  # Typed, versioned.
  with tensorboard.ScalarWriter(out_dir / tensorboard.DIR) as scalars:  # At the checkpoint's step (0 if none).
    step_dir = loading.resolve(checkpoint_path).parent.name
    scalars.write(int(step_dir) if step_dir.isdigit() else 0, summary)
  return summary
