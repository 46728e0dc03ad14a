r"""Annotate Lichess PGN games with Stockfish into ChessBench bag files.

    python -m pipelines.annotate --input 'games/*.pgn.zst' --output_dir out \
        --limit time=0.05

writes, per split (train, test), ChessBench-named record sets
``out/<split>/<kind>_data.bag`` (or shards ``<kind>-SSSSS-of-NNNNN_data.bag``)
for kind in action_value, state_value, behavioral_cloning (the ChessBench
datasets) and board_value (one record per board: every legal move's value and
the board's own; ``--records`` picks the sets), plus
``out/manifest.json``, ``out/failures.jsonl`` (boards the engine could not
annotate) and ``out/skipped.jsonl`` (games not used, with file:line and reason).

Runs on the DirectRunner with one worker process per core by default. Any
other Beam runner works with the usual options (``--runner DataflowRunner
--project … --region … --temp_location gs://…``); the engine binary must then
exist on the workers at ``--engine_path`` (see the README: a custom container
with ``apt-get install stockfish``, or ``--setup_file`` that installs it).
"""

import argparse
import json
import logging
import os
import shutil
import sys
import time

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, WorkerOptions, StandardOptions
from bagz.beam import bagzio

from searchless import annotate
from searchless import bags
from searchless import engine as engine_lib
from searchless import manifest as manifest_lib
from searchless import pgn
from searchless import progress as progress_lib
from searchless import records


def _parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
  io = p.add_argument_group('input and output')
  io.add_argument('--input', action='append', required=True, help='PGN file or glob (.pgn, .pgn.zst, .pgn.bz2, .pgn.gz); repeat or comma-separate for several')
  io.add_argument('--test_input', action='append', default=[], help='PGN files whose games all go to the test split (as the paper: another month); disables --test_fraction')
  io.add_argument('--output_dir', required=True, help='where the splits, manifest and failures go (local path, gs://, s3://)')
  io.add_argument('--num_shards', type=int, default=1, help='shards per record set: 1 = one <kind>_data.bag, 0 = runner decides')
  io.add_argument('--records', default=None, help='record sets to write: chessbench (action_value, state_value, behavioral_cloning: one record per move / board) and/or board (board_value: one record per board with every move\'s value); default chessbench,board (chessbench with --mode board)')
  io.add_argument('--compress', action='store_true', help='write zstd-compressed .bagz instead of .bag')
  io.add_argument('--skip_corrupt_inputs', action='store_true', help='count a truncated/corrupt compressed input and keep its games read so far, instead of failing')
  games = p.add_argument_group('games')
  games.add_argument('--max_games', type=int, default=None, help='read at most this many games from each input file (its first N)')
  games.add_argument('--sample_games', type=int, default=None, help='keep a uniform random sample of this many games (Beam Sample.FixedSizeGlobally, as the paper)')
  games.add_argument('--min_elo', type=int, default=None, help='keep games where both players are rated at least this')
  games.add_argument('--max_elo', type=int, default=None, help='keep games where both players are rated at most this')
  games.add_argument('--speeds', default='', help='comma-separated Lichess speeds to keep (ultrabullet,bullet,blitz,rapid,classical,correspondence); empty keeps all')
  games.add_argument('--exclude_bots', action='store_true', help='drop games played by BOT accounts')
  boards = p.add_argument_group('boards')
  boards.add_argument('--test_fraction', type=float, default=0.1, help='fraction of games (by a hash of the game) in the test split')
  boards.add_argument('--dedup_by', choices=('fen', 'position'), default='fen', help="de-duplicate boards by the whole FEN or by the position without move clocks")
  boards.add_argument('--drop_test_overlap', action='store_true', help='drop test boards that also occur in train (the paper kept them)')
  eng = p.add_argument_group('engine')
  eng.add_argument('--engine_path', default=None, help='UCI engine binary on the workers (default: $SEARCHLESS_STOCKFISH, stockfish on PATH, /usr/games/stockfish)')
  eng.add_argument('--limit', default='time=0.05', help='per search: time=SECONDS, depth=N or nodes=N (paper: time=0.05 per move)')
  eng.add_argument('--mode', choices=engine_lib.MODES, default='per_move', help='per_move: one search per legal move (paper); multipv: one MultiPV search per board; board: one search per board, its value and best move only (state_value and behavioral_cloning records)')
  eng.add_argument('--state_value', choices=engine_lib.STATE_VALUE_SOURCES, default='search', help="board value from its own search, or the best move's value")
  eng.add_argument('--threads', type=int, default=1, help='UCI Threads per engine process (one engine per worker)')
  eng.add_argument('--hash_mb', type=int, default=16, help='UCI Hash in MiB per engine process')
  eng.add_argument('--deadline', type=float, default=30.0, help='seconds a search may overrun its limit before the engine is restarted')
  eng.add_argument('--max_attempts', type=int, default=3, help='tries per board before it goes to failures.jsonl')
  p.add_argument('--no_progress', action='store_true', help='no progress line')
  return p


def _split_list(values: list[str]) -> list[str]:
  return [part for value in values for part in value.split(',') if part]


def _is_local_direct(options: PipelineOptions) -> bool:
  runner = options.view_as(StandardOptions).runner
  return runner in (None, 'DirectRunner', 'direct', 'FnApiRunner', 'BundleBasedDirectRunner')


def build(pipeline: beam.Pipeline, args, engine_config: engine_lib.EngineConfig, progress_dir: str | None):
  """Adds the annotation job to `pipeline`; returns the split names it writes."""
  game_filter = pgn.GameFilter(
      min_elo=args.min_elo, max_elo=args.max_elo,
      speeds=tuple(s for s in args.speeds.split(',') if s), exclude_bots=args.exclude_bots)
  inputs = {'train': pgn.match_files(_split_list(args.input))}
  if args.test_input:
    inputs['test'] = pgn.match_files(_split_list(args.test_input), '--test_input')
  test_fraction = 0.0 if args.test_input else args.test_fraction
  splits = ['train'] + (['test'] if args.test_input or test_fraction > 0 else [])

  games, skipped = [], []
  for source, paths in inputs.items():
    parsed = (
        pipeline
        | f'Files[{source}]' >> beam.Create(paths)
        | f'ReadGames[{source}]' >> beam.ParDo(annotate.ReadGames(args.max_games, args.skip_corrupt_inputs))
        | f'Distribute[{source}]' >> beam.Reshuffle()
        | f'ParseGames[{source}]' >> beam.ParDo(annotate.ParseGames(game_filter)).with_outputs(annotate.ParseGames.SKIPPED, main='games'))
    kept = parsed.games
    if args.sample_games:
      kept = (kept | f'Sample[{source}]' >> beam.combiners.Sample.FixedSizeGlobally(args.sample_games)
              | f'Unpack[{source}]' >> beam.FlatMap(lambda sample: sample))
    if source == 'test':
      kept = kept | 'AllTest' >> beam.Map(lambda game: ('test', game))
    else:
      kept = kept | 'SplitGames' >> beam.Map(lambda game, f: (annotate.split_of(game.key, f), game), test_fraction)
    games.append(kept)
    skipped.append(parsed[annotate.ParseGames.SKIPPED])

  boards = (
      games | 'AllGames' >> beam.Flatten()
      | 'ExtractBoards' >> annotate.ExtractBoards(args.dedup_by, args.drop_test_overlap)
      | 'Distribute[boards]' >> beam.Reshuffle())
  total = boards | 'CountBoards' >> beam.combiners.Count.Globally()
  annotated = boards | 'AnnotateBoards' >> beam.ParDo(
      annotate.AnnotateBoards(engine_config, progress_dir),
      total_boards=beam.pvalue.AsSingleton(total),
  ).with_outputs(annotate.AnnotateBoards.FAILURES, annotate.AnnotateBoards.ENGINES, main='annotations')

  out = args.output_dir
  for split in splits:
    of_split = annotated.annotations | f'Select[{split}]' >> beam.Filter(lambda a, s: a[0] == s, split) | f'Values[{split}]' >> beam.Values()
    for kind in annotate.record_kinds(args.records, args.mode):
      (of_split
       | f'{kind}[{split}]' >> beam.FlatMap(annotate.RECORDS_OF[kind])
       | f'Write[{split}/{kind}]' >> bagzio.WriteToBagz(
           bags.sink_path(FileSystems.join(out, split), kind, args.num_shards, args.compress),
           coder=records.CODERS[kind]))
  (annotated[annotate.AnnotateBoards.FAILURES]
   | 'FailuresToJson' >> beam.Map(lambda f: json.dumps(f, sort_keys=True))
   | 'WriteFailures' >> beam.io.WriteToText(FileSystems.join(out, 'failures'), file_name_suffix='.jsonl', shard_name_template=''))
  (skipped | 'AllSkipped' >> beam.Flatten()
   | 'SkippedToJson' >> beam.Map(lambda s: json.dumps({'reason': s.reason, 'location': s.location, 'detail': s.detail}))
   | 'WriteSkipped' >> beam.io.WriteToText(FileSystems.join(out, 'skipped'), file_name_suffix='.jsonl', shard_name_template=''))
  (annotated[annotate.AnnotateBoards.ENGINES]
   | 'DistinctEngines' >> beam.Distinct()
   | 'WriteEngines' >> beam.io.WriteToText(FileSystems.join(out, '_engines'), file_name_suffix='.jsonl', shard_name_template=''))
  return splits, inputs, test_fraction


def _outputs(out: str, splits: list[str]) -> dict:
  found = {}
  for split in splits:
    for kind in records.ALL_KINDS:
      try:
        spec = bags.find(FileSystems.join(out, split), kind)
      except FileNotFoundError:
        continue
      found[f'{split}/{kind}'] = {'files': spec.split(','), 'records': len(bags.reader(spec))}
  return found


def _read_lines(path: str) -> list[str]:
  if not FileSystems.exists(path):
    return []
  with FileSystems.open(path) as f:
    return [line for line in f.read().decode('utf-8').splitlines() if line]


def run(argv=None) -> dict:
  """Runs the job; returns the manifest (also written to OUTPUT_DIR/manifest.json)."""
  args, beam_args = _parser().parse_known_args(argv)
  if args.records is None:
    args.records = 'chessbench' if args.mode == 'board' else 'chessbench,board'
  annotate.record_kinds(args.records, args.mode)  # A bad --records fails before anything runs.
  engine_path = args.engine_path or engine_lib.find_stockfish()
  if engine_path is None:
    raise SystemExit('no Stockfish found: install it (Debian: apt-get install stockfish) or pass --engine_path')
  engine_config = engine_lib.EngineConfig(
      path=engine_path, limit=engine_lib.SearchLimit.parse(args.limit), mode=args.mode,
      threads=args.threads, hash_mb=args.hash_mb, state_value=args.state_value,
      deadline=args.deadline, max_attempts=args.max_attempts)
  options = PipelineOptions(beam_args)
  local = _is_local_direct(options)
  if local:
    direct = options.view_as(DirectOptions)
    if '--direct_running_mode' not in ' '.join(beam_args):
      direct.direct_running_mode = 'multi_processing'
    if not direct.direct_num_workers:
      direct.direct_num_workers = os.cpu_count() or 1
    if '--default_sdk_harness_log_level' not in ' '.join(beam_args):
      options.view_as(WorkerOptions).default_sdk_harness_log_level = 'WARNING'
    if not os.access(engine_path, os.X_OK):
      raise SystemExit(f'engine {engine_path!r} not found or not executable: install Stockfish (Debian: apt-get install stockfish) or pass --engine_path')
    # Beam's local job service relays the workers' start-up warnings; they are noise here.
    logging.getLogger('apache_beam.runners.portability.local_job_service').setLevel(logging.ERROR)
  progress_dir = annotate.new_progress_dir() if local and not args.no_progress else None
  progress = progress_lib.ProgressThread(progress_dir) if progress_dir else None

  start = time.time()
  pipeline = beam.Pipeline(options=options)
  splits, inputs, test_fraction = build(pipeline, args, engine_config, progress_dir)
  if progress:
    progress.start()
  try:
    result = pipeline.run()
    result.wait_until_finish()
  finally:
    if progress:
      progress.stop()
      shutil.rmtree(progress_dir, ignore_errors=True)
  wall = time.time() - start

  counts = manifest_lib.counters(result, annotate.NAMESPACE)
  engines_path = FileSystems.join(args.output_dir, '_engines.jsonl')
  engine_ids = [json.loads(line) for line in _read_lines(engines_path)]
  if FileSystems.exists(engines_path):
    FileSystems.delete([engines_path])
  per_split = {}
  for split in splits:
    per_split[split] = {name: counts.get(f'{name}/{split}', 0) for name in (
        'boards_seen', 'boards', 'boards_annotated', 'boards_failed', 'terminal_boards', 'action_values')}
  outputs = _outputs(args.output_dir, splits)
  test_boards = per_split.get('test', {}).get('boards', 0) + counts.get('test_boards_dropped', 0)
  overlap = counts.get('test_boards_in_train', 0)
  manifest = {
      'format': 'searchless-annotate/1',
      'code': manifest_lib.code_version(),
      'command': manifest_lib.command_line() if argv is None else ['pipelines.annotate', *argv],
      'inputs': inputs,
      'output_dir': args.output_dir,
      'engine': {**engine_config.describe(), 'id': engine_ids},
      'games': {
          'read': counts.get('games_read', 0),
          'kept': counts.get('games_kept', 0),
          'skipped': {reason: counts.get(f'games_skipped/{reason}', 0) for reason in pgn.SKIP_REASONS if counts.get(f'games_skipped/{reason}')},
          'corrupt_input_files': counts.get('corrupt_input_files', 0),
          'filters': {'min_elo': args.min_elo, 'max_elo': args.max_elo, 'speeds': args.speeds, 'exclude_bots': args.exclude_bots,
                      'max_games_per_file': args.max_games, 'sample_games': args.sample_games},
      },
      'split': {
          'test_fraction': test_fraction, 'by': 'test_input files' if args.test_input else 'hash of game',
          'dedup_by': args.dedup_by, 'drop_test_overlap': args.drop_test_overlap,
          'test_boards_in_train': overlap,
          'test_boards_in_train_fraction': overlap / test_boards if test_boards else None,
      },
      'splits': per_split,
      'engine_restarts': counts.get('engine_restarts', 0),
      'outputs': outputs,
      'timings': {'wall_seconds': round(wall, 3), **manifest_lib.distributions(result, annotate.NAMESPACE)},
  }
  manifest_lib.write(FileSystems.join(args.output_dir, 'manifest.json'), manifest)
  return manifest


def summary(manifest: dict) -> str:
  """A few human lines about a finished job."""
  g = manifest['games']
  lines = [f"games: {g['read']} read, {g['kept']} kept" + (f", skipped {g['skipped']}" if g['skipped'] else '')]
  for split, c in manifest['splits'].items():
    lines.append(f"{split}: {c['boards']} boards, {c['action_values']} action-values, {c['boards_failed']} failed, {c['terminal_boards']} terminal")
  s = manifest['split']
  if s['test_boards_in_train_fraction'] is not None:
    lines.append(f"test boards also in train: {s['test_boards_in_train']} ({100 * s['test_boards_in_train_fraction']:.1f}%)")
  e = manifest['engine']
  lines.append(f"engine: {', '.join(i.get('name', '?') for i in e['id'])} | {e['mode']} {e['limit']} | restarts {manifest['engine_restarts']}")
  lines.append(f"wall time: {manifest['timings']['wall_seconds']:.1f} s")
  return '\n'.join(lines)


def main(argv=None) -> None:
  logging.getLogger().setLevel(logging.WARNING)
  try:
    manifest = run(argv)
  except (FileNotFoundError, ValueError, pgn.CorruptInputError) as e:
    sys.exit(f'error: {e}')
  print(summary(manifest))
  print(f"manifest: {FileSystems.join(manifest['output_dir'], 'manifest.json')}")


if __name__ == '__main__':
  main(sys.argv[1:])
