"""searchless-import: real [%eval] games and an evaluation-database sample to ChessBench records, on Beam."""

import collections
import io
import json
import pathlib
import subprocess
import sys

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
import chess.pgn
import numpy as np
import pytest

from searchless.core import bags
from searchless.core import records
from searchless.data import import_graph
from searchless.data import import_merge
from searchless.data import lichess_evals
from searchless.data import pgn
from searchless.data import streams
from searchless.pipelines import import_labels

EVAL_SAMPLE = pathlib.Path(__file__).parents[1] / 'fixtures' / 'lichess_db_eval_sample.jsonl'
IN_MEMORY = ['--direct_running_mode', 'in_memory']
AFTER_E4 = 'rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1'


@pytest.fixture(scope='module')
def imported(lichess_999, tmp_path_factory):
  out = tmp_path_factory.mktemp('free') / 'out'
  manifest = import_labels.run([str(lichess_999), str(EVAL_SAMPLE), '--out', str(out), *IN_MEMORY])
  return out, manifest


def _read(out, split, kind):
  return list(bags.read_records(str(out / split / f'{kind}_data.bag'), kind))


def test_the_manifest_counts_every_game_line_and_board(imported, lichess_999):
  out, manifest = imported
  assert manifest.games == {
    'read': 999,
    'kept': 96,
    'skipped': {'no_evals': 903},
    'filters': {'min_elo': None, 'max_elo': None, 'speeds': '', 'exclude_bots': False, 'max_games_per_file': None},
  }
  assert manifest.lines == {'read': 31, 'kept': 31, 'skipped': {}, 'max_lines_per_file': None}
  assert manifest.sources == {
    'games': {'depth': {'unknown': 5795}, 'knodes': {'unknown': 5795}},
    'eval_db': {'depth': {'10': 31}, 'knodes': {'10-99': 30, '100-999': 1}},
  }
  assert manifest.splits == {
    'train': {'boards_seen': 5254, 'boards': 5022, 'moves_valued': 5107, 'best_moves': 28},
    'test': {'boards_seen': 572, 'boards': 555, 'moves_valued': 561, 'best_moves': 3},
  }
  for split in ('train', 'test'):
    counts = manifest.splits[split]
    assert len(_read(out, split, 'state_value')) == counts['boards']
    assert len(_read(out, split, 'behavioral_cloning')) == counts['best_moves']
    partial = _read(out, split, records.PARTIAL_BOARD_VALUE)
    assert sum(len(b.moves) for b in partial) == counts['moves_valued']
  skipped = [json.loads(line) for line in (out / 'skipped.jsonl').read_text().splitlines()]
  assert len(skipped) == 903 and {s['reason'] for s in skipped} == {'no_evals'}  # Each with its file and line.
  assert all(s['location'].startswith(f'{lichess_999}:') for s in skipped)


def test_a_database_board_keeps_its_lines_best_first(imported):
  out, _ = imported
  mate = '6k1/5ppp/8/8/8/8/5PPP/3R2K1 w - - 0 1'
  found = {
    split: [r for r in _read(out, split, records.PARTIAL_BOARD_VALUE) if r.fen == mate] for split in ('train', 'test')
  }
  [board] = found['train'] + found['test']
  split = 'train' if found['train'] else 'test'
  assert list(board.moves) == ['d1d8', 'g2g3', 'd1e1'] and board.win_probs[0] == 1.0 and board.state_value == 1.0
  assert (mate, 'd1d8') in [tuple(r) for r in _read(out, split, 'behavioral_cloning')]


def test_a_board_met_in_many_games_holds_every_scored_reply(imported, lichess_999):
  """After 1. e4: one record per split (games are split, as in annotation), together holding each reply played in
  an evaluated game whose next board is scored."""
  out, _ = imported
  replies = collections.defaultdict(list)
  with open(lichess_999) as f:
    while (game := chess.pgn.read_game(f)) is not None:
      nodes = list(game.mainline())
      if len(nodes) > 1 and nodes[0].board().fen() == AFTER_E4 and nodes[0].eval() is not None and nodes[1].eval():
        replies[nodes[1].move.uci()].append(nodes[1].eval().pov(chess.BLACK))
  found = {s: [r for r in _read(out, s, records.PARTIAL_BOARD_VALUE) if r.fen == AFTER_E4] for s in ('train', 'test')}
  assert [len(found['train']), len(found['test'])] == [1, 1]
  assert sorted({m for boards in found.values() for b in boards for m in b.moves}) == sorted(replies)
  assert len(found['train'][0].moves) >= 3


def test_merge_keeps_the_deepest_source_per_field():
  fen = '8/8/8/8/8/8/8/K1k5 w - - 0 1'
  game = lichess_evals.Labelled(fen, 0.5, ('a1a2',), (0.4,), None, None, None, 'games')
  shallow = lichess_evals.Labelled(fen, 0.6, ('a1b1', 'a1a2'), (0.6, 0.3), 'a1b1', 10, 5, 'eval_db')
  deep = lichess_evals.Labelled(fen, 0.7, ('a1b2',), (0.7,), 'a1b2', 30, 900, 'eval_db')
  with TestPipeline() as p:
    merged = (
      p
      | beam.Create([game, shallow, deep])
      | beam.Map(lambda b: ('k', b))
      | beam.CombinePerKey(import_merge.MergeBoards())
      | beam.Values()
      | beam.Map(lambda b: (b.state_value, b.best_move, b.moves, b.win_probs, b.depth))
    )
    assert_that(merged, equal_to([(0.7, 'a1b2', ('a1b2', 'a1b1', 'a1a2'), (0.7, 0.6, 0.3), 30)]))


def test_bad_lines_are_counted_and_logged_with_their_line(tmp_path):
  db = tmp_path / 'evals.jsonl'
  good = EVAL_SAMPLE.read_text().splitlines()[:2]
  db.write_text(
    '\n'.join(
      [
        good[0],
        '{"fen": "8/8/8/8/8/8/8/8 w - -", "evals": [{"pvs": [{"cp": 1, "line": "a1a2"}]}]}',
        '',
        'not json',
        good[1],
      ]
    )
    + '\n'
  )
  manifest = import_labels.run([str(db), '--out', str(tmp_path / 'out'), '--test_fraction', '0', *IN_MEMORY])
  assert manifest.lines['skipped'] == {'bad_json': 1, 'illegal_fen': 1} and manifest.lines['kept'] == 2
  skips = sorted(json.loads(line)['location'] for line in (tmp_path / 'out' / 'skipped.jsonl').read_text().splitlines())
  assert skips == [f'{db}:2', f'{db}:4']
  assert manifest.splits == {'train': {'boards_seen': 2, 'boards': 2, 'moves_valued': 6, 'best_moves': 2}}


def test_inputs_given_with_input_as_annotate_takes_them_import_the_same(imported, tmp_path, lichess_999):
  positional_out, positional = imported  # The same inputs, given as positional arguments.
  # A flag of the command's and a Beam flag, each with a value: neither value is taken for an input.
  common = ['--test_fraction', str(positional.split['test_fraction']), *IN_MEMORY]
  flagged = import_labels.run(
    ['--input', str(lichess_999), f'--input={EVAL_SAMPLE}', '--out', str(tmp_path / 'b'), *common]
  )
  assert flagged.inputs == positional.inputs and flagged.splits == positional.splits
  assert flagged.splits['train']['boards'] > 0 and flagged.splits['test']['boards'] > 0
  for kind in ('state_value', 'behavioral_cloning', 'partial_board_value'):
    for split in ('train', 'test'):
      name = f'{split}/{kind}_data.bag'
      assert (tmp_path / 'b' / name).read_bytes() == (positional_out / name).read_bytes()


def test_no_evaluations_and_an_existing_dataset_are_one_line_errors(tmp_path, lichess_999):
  plain = tmp_path / 'plain.pgn'
  plain.write_text('[Result "1-0"]\n\n1. e4 e5 2. Qh5 Nc6 3. Bc4 Nf6 4. Qxf7# 1-0\n')
  cmd = [sys.executable, '-m', 'searchless.pipelines.import_labels']
  result = subprocess.run([*cmd, str(plain), '--out', str(tmp_path / 'a')], capture_output=True, text=True)
  assert result.returncode == 2 and result.stderr == (
    f'error: no evaluations in {plain}: no game with [%eval] comments and no usable database line '
    '(1 games_skipped/no_evals)\n'
  )
  assert not (tmp_path / 'a').exists()
  # A dataset in b (in one process: the default runner's worker processes run in test_resume.py).
  done = subprocess.run(
    [*cmd, str(EVAL_SAMPLE), '--out', str(tmp_path / 'b'), *IN_MEMORY], capture_output=True, text=True
  )
  assert done.returncode == 0 and 'database lines: 31 read, 31 kept' in done.stdout
  again = subprocess.run([*cmd, str(EVAL_SAMPLE), '--out', str(tmp_path / 'b')], capture_output=True, text=True)
  assert again.returncode == 2 and 'already holds a dataset (manifest.json, skipped.jsonl' in again.stderr
  nothing = subprocess.run(
    [*cmd, str(tmp_path / 'none-*.jsonl'), '--out', str(tmp_path / 'c')], capture_output=True, text=True
  )
  assert nothing.returncode == 2 and nothing.stderr == f"error: input '{tmp_path / 'none-*.jsonl'}' matches no file\n"
  assert not (tmp_path / 'c').exists()  # A failed run leaves no folder behind.
  with pytest.raises(ValueError, match="--records 'state_value,moves': expected a comma-separated subset of"):
    import_graph.ImportOptions(input=('x',), output_dir='y', records='state_value,moves')


def test_games_without_evals_parse_as_annotation_parses_them(lichess_999):
  """The same games kept and skipped as annotation: with_evals only adds fields."""
  for raw in list(pgn.iter_raw_games(str(lichess_999)))[:50]:
    plain, rich = pgn.parse_game(raw), pgn.parse_game(raw, with_evals=True)
    assert (plain.key, plain.fens) == (rich.key, rich.fens)
    assert len(rich.moves) == len(rich.fens) - 1 and len(rich.evals) == len(rich.fens)
    node_evals = [None] + [
      n.comment and (pgn.chess.pgn.EVAL_REGEX.search(n.comment) is not None) or None
      for n in chess.pgn.read_game(io.StringIO(raw.text)).mainline()
    ]
    assert [e is not None for e in rich.evals] == [bool(e) for e in node_evals]


def test_a_graph_model_trains_on_imported_partial_boards(imported, tmp_path):
  from searchless import configs
  from searchless.training import train

  out, _ = imported
  config = configs.load(
    'graph_tiny',
    [
      'model.embedding_dim=16',
      'model.num_layers=1',
      'model.num_heads=2',
      'model.graph_edge_dim=8',
      'data.batch_size=8',
      'train.num_steps=2',
      'train.log_every=1',
      'train.ckpt_every=2',
      'train.eval_every=1000',
      f'data.train={out / "train" / "partial_board_value_data.bag"}',
    ],
  )
  state = train.train(config, tmp_path)
  lines = [json.loads(line) for line in (tmp_path / 'metrics.jsonl').read_text().splitlines() if 'loss' in line]
  assert int(state.step) == 2 and all(0 < r['targets'] < 8 * 3 for r in lines)  # About one valued move per board.


def test_a_cut_compressed_database_fails_naming_the_file_or_is_counted(tmp_path):
  import zstandard

  sample = EVAL_SAMPLE.read_text().splitlines()
  # 3,000 lines, each with a random field (as the real database's lines differ): several zstd blocks.
  rng = np.random.default_rng(0)
  lines = ''.join(
    json.dumps({**json.loads(sample[i % len(sample)]), 'id': rng.bytes(24).hex()}) + '\n' for i in range(3000)
  )
  data = zstandard.ZstdCompressor().compress(lines.encode())
  cut = tmp_path / 'evals.jsonl.zst'
  cut.write_bytes(data[: len(data) // 2])
  readable = sum(1 for _ in _lines_before_error(cut))
  cmd = [sys.executable, '-m', 'searchless.pipelines.import_labels', str(cut), '--direct_running_mode', 'in_memory']
  failed = subprocess.run([*cmd, '--out', str(tmp_path / 'a')], capture_output=True, text=True)
  assert (
    failed.returncode == 2
    and failed.stderr.strip() == f'error: {cut}: zstd stream is truncated (the file ends inside a frame)'
  )
  assert not (tmp_path / 'a').exists()  # A failed import leaves no empty --out.
  manifest = import_labels.run([str(cut), '--out', str(tmp_path / 'b'), '--skip_corrupt_inputs', *IN_MEMORY])
  assert manifest.corrupt_input_files == 1 and manifest.lines['read'] == readable > 100


def _lines_before_error(path):
  try:
    yield from (line for line in streams.read_lines(str(path)) if line.strip())
  except streams.CorruptInputError:
    return


def test_an_https_input_is_streamed_and_a_dropped_connection_resumed(tmp_path):
  """An input URL is read as a stream (nothing stored first); a connection that drops mid-file resumes with a range
  request at the byte reached, and the records are those of the same file read locally."""
  from http_fixture import FileServer

  local = ['--test_fraction', '0.5', *IN_MEMORY]
  import_labels.run([str(EVAL_SAMPLE), '--out', str(tmp_path / 'local'), *local])
  with FileServer(EVAL_SAMPLE.parent, drop_after=5000) as server:
    url = f'{server.url}/{EVAL_SAMPLE.name}'
    manifest = import_labels.run([url, '--out', str(tmp_path / 'url'), *local])
  assert server.gets(f'/{EVAL_SAMPLE.name}') == [None, 'bytes=5000-']
  assert manifest.lines['kept'] == len(EVAL_SAMPLE.read_text().splitlines())
  for split in ('train', 'test'):
    for kind in (records.PARTIAL_BOARD_VALUE, 'state_value', 'behavioral_cloning'):
      assert _read(tmp_path / 'url', split, kind) == _read(tmp_path / 'local', split, kind)


def test_no_input_is_one_line_naming_the_flag(tmp_path, capsys):
  """Without an input (neither --input nor the positional form) the command stops in one line, writing nothing."""
  with pytest.raises(SystemExit) as stopped:
    import_labels.main(['--out', str(tmp_path / 'out')])
  assert (stopped.value.code, capsys.readouterr().err) == (
    2,
    'error: no input: name the game dumps or evaluation databases with --input\n',
  )
  assert not (tmp_path / 'out').exists()
