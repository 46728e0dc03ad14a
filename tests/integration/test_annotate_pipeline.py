import collections
import hashlib
import json
import os
import pathlib
import re
import signal
import threading
import time

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
import chess
import psutil
import pytest

from searchless.core import bags
from searchless.core import moves
from searchless.data import games as games_lib
from searchless.data import pgn
from searchless.data import splits
from searchless.data import streams
from searchless.pipelines import annotate as driver

FOOLS_MATE = """[Event "fools mate"]
[Site "https://lichess.org/foolsmate"]

1. f3 e5 2. g4 Qh4# 0-1

"""
START = chess.STARTING_FEN
AFTER_E4 = 'rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1'


def test_split_is_a_deterministic_hash_of_the_game():
  keys = [f'https://lichess.org/game{i}' for i in range(2000)]
  assigned = [splits.split_of(k, 0.1) for k in keys]
  assert assigned == [splits.split_of(k, 0.1) for k in keys]
  # Pinned (sha256 of the key): the same games go to test on every machine and run.
  assert assigned.count('test') == 201
  assert [i for i in range(40) if assigned[i] == 'test'] == [17, 25, 28, 29]


def test_extract_boards_dedups_within_splits_and_counts_overlap():
  game = lambda key, *fens: pgn.Game(key, key, fens)
  games = [
    ('train', game('a', START, AFTER_E4)),
    ('train', game('b', START, AFTER_E4)),
    ('test', game('c', START, 'x')),
    ('test', game('d', 'x', 'y')),
  ]
  with TestPipeline() as p:
    boards = p | beam.Create(games) | games_lib.ExtractBoards()
    assert_that(
      boards, equal_to([('train', START), ('train', AFTER_E4), ('test', START), ('test', 'x'), ('test', 'y')])
    )
  with TestPipeline() as p:
    boards = p | beam.Create(games) | games_lib.ExtractBoards(drop_test_overlap=True)
    assert_that(boards, equal_to([('train', START), ('train', AFTER_E4), ('test', 'x'), ('test', 'y')]))


def test_dedup_by_position_ignores_move_clocks():
  later = START.replace(' 0 1', ' 4 3')
  with TestPipeline() as p:
    boards = p | beam.Create([('train', pgn.Game('a', 'a', (START, later)))]) | games_lib.ExtractBoards('position')
    assert_that(boards, equal_to([('train', START)]))


def _boards_of(path):
  return [fen for raw in pgn.iter_raw_games(str(path)) for fen in pgn.parse_game(raw).fens]


@pytest.fixture(scope='module')
def small_run(tmp_path_factory, lichess_999, stockfish):
  """Annotates 3 real games + fool's mate at a shallow limit with the real DirectRunner."""
  tmp = tmp_path_factory.mktemp('run')
  games = tmp / 'games.pgn'
  text = lichess_999.read_text()
  third_game_end = [i for i, line in enumerate(text.splitlines(keepends=True)) if line.startswith('[Event ')][3]
  games.write_text(''.join(text.splitlines(keepends=True)[:third_game_end]) + FOOLS_MATE)
  out = tmp / 'out'
  manifest = driver.run(
    [
      '--input',
      str(games),
      '--out',
      str(out),
      '--limit',
      'depth=2',
      '--test_fraction',
      '0.3',
      '--engine_path',
      stockfish,
      '--direct_num_workers',
      '2',
      '--no_progress',
    ]
  )
  return games, out, manifest


@pytest.mark.engine
def test_outputs_decode_and_cover_every_board_exactly_once(small_run):
  games, out, manifest = small_run
  expected = collections.Counter()
  for raw in pgn.iter_raw_games(str(games)):
    game = pgn.parse_game(raw)
    split = splits.split_of(game.key, 0.3)
    expected.update({(split, fen) for fen in game.fens})
  expected_boards = {split: {fen for (s, fen) in expected if s == split} for split in ('train', 'test')}
  assert all(expected_boards.values())  # Both splits have games at this fraction.
  for split in ('train', 'test'):
    spec = lambda kind: bags.find(str(out / split), kind)
    state = bags.read_records(spec('state_value'), 'state_value')
    action = bags.read_records(spec('action_value'), 'action_value')
    clone = bags.read_records(spec('behavioral_cloning'), 'behavioral_cloning')
    assert sorted(r.fen for r in state) == sorted(expected_boards[split])  # Every board once.
    by_board = collections.defaultdict(dict)
    for r in action:
      assert r.move not in by_board[r.fen]
      by_board[r.fen][r.move] = r.win_prob
      assert 0.0 <= r.win_prob <= 1.0
    for fen in expected_boards[split]:
      legal = {m.uci() for m in chess.Board(fen).legal_moves}
      assert set(by_board.get(fen, {})) == legal, fen
    for r in clone:
      assert by_board[r.fen][r.move] == max(by_board[r.fen].values())
    assert len(clone) == sum(1 for fen in expected_boards[split] if any(chess.Board(fen).legal_moves))
    s = manifest.splits[split]
    assert (s['boards'], s['boards_annotated'], s['boards_failed'], s['action_values']) == (
      len(expected_boards[split]),
      len(expected_boards[split]),
      0,
      len(action),
    )
    assert manifest.outputs[f'{split}/action_value']['records'] == len(action)
    # Board records: the same values, one record per board, the board's own value from its state record.
    board_records = bags.read_records(spec('board_value'), 'board_value')
    assert manifest.outputs[f'{split}/board_value']['records'] == len(board_records) == len(state)
    state_of = dict(state)
    for b in board_records:
      assert dict(zip(b.moves, b.win_probs)) == by_board.get(b.fen, {}) and b.state_value == state_of[b.fen]
      assert list(b.moves) == sorted(b.moves, key=moves.MOVE_TO_ACTION.get)
  assert (out / 'failures.jsonl').read_text() == ''


@pytest.mark.engine
def test_mate_in_one_and_checkmate_in_the_outputs(small_run):
  _, out, _ = small_run
  before_mate = 'rnbqkbnr/pppp1ppp/8/4p3/6P1/5P2/PPPPP2P/RNBQKBNR b KQkq - 0 2'
  mated = 'rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3'
  records = {}
  for split in ('train', 'test'):
    for kind in ('action_value', 'state_value', 'behavioral_cloning'):
      records.setdefault(kind, []).extend(bags.read_records(bags.find(str(out / split), kind), kind))
  assert [r.win_prob for r in records['action_value'] if r.fen == before_mate and r.move == 'd8h4'] == [1.0]
  assert [r.move for r in records['behavioral_cloning'] if r.fen == before_mate] == ['d8h4']
  assert [r.win_prob for r in records['state_value'] if r.fen == mated] == [0.0]
  assert [r for r in records['action_value'] if r.fen == mated] == []
  assert [r for r in records['behavioral_cloning'] if r.fen == mated] == []


@pytest.mark.engine
def test_manifest_records_engine_limits_counts_and_overlap(small_run):
  _, out, manifest = small_run
  on_disk = json.loads((out / 'manifest.json').read_text())
  assert on_disk == manifest.to_dict()
  assert manifest.engine['limit'] == 'depth=2'
  assert manifest.engine['mode'] == 'per_move'
  assert [e['name'].split()[0] for e in manifest.engine['id']] == ['Stockfish']
  # The build, not just the version: the sha256 of the binary that ran.
  binary = os.path.realpath(manifest.engine['path'])
  assert manifest.engine['binary_sha256'] == hashlib.sha256(pathlib.Path(binary).read_bytes()).hexdigest()
  assert {e['binary_sha256'] for e in manifest.engine['id']} == {
    manifest.engine['binary_sha256']
  }  # As each worker saw it.
  assert manifest.games == {**manifest.games, 'read': 4, 'kept': 4, 'skipped': {}}
  assert manifest.splits['train']['terminal_boards'] + manifest.splits['test']['terminal_boards'] == 1
  assert manifest.split['test_boards_in_train'] >= 1  # The start position is in both.
  assert manifest.code['searchless'] == '0.1.0'


def _cpu_seconds(process) -> float:
  try:
    times = process.cpu_times()
  except psutil.NoSuchProcess:  # An engine that ended between the listing and now.
    return 0.0
  return times.user + times.system


@pytest.mark.engine
@pytest.mark.slow
def test_engine_killed_mid_run_loses_and_duplicates_nothing(tmp_path, lichess_999, stockfish):
  games = tmp_path / 'games.pgn'
  lines = lichess_999.read_text().splitlines(keepends=True)
  games.write_text(''.join(lines[:40]))  # Two real games.
  expected = set(_boards_of(games))
  killed = []

  def killer():
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not killed:
      engines = [p for p in psutil.Process().children(recursive=True) if 'stockfish' in p.name()]
      # Mid-run: once it has searched for a second of CPU (the job takes ~10 s: 131 boards, 2k nodes a move), past its
      # "uci" handshake however loaded the machine is (a wall-clock wait killed it during the handshake under load).
      busy = [p for p in engines if _cpu_seconds(p) >= 1.0]
      if busy:
        busy[0].send_signal(signal.SIGKILL)
        killed.append(busy[0].pid)
      time.sleep(0.05)

  thread = threading.Thread(target=killer)
  thread.start()
  manifest = driver.run(
    [
      '--input',
      str(games),
      '--out',
      str(tmp_path / 'out'),
      '--limit',
      'nodes=2000',
      '--test_fraction',
      '0',
      '--engine_path',
      stockfish,
      '--direct_running_mode',
      'in_memory',
      '--direct_num_workers',
      '1',
      '--no_progress',
    ]
  )
  thread.join()
  assert killed, 'the engine was never seen running'
  assert manifest.engine_restarts == 1
  state = bags.read_records(bags.find(str(tmp_path / 'out' / 'train'), 'state_value'), 'state_value')
  assert collections.Counter(r.fen for r in state) == collections.Counter(expected)  # No loss, no duplicate.
  assert manifest.splits['train']['boards_failed'] == 0


def test_a_sample_of_games_splits_as_every_game_does():
  """--sample_games draws the games of smallest hash; the split hashes the same identity, so the draw's hash is
  salted: else every game drawn would be a test game."""
  games = [pgn.Game(f'https://lichess.org/{i:08d}', f'g.pgn:{i}', ()) for i in range(2000)]
  drawn = sorted(games, key=games_lib.sample_rank)[:200]
  test = sum(splits.split_of(g.key, 0.1) == 'test' for g in drawn)
  assert 10 <= test <= 30  # About 10% (20), as among all 2000 games.


@pytest.mark.engine
def test_options_test_input_sampling_filters_shards_and_compression(tmp_path, lichess_999, stockfish):
  lines = lichess_999.read_text().splitlines(keepends=True)
  starts = [i for i, line in enumerate(lines) if line.startswith('[Event ')]
  train = tmp_path / 'train.pgn'
  train.write_text(''.join(lines[: starts[6]]))  # Six real games.
  test = tmp_path / 'test.pgn'
  test.write_text(''.join(lines[starts[6] : starts[8]]))  # Two more.
  kept_by_elo = [g for g in (pgn.parse_game(r) for r in pgn.iter_raw_games(str(train)))]
  elo_ok = [
    g
    for g in (pgn.parse_game(r, pgn.GameFilter(min_elo=1500)) for r in pgn.iter_raw_games(str(train)))
    if isinstance(g, pgn.Game)
  ]
  assert 2 <= len(elo_ok) < len(kept_by_elo)
  out = tmp_path / 'out'
  manifest = driver.run(
    [
      '--input',
      str(train),
      '--test_input',
      str(test),
      '--out',
      str(out),
      '--limit',
      'depth=1',
      '--min_elo',
      '1500',
      '--sample_games',
      '2',
      '--num_shards',
      '2',
      '--compress',
      '--engine_path',
      stockfish,
      '--direct_running_mode',
      'in_memory',
      '--no_progress',
    ]
  )
  assert manifest.games['read'] == 8
  test_elo_ok = [
    g
    for g in (pgn.parse_game(r, pgn.GameFilter(min_elo=1500)) for r in pgn.iter_raw_games(str(test)))
    if isinstance(g, pgn.Game)
  ]
  assert manifest.games['skipped'] == {'filtered_elo': 8 - len(elo_ok) - len(test_elo_ok)}
  assert manifest.split['by'] == 'test_input files'
  train_boards = {r.fen for r in bags.read_records(bags.find(str(out / 'train'), 'state_value'), 'state_value')}
  sampled = sorted(elo_ok, key=games_lib.sample_rank)[:2]  # The two of smallest hash: every run draws them.
  assert train_boards == {f for g in sampled for f in g.fens}
  assert sorted(p.name for p in (out / 'train').iterdir()) == sorted(
    f'{kind}-0000{i}-of-00002_data.bagz'
    for kind in ('action_value', 'behavioral_cloning', 'board_value', 'state_value')
    for i in range(2)
  )
  test_boards = {r.fen for r in bags.read_records(str(out / 'test' / 'state_value@2_data.bagz'), 'state_value')}
  assert test_boards == {f for g in test_elo_ok for f in g.fens}


@pytest.mark.engine
def test_truncated_zst_input_fails_naming_the_file_or_is_counted(tmp_path, lichess_999, stockfish):
  import zstandard

  data = zstandard.ZstdCompressor().compress(lichess_999.read_bytes()[:600_000])  # Several 128 KiB blocks.
  cut = tmp_path / 'cut.pgn.zst'
  cut.write_bytes(data[: len(data) // 2])
  before_error = []
  with pytest.raises(streams.CorruptInputError):
    for raw in pgn.iter_raw_games(str(cut)):
      before_error.append(raw)
  args = [
    '--input',
    str(cut),
    '--limit',
    'depth=1',
    '--engine_path',
    stockfish,
    '--min_elo',
    '4000',
    '--direct_running_mode',
    'in_memory',
    '--no_progress',
  ]
  with pytest.raises(Exception, match=f'{cut}: zstd stream is truncated'):
    driver.run(args + ['--out', str(tmp_path / 'a')])
  assert not (tmp_path / 'a').exists()  # A failed job leaves no empty --out.
  manifest = driver.run(args + ['--out', str(tmp_path / 'b'), '--skip_corrupt_inputs'])
  assert manifest.games['corrupt_input_files'] == 1
  assert manifest.games['read'] == len(before_error) > 10
  assert sum(manifest.games['skipped'].values()) == len(before_error)


def test_missing_input_and_engine_are_clear_errors(tmp_path):
  with pytest.raises(FileNotFoundError, match="--input '.*nothing-\\*.pgn' matches no file"):
    driver.run(
      ['--input', str(tmp_path / 'nothing-*.pgn'), '--out', str(tmp_path / 'out'), '--engine_path', '/bin/true']
    )
  assert not (tmp_path / 'out').exists()  # A failed run leaves no folder behind.
  games = tmp_path / 'g.pgn'
  games.write_text(FOOLS_MATE)
  with pytest.raises(FileNotFoundError, match="engine '/no/such/stockfish' not found"):
    driver.run(['--input', str(games), '--out', str(tmp_path), '--engine_path', '/no/such/stockfish'])


@pytest.mark.engine
def test_board_mode_writes_state_values_and_best_moves_only(tmp_path, stockfish):
  games = tmp_path / 'g.pgn'
  games.write_text(FOOLS_MATE)
  out = tmp_path / 'out'
  manifest = driver.run(
    [
      '--input',
      str(games),
      '--out',
      str(out),
      '--mode',
      'board',
      '--limit',
      'nodes=2000',
      '--test_fraction',
      '0',
      '--engine_path',
      stockfish,
      '--no_progress',
      '--direct_running_mode',
      'in_memory',
    ]
  )
  assert sorted(manifest.outputs) == ['train/behavioral_cloning', 'train/state_value']
  state = {r.fen: r.win_prob for r in bags.read_records(bags.find(str(out / 'train'), 'state_value'), 'state_value')}
  clone = {
    r.fen: r.move for r in bags.read_records(bags.find(str(out / 'train'), 'behavioral_cloning'), 'behavioral_cloning')
  }
  before_mate = 'rnbqkbnr/pppp1ppp/8/4p3/6P1/5P2/PPPPP2P/RNBQKBNR b KQkq - 0 2'
  mated = 'rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3'
  assert len(state) == 5 and len(clone) == 4  # 4 plies + the mated board, which has no move.
  assert (state[before_mate], clone[before_mate], state[mated]) == (1.0, 'd8h4', 0.0)
  assert manifest.splits['train']['terminal_boards'] == 1 and manifest.splits['train']['action_values'] == 0
  with pytest.raises(ValueError, match='--mode board values no moves'):
    driver.run(['--input', str(games), '--out', str(out), '--mode', 'board', '--records', 'board'])


@pytest.mark.engine
@pytest.mark.slow
def test_node_limited_labels_are_identical_in_process_and_on_two_workers(tmp_path, lichess_999, stockfish):
  """Same input and node limit: the same files, byte for byte, whatever the runner mode and worker count."""
  text = lichess_999.read_text()
  second_game = [i for i, line in enumerate(text.splitlines(keepends=True)) if line.startswith('[Event ')][1]
  games = tmp_path / 'one_game.pgn'
  games.write_text(''.join(text.splitlines(keepends=True)[:second_game]))
  outputs = []
  for name, runner in (
    ('in_process', ['--direct_running_mode', 'in_memory']),
    ('two_workers', ['--direct_num_workers', '2']),
  ):
    out = tmp_path / name
    driver.run(
      [
        '--input',
        str(games),
        '--out',
        str(out),
        '--limit',
        'nodes=1000',
        '--test_fraction',
        '0',
        '--engine_path',
        stockfish,
        '--no_progress',
        *runner,
      ]
    )
    outputs.append(
      {str(p.relative_to(out)): p.read_bytes() for p in out.rglob('*') if p.is_file() and p.name != 'manifest.json'}
    )
  assert sorted(outputs[0]) == [
    'failures.jsonl',
    'skipped.jsonl',
    *(f'train/{kind}_data.bag' for kind in ('action_value', 'behavioral_cloning', 'board_value', 'state_value')),
  ]
  assert len(bags.read_records(str(tmp_path / 'in_process' / 'train' / 'state_value_data.bag'), 'state_value')) > 50
  assert outputs[0] == outputs[1]


@pytest.mark.engine
def test_a_folder_with_a_dataset_is_refused_or_replaced_whole(tmp_path, stockfish):
  games = tmp_path / 'g.pgn'
  games.write_text(FOOLS_MATE)
  out = tmp_path / 'out'
  args = [
    '--input',
    str(games),
    '--out',
    str(out),
    '--limit',
    'depth=1',
    '--test_fraction',
    '0',
    '--engine_path',
    stockfish,
    '--no_progress',
    '--direct_running_mode',
    'in_memory',
    '--records',
    'chessbench',
  ]
  driver.run([*args, '--num_shards', '2'])
  first = sorted(str(p.relative_to(out)) for p in out.rglob('*') if p.is_file())
  assert 'train/action_value-00001-of-00002_data.bag' in first
  with pytest.raises(
    FileExistsError,
    match=f'{out} already holds a dataset \\(manifest.json, failures.jsonl, '
    'skipped.jsonl, train/action_value-00000-of-00002_data.bag and 5 more\\): pass --overwrite',
  ):
    driver.run([*args, '--num_shards', '1'])
  assert sorted(str(p.relative_to(out)) for p in out.rglob('*') if p.is_file()) == first  # Untouched.
  driver.run([*args, '--num_shards', '1', '--overwrite', '--records', 'board'])
  assert sorted(str(p.relative_to(out)) for p in out.rglob('*') if p.is_file()) == [
    'failures.jsonl',
    'manifest.json',
    'skipped.jsonl',
    'train/board_value_data.bag',
  ]  # Nothing of the old set.


@pytest.mark.parametrize(
  'flag, value, message',
  [
    ('--max_attempts', '0', '--max_attempts must be >= 1, got 0'),
    ('--max_attempts', '-1', '--max_attempts must be >= 1, got -1'),
    ('--threads', '0', '--threads must be >= 1, got 0'),
    ('--hash_mb', '-1', '--hash_mb must be >= 1, got -1'),
    ('--deadline', '0', '--deadline must be > 0 seconds, got 0.0'),
    ('--test_fraction', '2', r'--test_fraction must be in \[0, 1\), got 2.0'),
    ('--test_fraction', '-0.5', r'--test_fraction must be in \[0, 1\), got -0.5'),
    ('--sample_games', '0', '--sample_games must be >= 1, got 0'),
    ('--max_games', '-1', '--max_games must be >= 1, got -1'),
    ('--num_shards', '-2', '--num_shards must be >= 0, got -2'),
    ('--records_per_shard', '0', '--records_per_shard must be >= 1, got 0'),
  ],
)
def test_out_of_range_options_are_one_line_errors_naming_the_flag(tmp_path, flag, value, message):
  argv = [
    '--input',
    str(tmp_path / 'g.pgn'),
    '--out',
    str(tmp_path / 'out'),
    '--engine_path',
    '/bin/true',
    flag,
    value,
  ]
  with pytest.raises(ValueError, match=f'^{message}$'):
    driver.parse(argv)


def _cli(*args):
  import subprocess
  import sys

  return subprocess.run(
    [sys.executable, '-m', 'searchless.pipelines.annotate', '--no_progress', *args],
    capture_output=True,
    text=True,
    timeout=300,
  )


@pytest.mark.engine
@pytest.mark.slow
def test_bad_inputs_end_with_one_error_line_naming_them(tmp_path, lichess_999, stockfish):
  import zstandard

  cut = tmp_path / 'cut.pgn.zst'
  data = zstandard.ZstdCompressor().compress(lichess_999.read_bytes()[:300_000])
  cut.write_bytes(data[: len(data) // 2])
  empty = tmp_path / 'empty.pgn'
  empty.write_text('')
  cat = tmp_path / 'cat-engine'
  cat.write_text('#!/bin/sh\nexec cat\n')
  cat.chmod(0o755)
  engine = ['--engine_path', stockfish, '--limit', 'depth=1']
  cases = [
    (['--input', str(cut), '--min_elo', '4000', *engine], f'error: {cut}: zstd stream is truncated'),
    (
      ['--input', str(tmp_path / 'missing.pgn'), *engine],
      f"error: --input '{tmp_path / 'missing.pgn'}' matches no file",
    ),
    (['--input', str(tmp_path), *engine], f"error: --input '{tmp_path}' is a directory"),
    (['--input', str(empty), *engine], f'error: no games in {empty}: nothing to annotate'),
    (
      ['--input', str(lichess_999), '--max_games', '1', '--engine_path', str(cat), '--deadline', '1'],
      f'error: \'{cat}\' is not a UCI engine: no "uciok" within 1 s',
    ),
  ]
  readonly = tmp_path / 'readonly'
  readonly.mkdir(mode=0o555)
  cases.append(
    (
      ['--input', str(lichess_999), *engine, '--out', '/proc/out'],
      'error: cannot create /proc/out (--out): No such file or directory',
    )
  )
  if os.geteuid() != 0:  # root may write anywhere else.
    cases.append(
      (
        ['--input', str(lichess_999), *engine, '--out', str(readonly / 'out')],
        f'error: cannot create {readonly / "out"} (--out): Permission denied',
      )
    )
  for i, (args, first_line) in enumerate(cases):
    if '--out' not in args:
      args = [*args, '--out', str(tmp_path / f'out{i}')]
    result = _cli(*args)
    assert result.returncode == 2, (args, result.stderr[-2000:])
    # Exactly one line: Beam's workers print a failed bundle's traceback to their stderr, which goes to a
    # log file that the line names (when there is one) instead of the terminal.
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr[-3000:]
    line = result.stderr.strip()
    assert line.startswith(first_line), line
    assert not os.path.exists(args[args.index('--out') + 1])  # Nothing left behind, not even the folder.
    if log := re.search(r"\(workers' log: (\S+)\)$", line):
      assert 'Traceback' in pathlib.Path(log[1]).read_text()
      pathlib.Path(log[1]).unlink()


@pytest.mark.engine
def test_a_run_that_keeps_no_game_fails_and_leaves_no_dataset(tmp_path, lichess_999, stockfish):
  """An empty input, or one whose every game is skipped, exits 2 with the counts and writes nothing to reuse."""
  empty = tmp_path / 'empty.pgn'
  empty.write_text('')
  chess960 = tmp_path / 'chess960.pgn'
  chess960.write_text(
    '[Event "a"]\n[Variant "Chess960"]\n[FEN "bbqnnrkr/pppppppp/8/8/8/8/PPPPPPPP/BBQNNRKR w KQkq - 0 1"]\n\n'
    '1. e4 e5 *\n\n[Event "b"]\n[Variant "Chess960"]\n\n1. d4 *\n'
  )
  illegal = tmp_path / 'illegal.pgn'  # Two white kings, the side not to move in check, Chess960 untagged, a null move.
  illegal.write_text(
    '[Event "a"]\n[FEN "4k3/8/8/8/8/8/8/K3K3 w - - 0 1"]\n\n1. Ka2 *\n\n'
    '[Event "b"]\n[FEN "4k3/8/8/8/8/8/4Q3/4K3 w - - 0 1"]\n\n1. Qe7+ *\n\n'
    '[Event "c"]\n[FEN "bqnbrkrn/pppppppp/8/8/8/8/PPPPPPPP/BQNBRKRN w GEge - 0 1"]\n\n1. e4 *\n\n'
    '[Event "d"]\n\n1. e4 -- 2. d4 *\n'
  )
  out = tmp_path / 'out'
  engine = [
    '--engine_path',
    stockfish,
    '--limit',
    'depth=1',
    '--records',
    'board',
    '--mode',
    'multipv',
    '--direct_num_workers=1',
    '--out',
    str(out),
  ]
  for path, line in (
    (empty, f'error: no games in {empty}: nothing to annotate'),
    (chess960, f'error: all 2 games in {chess960} were skipped (2 variant): nothing to annotate'),
    (illegal, f'error: all 4 games in {illegal} were skipped (3 illegal_position, 1 null_move): nothing to annotate'),
  ):
    result = _cli('--input', str(path), *engine)
    assert (result.returncode, result.stderr.strip()) == (2, line)
    assert not out.exists()
  good = tmp_path / 'good.pgn'
  good.write_text('[Event "c"]\n\n1. e4 e5 2. Qh5 Nc6 3. Bc4 Nf6 4. Qxf7# 1-0\n')
  result = _cli('--input', str(good), *engine)  # The same folder, no --overwrite: nothing was left to refuse.
  assert result.returncode == 0, result.stderr[-2000:]
  manifest = json.loads((out / 'manifest.json').read_text())
  assert manifest['games']['kept'] == 1 and sum(s['boards'] for s in manifest['splits'].values()) == 8
