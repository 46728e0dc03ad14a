"""Training: loss falls, resume is exact, meshes and hosts agree."""

import json
import pathlib

import jax
import pytest


from searchless import configs
from searchless.training import train

from helpers import tensorboard_scalars

TINY = 'tiny'
# A very small model and batch so a step takes milliseconds on a CPU.
SMALL = [
  'model.embedding_dim=32',
  'model.num_layers=1',
  'model.num_heads=2',
  'data.batch_size=16',
  'train.log_every=1',
  'train.ckpt_every=3',
  'train.eval_every=1000',
  'train.compute_dtype=float32',
]


def small_config(data, *extra):
  return configs.load(TINY, SMALL + [f'data.train={data}', *extra])


@pytest.fixture(scope='module')
def av_bag(compat):
  return str(compat / 'action_value_sample.bag')


def _losses(workdir):
  return [
    r['loss']
    for r in map(json.loads, (pathlib.Path(workdir) / 'metrics.jsonl').read_text().splitlines())
    if 'loss' in r
  ]


def test_a_micro_batch_that_does_not_divide_the_batch_is_an_error(av_bag):
  from searchless.training import sharding
  from searchless.training import step as step_lib

  with pytest.raises(
    ValueError,
    match='^train.micro_batch=5 must divide data.batch_size=16 and be a multiple of '
    'the 1 devices the batch is split over$',
  ):
    step_lib.make_functions(small_config(av_bag, 'train.micro_batch=5'), sharding.make_mesh(1))


@pytest.mark.parametrize(
  'override, message',
  [
    (
      'optim.cooldown_steps=11',
      'optim.cooldown_steps=11 must be <= train.num_steps=10: the cooldown ends at train.num_steps',
    ),
    ('optim.cooldown_steps=-1', 'optim.cooldown_steps must be >= 0, got -1'),
  ],
)
def test_a_cooldown_longer_than_the_run_is_an_error(override, message):
  with pytest.raises(ValueError, match=f'^{message}$'):
    configs.load(TINY, ['train.num_steps=10', override])


def test_fsdp_rule_shards_the_largest_divisible_dimension():
  from jax.sharding import PartitionSpec as P
  from searchless.training import sharding

  assert sharding._spec((1968, 64), 2) == P('fsdp', None)
  assert sharding._spec((64, 256), 4) == P(None, 'fsdp')
  assert sharding._spec((3,), 2) == P()
  assert sharding._spec((), 2) == P()
  assert sharding._spec((1968, 64), 1) == P()
  with pytest.raises(ValueError, match='fsdp=3 must divide the number of devices'):
    sharding.make_mesh(3, devices=jax.devices() * 2)


def test_periodic_evaluation_reports_loss_and_action_accuracy(tmp_path, av_bag):
  from searchless.core import bags
  from searchless.evaluation import metrics

  config = small_config(
    av_bag, 'train.num_steps=4', 'train.eval_every=2', 'train.eval_records=300', f'data.eval={av_bag}'
  )
  train.train(config, tmp_path)
  evals = [r for r in map(json.loads, (tmp_path / 'metrics.jsonl').read_text().splitlines()) if 'eval_loss' in r]
  assert [r['step'] for r in evals] == [2, 4]
  records = bags.read_records(av_bag, 'action_value')[:300]
  boards, dropped = metrics.group_boards(records)
  assert dropped == 1  # The last board is cut by the 300-record window.
  assert {r['eval_boards'] for r in evals} == {len(boards)} and len(boards) >= 5
  for r in evals:
    assert 4.0 < r['eval_loss'] < 6.0
    assert r['eval_action_accuracy'] * len(boards) == round(r['eval_action_accuracy'] * len(boards))


def test_max_seconds_stops_with_a_checkpoint_and_a_rerun_continues(tmp_path, av_bag):
  config = small_config(av_bag, 'train.num_steps=1000', 'train.max_seconds=0.001', 'train.ckpt_every=1000')
  first = train.train(config, tmp_path)
  assert int(first.step) == 1  # The first step (it compiles) already overruns 1 ms.
  steps = sorted(int(d.name) for d in (tmp_path / 'checkpoints').iterdir() if d.name.isdigit())
  assert steps == [1] and len(_losses(tmp_path)) == 1  # Logged and checkpointed as at the end.
  assert int(train.train(config, tmp_path).step) == 2  # A rerun resumes, with a new budget.


def test_progress_false_draws_no_training_bar(tmp_path, av_bag, capsys):
  config = small_config(av_bag, 'train.num_steps=2')
  train.train(config, tmp_path / 'quiet', progress=False)
  assert 'train:' not in capsys.readouterr().err
  train.train(config, tmp_path / 'shown')
  assert 'train:' in capsys.readouterr().err  # The bar, as lines when stderr is no terminal.


@pytest.mark.parametrize(
  'override, message',
  [
    ('optim.learning_rate=-1', 'optim.learning_rate must be > 0, got -1.0'),
    ('train.num_steps=-5', 'train.num_steps must be >= 1, got -5'),
    ('data.batch_size=0', 'data.batch_size must be >= 1, got 0'),
    ('optim.ema_decay=1.5', 'optim.ema_decay must be <= 1, got 1.5'),
  ],
)
def test_out_of_range_config_values_are_errors_naming_the_field(override, message):
  with pytest.raises(ValueError, match=f'^{message}$'):
    configs.load(TINY, [override])


def test_a_directory_as_data_is_an_error_saying_what_to_pass(tmp_path):
  with pytest.raises(
    IsADirectoryError, match=f"^bag spec '{tmp_path}' is a directory: pass its bags, e.g. '{tmp_path}/action_value\\*'$"
  ):
    train.train(small_config(str(tmp_path)), tmp_path / 'work')
  assert not (tmp_path / 'work').exists()  # A refused run leaves no workdir (not even its lock).


def test_tensorboard_holds_every_metrics_line(tmp_path, av_bag):
  train.train(small_config(av_bag, 'train.num_steps=6', 'train.log_every=2'), tmp_path)
  lines = [json.loads(line) for line in (tmp_path / 'metrics.jsonl').read_text().splitlines()]
  scalars = tensorboard_scalars(tmp_path / 'tensorboard')
  assert scalars['loss'] == [(r['step'], round(r['loss'], 4)) for r in lines] and [s for s, _ in scalars['loss']] == [
    2,
    4,
    6,
  ]
  assert set(scalars) == {k for k in lines[0] if k != 'step'}


def test_a_relative_workdir_is_taken_from_the_current_directory(tmp_path, av_bag, monkeypatch):
  """Orbax refuses relative paths: a relative --workdir used to fail at the first checkpoint, after the training."""
  monkeypatch.chdir(tmp_path)
  state = train.train(small_config(av_bag, 'train.num_steps=2'), 'runs/relative')
  assert int(state.step) == 2 and (tmp_path / 'runs' / 'relative' / 'checkpoints' / '2').is_dir()
  state = train.train(small_config(av_bag, 'train.num_steps=3'), 'runs/relative')  # Resumes from there.
  assert int(state.step) == 3 and sorted(
    p.name for p in (tmp_path / 'runs' / 'relative' / 'checkpoints').iterdir()
  ) == ['2', '3']


def test_an_empty_eval_bag_is_refused_before_the_first_step(tmp_path, av_bag):
  import bagz

  empty = str(tmp_path / 'empty.bag')
  with bagz.Writer(empty):
    pass
  with pytest.raises(ValueError, match=f"^'{empty}' holds no records: nothing to read as action_value records$"):
    train.train(small_config(av_bag, f'data.eval={empty}', 'train.num_steps=2'), tmp_path / 'w')
  assert not (tmp_path / 'w' / 'metrics.jsonl').exists() and list((tmp_path / 'w' / 'checkpoints').iterdir()) == []
  from searchless.evaluation import evaluate

  with pytest.raises(
    ValueError, match=f"^'{empty}' holds no records"
  ):  # searchless-evaluate: one line, not an IndexError.
    evaluate.load_boards(empty)


def test_a_resume_on_other_data_is_refused_unless_asked_to_restart_them(tmp_path, av_bag):
  moved = tmp_path / 'moved' / 'action_value_data.bag'  # The same records elsewhere: another data source.
  moved.parent.mkdir()
  moved.write_bytes(pathlib.Path(av_bag).read_bytes())
  train.train(small_config(av_bag, 'train.num_steps=3'), tmp_path / 'run')
  with pytest.raises(
    ValueError,
    match=r'the checkpoint in .*run was reading other data \(DataSource in checkpoint does '
    r'not match .*pass train.on_new_data=restart',
  ):
    train.train(small_config(str(moved), 'train.num_steps=5'), tmp_path / 'run')
  state = train.train(small_config(str(moved), 'train.num_steps=5', 'train.on_new_data=restart'), tmp_path / 'run')
  assert int(state.step) == 5  # Params, optimiser and step carried on; the new data read from their start.
  with pytest.raises(ValueError, match="train.on_new_data must be one of \\('refuse', 'restart'\\), got 'keep'"):
    train.train(small_config(str(moved), 'train.num_steps=6', 'train.on_new_data=keep'), tmp_path / 'run')
