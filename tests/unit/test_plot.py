"""searchless-plot: curves from metrics.jsonl."""

import json

import pytest

from searchless.training import plot


def test_series_orders_by_step_and_skips_missing_values():
  records = [
    {'step': 20, 'loss': 4.5},
    {'step': 10, 'loss': 4.8},
    {'step': 20, 'eval_loss': 4.7},
    {'step': 30, 'loss': None},
  ]
  assert plot.series(records, 'loss') == ([10, 20], [4.8, 4.5])
  assert plot.series(records, 'eval_loss') == ([20], [4.7])


def test_plot_writes_curves_png(tmp_path):
  lines = [{'step': s, 'loss': 5 - s / 100, 'grad_norm': 1.0, 'examples_per_s': 200.0} for s in (10, 20, 30)]
  lines.append({'step': 30, 'eval_loss': 4.9, 'eval_action_accuracy': 0.1})
  (tmp_path / 'metrics.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in lines))
  out = plot.plot(tmp_path)
  assert out == tmp_path / 'curves.png'
  assert out.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


def test_plot_without_metrics_names_the_workdir(tmp_path):
  with pytest.raises(FileNotFoundError, match=f'no metrics.jsonl in {tmp_path}'):
    plot.plot(tmp_path)


def test_a_short_run_is_drawn_as_points_in_every_panel():
  fig = plot.figure([{'step': 1, 'loss': 5.0, 'grad_norm': 1.0, 'examples_per_s': 200.0}], 'run')
  for ax in fig.axes:
    [line] = ax.get_lines()
    assert list(line.get_xdata()) == [1] and line.get_marker() == '.'  # One point, visible.


def test_a_panel_with_nothing_logged_says_so_and_a_run_with_no_step_is_refused(tmp_path):
  fig = plot.figure([{'step': 1, 'loss': 5.0}], 'run')
  assert [t.get_text() for ax in fig.axes for t in ax.texts] == ['not logged yet', 'not logged yet']
  (tmp_path / 'metrics.jsonl').write_text('')
  with pytest.raises(ValueError, match=f'^{tmp_path}/metrics.jsonl: no step logged yet: too little to plot$'):
    plot.plot(tmp_path)
