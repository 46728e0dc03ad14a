"""searchless-evaluate: parity with the reference evaluator, the CLI, dropped boards."""

import json
import subprocess
import sys

import pytest

from searchless.core import bags
from searchless.evaluation import evaluate

from helpers import tensorboard_scalars

# The reference evaluator (searchless_chess src/metrics_evaluator.py @90ae0e6), run on the compat
# action-value sample with the compat `local` checkpoint (its eval_* means). Its `eval_kendall_tau`
# is the argsort tau; ours is reported as kendall_tau_reference_argsort.
REFERENCE = {
  'action_value': {
    'action_accuracy': 0.05263157894736842,
    'log_loss': 7.672089559621115,
    'kendall_tau_reference_argsort': 0.020637542521600452,
    'entropy': 6.398569109862009,
    'l2_win_prob': 0.08706569842962167,
  },
  'state_value': {
    'action_accuracy': 0.07017543859649122,
    'log_loss': 7.617147519198977,
    'kendall_tau_reference_argsort': 0.034499206355491946,
    'entropy': 6.402468336729246,
    'l2_win_prob': 0.08645257542164736,
    'consistency': 0.0006910258299362383,
  },
}


@pytest.mark.parametrize('policy', sorted(REFERENCE))
def test_metrics_match_the_reference_evaluator(compat, tmp_path, policy):
  summary = evaluate.run(
    str(compat / 'reference_local_checkpoint'),
    str(compat / 'action_value_sample.bag'),
    str(tmp_path),
    policy=policy,
    dtype='float32',
    progress=False,
  )
  assert summary['boards'] == 57 and summary['dropped_boards'] == 0
  for name, value in REFERENCE[policy].items():
    # The argsort tau jumps when float noise (1e-7) swaps two near-equal values: one board in 57.
    tolerance = {'abs': 1e-3} if name == 'kendall_tau_reference_argsort' else {'rel': 1e-5, 'abs': 1e-7}
    assert summary[name] == pytest.approx(value, **tolerance), name
  # tau-b on the values is a different number (the reference's is on argsort permutations).
  assert abs(summary['kendall_tau'] - summary['kendall_tau_reference_argsort']) > 1e-3
  lines = (tmp_path / 'boards.jsonl').read_text().splitlines()
  assert len(lines) == 57
  first = json.loads(lines[0])
  assert len(first['moves']) == len(first['predicted']) == len(first['stockfish'])
  assert json.loads((tmp_path / 'metrics.json').read_text())['policy'] == policy


def test_partial_boards_are_dropped_and_counted(compat, tmp_path, model_checkpoint):
  records = bags.read_records(str(compat / 'action_value_sample.bag'), 'action_value')
  fens = list(dict.fromkeys(r[0] for r in records))
  cut = [r for r in records if not (r[0] == fens[3] and r[1] == records[[x[0] for x in records].index(fens[3])][1])]
  assert len(cut) == len(records) - 1
  bag = tmp_path / 'cut.bag'
  bags.write_records(str(bag), 'action_value', cut)
  summary = evaluate.run(str(model_checkpoint), str(bag), str(tmp_path / 'out'), progress=False)
  assert summary['boards'] == 56 and summary['dropped_boards'] == 1


def _run_cli(checkpoint, data, out, *flags: str) -> subprocess.CompletedProcess:
  """searchless-evaluate of `checkpoint` on `data`, into `out`."""
  return subprocess.run(
    [
      sys.executable,
      '-m',
      'searchless.commands.evaluate',
      '--checkpoint',
      str(checkpoint),
      '--data',
      str(data),
      '--out',
      str(out),
      *flags,
    ],
    capture_output=True,
    text=True,
    timeout=300,
  )


def test_cli_on_a_data_directory(compat, tmp_path, model_checkpoint):
  data = tmp_path / 'test'
  data.mkdir()
  bags.write_records(
    str(data / 'action_value_data.bag'),
    'action_value',
    bags.read_records(str(compat / 'action_value_sample.bag'), 'action_value'),
  )
  result = _run_cli(model_checkpoint, data, tmp_path / 'out', '--num_boards', '10')
  assert result.returncode == 0, result.stderr
  assert 'action_value on 10 boards' in result.stdout
  summary = json.loads((tmp_path / 'out' / 'metrics.json').read_text())
  assert summary['boards'] == 10 and 0.0 <= summary['action_accuracy'] <= 1.0
  scalars = tensorboard_scalars(tmp_path / 'out' / 'tensorboard')  # At the checkpoint's step, 1.
  assert scalars['action_accuracy'] == [(1, round(summary['action_accuracy'], 4))] and scalars['boards'] == [(1, 10.0)]
  assert '\r' not in result.stderr  # The progress bar in a pipe: whole lines.


def test_cli_errors_name_the_input(tmp_path, model_checkpoint):
  result = _run_cli(model_checkpoint, tmp_path, tmp_path / 'out')
  assert result.returncode == 2
  assert (
    result.stderr.strip().splitlines()[-1].startswith(f'error: no action_value or board_value records in {tmp_path}')
  )


@pytest.mark.parametrize(
  'bad, reason',
  [
    (float('nan'), 'win probability nan is not in [0, 1]'),
    (7.0, 'win probability 7.0 is not in [0, 1]'),
    (-1.0, 'win probability -1.0 is not in [0, 1]'),
  ],
)
def test_out_of_range_win_probabilities_are_errors_naming_file_and_record(compat, tmp_path, bad, reason):
  records = bags.read_records(str(compat / 'action_value_sample.bag'), 'action_value')
  records[5] = records[5]._replace(win_prob=bad)
  bag = tmp_path / 'bad.bag'
  bags.write_records(str(bag), 'action_value', records)
  with pytest.raises(ValueError, match=f"^'{bag}', record 5: {reason.replace('[', '.').replace(']', '.')}$"):
    evaluate.load_boards(str(bag))
  boards = [
    b._replace(state_value=bad) if i == 2 else b
    for i, b in enumerate(bags.read_records(str(_board_bag(compat, tmp_path)), 'board_value'))
  ]
  bags.write_records(str(tmp_path / 'bad_boards.bag'), 'board_value', boards)
  with pytest.raises(ValueError, match=f"'{tmp_path / 'bad_boards.bag'}', record 2: win probability"):
    evaluate.load_boards(str(tmp_path / 'bad_boards.bag'))


def _board_bag(compat, tmp_path):
  from searchless.data import boards as boards_lib

  grouped = {}
  for r in bags.read_records(str(compat / 'action_value_sample.bag'), 'action_value'):
    grouped.setdefault(r.fen, []).append((r.move, r.win_prob))
  path = tmp_path / 'boards.bag'
  bags.write_records(str(path), 'board_value', [boards_lib.from_action_values(f, p) for f, p in grouped.items()])
  return path


def test_a_corrupt_record_is_an_error_naming_file_and_record(compat, tmp_path, model_checkpoint):
  import bagz

  raw = list(bags.reader(str(compat / 'action_value_sample.bag')))
  raw[9] = b'\xff\xfe\x00garbage that is no record'
  bag = tmp_path / 'corrupt.bag'
  with bagz.Writer(str(bag)) as writer:
    for data in raw:
      writer.write(data)
  result = _run_cli(model_checkpoint, bag, tmp_path / 'out')
  assert result.returncode == 2
  assert result.stderr.strip().splitlines()[-1].startswith(f"error: '{bag}', record 9: cannot decode as action_value")
