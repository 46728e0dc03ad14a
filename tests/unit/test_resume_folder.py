"""The resume folder's bookkeeping (searchless.data.resume): pieces written whole, unreadable ones dropped, and a
rerun refused where its settings or inputs differ from the kept pieces' (the jobs themselves: tests/integration/
test_resume.py)."""

import http.server
import os
import pathlib
import threading

import pytest

from searchless.data import resume


def _keeper(out: pathlib.Path, **changes) -> resume.Keeper:
  fields = {
    'settings': resume.settings(min_elo=2000, test_fraction=0.5),
    'what': 'parsed games and lines',
    'command': ['searchless-import', 'g.pgn'],
    'inputs': {'g.pgn': 'of 10 bytes modified A'},
    **changes,
  }
  return resume.Keeper(str(out), **fields)


def _kept_folder(tmp_path: pathlib.Path) -> pathlib.Path:
  """An output folder holding two pieces (3 and 4 games) of `_keeper()`'s settings."""
  out = tmp_path / 'out'
  out.mkdir()
  _keeper(out).prepare()
  for items in (3, 4):
    writer = resume.PieceWriter(resume.folder(str(out)), 'games', chunk=100)
    for i in range(items):
      writer.add(f'g.pgn:{i}', i)
    writer.commit()
  return out


def test_a_rerun_of_the_same_settings_resumes_and_writes_nothing_that_is_not_whole(tmp_path):
  out = _kept_folder(tmp_path)
  kept = _keeper(out).kept_pieces()
  assert resume.items_held(kept) == 7 and sorted(p.name for p in (out / resume.FOLDER).iterdir()) == sorted(
    [resume.SETTINGS, *(pathlib.Path(p).name for p in kept)]
  )  # No temporary file left.
  assert sorted(item[1:] for piece in kept for item in resume.read_piece(piece)) == sorted(
    [*((f'g.pgn:{i}', i, None) for i in range(3)), *((f'g.pgn:{i}', i, None) for i in range(4))]
  )  # (key, result, engine): no engine made them.
  # Another input, added, or one removed, changes no kept parse.
  assert _keeper(out, inputs={'h.pgn': 'of 5 bytes modified B'}).kept_pieces() == kept


@pytest.mark.parametrize(
  'changes, said',
  [
    ({'settings': resume.settings(min_elo=2100, test_fraction=0.5)}, 'with --min_elo 2000, not 2100'),
    (
      {'settings': {**resume.settings(min_elo=2000, test_fraction=0.5), 'searchless': '9.9'}},
      f'with searchless {resume.settings()["searchless"]}, not 9.9',
    ),
    (
      {'inputs': {'g.pgn': 'of 11 bytes modified C'}},
      'from g.pgn of 10 bytes modified A, not of 11 bytes modified C',
    ),
  ],
)
def test_a_rerun_with_other_settings_or_a_changed_input_is_refused_and_restart_drops_the_pieces(
  tmp_path, changes, said
):
  out = _kept_folder(tmp_path)
  before = sorted((out / resume.FOLDER).iterdir())
  with pytest.raises(resume.KeptWorkDiffers) as refused:
    _keeper(out, **changes).kept_pieces()
  assert str(refused.value) == (
    f'the kept pieces in {out / resume.FOLDER} were made {said}: 7 parsed games and lines would be dropped; '
    'rerun with --restart to start afresh, or with the old settings to resume'
  )
  assert sorted((out / resume.FOLDER).iterdir()) == before  # Refused: nothing dropped.
  restart = _keeper(out, restart=True, **changes)
  assert restart.kept_pieces() == []
  restart.prepare()
  assert resume.pieces(str(out)) == [] and _keeper(out, **changes).kept_pieces() == []


def test_pieces_without_a_record_of_their_settings_are_refused(tmp_path):
  out = _kept_folder(tmp_path)
  (out / resume.FOLDER / resume.SETTINGS).unlink()
  with pytest.raises(resume.KeptWorkDiffers, match='made by an older searchless .no record of their settings.: 7 '):
    _keeper(out).kept_pieces()


def test_an_unreadable_piece_is_said_and_deleted_not_raised(tmp_path):
  out = _kept_folder(tmp_path)
  empty, garbled = map(pathlib.Path, resume.pieces(str(out)))
  empty.write_bytes(b'')
  garbled.write_bytes(garbled.read_bytes()[:-6] + b'\0' * 6)
  assert [item[:2] for item in resume.read_piece(str(empty))] == [('unreadable', str(empty))]
  ((what, path, why),) = resume.read_piece(str(garbled))
  assert (what, path) == ('unreadable', str(garbled)) and why
  assert resume.pieces(str(out)) == []  # Dropped: their items are computed again.
  note = resume.dropped_note(('unreadable', str(empty), 'zero-length'), 'parsed games')
  n = resume.items_held([str(empty)])
  assert note == f'dropped the unreadable piece {empty} (zero-length): its {n} parsed games were computed again'


class _Served(http.server.BaseHTTPRequestHandler):
  etag = '"v1"'

  def do_HEAD(self):
    self.send_response(200)
    self.send_header('Content-Length', '1234')
    self.send_header('ETag', _Served.etag)
    self.end_headers()

  def log_message(self, *args):
    pass


def test_an_http_input_is_known_by_its_size_and_etag(tmp_path):
  server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), _Served)
  threading.Thread(target=server.serve_forever, daemon=True).start()
  try:
    url = f'http://127.0.0.1:{server.server_address[1]}/lichess_db_eval.jsonl.zst'
    assert resume.input_identity(url) == 'of 1,234 bytes, with ETag "v1"'
    _Served.etag = '"v2"'  # Republished under the same URL.
    assert resume.input_identity(url) == 'of 1,234 bytes, with ETag "v2"'
  finally:
    server.shutdown()
    server.server_close()


def test_a_local_input_is_known_by_its_size_and_modification_time(tmp_path):
  path = tmp_path / 'g.pgn'
  path.write_text('1. e4 *\n')
  first = resume.input_identity(str(path))
  assert first.startswith('of 8 bytes modified ') and first.endswith(' UTC')
  path.write_text('1. d4 *\n')  # The same size.
  os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))
  assert resume.input_identity(str(path)) != first
