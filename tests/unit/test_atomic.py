"""Atomic file replacement: the whole new file or the old one, with the mode a plain open gives."""

import os
import stat

import pytest

from searchless.core import artefacts
from searchless.plumbing import atomic


def test_a_replaced_file_has_the_umask_mode_and_no_temporary_is_left(tmp_path):
  old = os.umask(0o022)
  try:
    path = tmp_path / 'results.json'
    path.write_text('old')
    atomic.write_text(path, 'new\n')
    assert path.read_text() == 'new\n' and stat.S_IMODE(path.stat().st_mode) == 0o644
    artefacts.EvaluationMetrics(
      boards=1, kendall_tau_boards=0, dropped_boards=0, policy='action_value', checkpoint='c', data='d', seconds=0.0
    ).write(tmp_path / 'metrics.json')
    assert stat.S_IMODE((tmp_path / 'metrics.json').stat().st_mode) == 0o644  # Was 0600 (a temporary file's).
  finally:
    os.umask(old)
  assert sorted(p.name for p in tmp_path.iterdir()) == ['metrics.json', 'results.json']


def test_a_failed_write_keeps_the_old_file_and_removes_its_temporary(tmp_path, monkeypatch):
  path = tmp_path / 'games.pgn'
  path.write_text('old')

  def no_fsync(fd):
    raise OSError(28, 'No space left on device')

  monkeypatch.setattr(os, 'fsync', no_fsync)  # A fault that cannot be provoked for real here.
  with pytest.raises(OSError, match='No space left on device'):
    atomic.write_text(path, 'new')
  assert path.read_text() == 'old' and [p.name for p in tmp_path.iterdir()] == ['games.pgn']


def test_a_snapshot_that_need_not_be_durable_is_replaced_without_syncing(tmp_path, monkeypatch):
  calls = []
  monkeypatch.setattr(os, 'fsync', calls.append)
  atomic.write_text(tmp_path / 'progress.json', '{"boards": 3}', durable=False)
  assert (tmp_path / 'progress.json').read_text() == '{"boards": 3}' and calls == []
  atomic.write_text(tmp_path / 'progress.json', '{"boards": 4}')
  assert len(calls) == 2  # The file, then its folder.
