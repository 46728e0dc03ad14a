r"""Annotate Lichess PGN games with Stockfish into ChessBench bag files.

    searchless-annotate --input 'games/*.pgn.zst' --out out --limit time=0.05
    python -m searchless.pipelines.annotate --input 'games/*.pgn.zst' --out out   # the same
    searchless.pipelines.annotate.run(['--input', ..., '--out', 'out'])   # the same, from Python

writes, per split (train, test), ChessBench-named record sets
``out/<split>/<kind>_data.bag`` (or shards ``<kind>-SSSSS-of-NNNNN_data.bag``)
for kind in action_value, state_value, behavioral_cloning (the ChessBench
datasets) and board_value (one record per board: every legal move's value and
the board's own; ``--records`` picks the sets), plus
``out/manifest.json``, ``out/failures.jsonl`` (boards the engine could not
annotate) and ``out/skipped.jsonl`` (games not used, with file:line and reason).

The work is kept as it is done (``out/.searchless-resume/``, `searchless.data.resume`): after Ctrl-C, a kill,
a crash or a reboot the same command annotates only the boards not yet committed, and writes the same dataset. A
rerun with other engine settings, another engine binary or another package version is refused, naming what
differs; ``--restart`` drops the kept work instead.

Runs on the DirectRunner with one worker process per core by default. Any
other Beam runner works with the usual options (``--runner DataflowRunner
--project … --region … --temp_location gs://…``); the engine binary must then
exist on the workers at ``--engine_path`` (see the README: a custom container
with ``apt-get install stockfish``, or ``--setup_file`` that installs it).

Read top to bottom: the flags (`parse`), the command (`main`: quiet Beam, one-line errors, a summary), `run(argv)`,
then the job: `run_job` builds the graph (`searchless.data.annotate.AnnotateGames`), runs it through
`searchless.data.beam_job.run`, commits the files it wrote (`shards.commit`) and writes ``manifest.json``
(`artefacts.AnnotationManifest`) from the counts the job itself produced (`job_results.WriteResults`), so every
runner gives the same manifest.

Beam's Dask runner (``--runner apache_beam.runners.dask.dask_runner.DaskRunner
--dask_client_address HOST:PORT``) gets one element per partition unless
``--dask_partition_size``/``--dask_npartitions`` say otherwise, and by default
four times as many lanes (`searchless.data.games.Distribute`) as the cluster has worker threads:
each lane is a partition there (enough for an even load), and each GroupByKey costs Dask
about lanes² tasks.
"""

import argparse
from collections.abc import Sequence
import dataclasses
import json
import os
import shutil
import sys
import time
from typing import Any

from searchless.plumbing import errors

errors.require_beam('searchless-annotate')  # Before the imports that need Beam.
import apache_beam as beam  # noqa: E402
from apache_beam.io.filesystems import FileSystems  # noqa: E402
from apache_beam.options.pipeline_options import PipelineOptions  # noqa: E402

from searchless.core import artefacts  # noqa: E402
from searchless.core import records  # noqa: E402
from searchless.data import annotate  # noqa: E402
from searchless.data import annotation_records  # noqa: E402
from searchless.data import beam_job  # noqa: E402
from searchless.data import job_options  # noqa: E402
from searchless.data import job_results  # noqa: E402
from searchless.data import manifest as manifest_lib  # noqa: E402
from searchless.data import pgn  # noqa: E402
from searchless.data import progress as progress_lib  # noqa: E402
from searchless.data import resume  # noqa: E402
from searchless.data import shards  # noqa: E402
from searchless.data import streams  # noqa: E402
from searchless.engines import annotator as engine_lib  # noqa: E402
from searchless.engines import launch  # noqa: E402
from searchless.plumbing import cli  # noqa: E402
from searchless.plumbing import files  # noqa: E402
from searchless.plumbing import outputs  # noqa: E402

_OPTION_FIELDS = [f.name for f in dataclasses.fields(annotate.AnnotateOptions) if f.name not in ('input', 'test_input')]
# The flags' defaults are the dataclasses' (their one home).
_OPTIONS = {f.name: f.default for f in dataclasses.fields(annotate.AnnotateOptions)}
_ENGINE = {f.name: f.default for f in dataclasses.fields(engine_lib.EngineConfig)}

PROG = 'searchless-annotate'  # The command's name, in its usage and the manifest's command line.


def _parser() -> argparse.ArgumentParser:
  p = cli.ArgumentParser(prog=PROG, description=__doc__.split('\n\n')[0])
  io, games, boards = job_options.add_flags(p, _OPTIONS)
  io.add_argument(
    '--input',
    action='append',
    required=True,
    help='PGN file or glob (.pgn, .pgn.zst, .pgn.bz2, .pgn.gz); repeat or comma-separate for several',
  )
  io.add_argument(
    '--test_input',
    action='append',
    default=[],
    help='PGN files whose games all go to the test split (as the paper: another month); disables --test_fraction',
  )
  io.add_argument(
    '--records',
    default=None,
    help='record sets to write: chessbench (action_value, state_value, behavioral_cloning: one record per move / '
    "board) and/or board (board_value: one record per board with every move's value); default chessbench,board "
    '(chessbench with --mode board)',
  )
  io.add_argument(
    '--chunk_boards',
    type=int,
    default=_OPTIONS['chunk_boards'],
    help='each worker commits its annotations every this many boards (and every 2 minutes): what Ctrl-C, a kill or '
    'a reboot can lose; the same command again resumes from them',
  )
  games.add_argument(
    '--sample_games',
    type=int,
    default=_OPTIONS['sample_games'],
    help='keep a uniform sample of this many games: those whose hash (of their Lichess URL, else their text) is '
    'smallest, so every run, a resumed one included, draws the same games',
  )
  boards.add_argument(
    '--drop_test_overlap', action='store_true', help='drop test boards that also occur in train (the paper kept them)'
  )
  eng = p.add_argument_group('engine')
  eng.add_argument(
    '--engine_path',
    default=None,
    help='UCI engine binary on the workers (default: $SEARCHLESS_STOCKFISH, stockfish on PATH, /usr/games/stockfish)',
  )
  eng.add_argument(
    '--limit', default='time=0.05', help='per search: time=SECONDS, depth=N or nodes=N (paper: time=0.05 per move)'
  )
  eng.add_argument(
    '--mode',
    choices=engine_lib.MODES,
    default=_ENGINE['mode'],
    help='per_move: one search per legal move (paper); multipv: one MultiPV search per board; board: one search '
    'per board, its value and best move only (state_value and behavioral_cloning records)',
  )
  eng.add_argument(
    '--state_value',
    choices=engine_lib.STATE_VALUE_SOURCES,
    default=_ENGINE['state_value'],
    help="board value from its own search, or the best move's value",
  )
  eng.add_argument(
    '--threads', type=int, default=_ENGINE['threads'], help='UCI Threads per engine process (one engine per worker)'
  )
  eng.add_argument('--hash_mb', type=int, default=_ENGINE['hash_mb'], help='UCI Hash in MiB per engine process')
  eng.add_argument(
    '--deadline',
    type=float,
    default=_ENGINE['deadline'],
    help='seconds a search may overrun its limit before the engine is restarted',
  )
  eng.add_argument(
    '--max_attempts', type=int, default=_ENGINE['max_attempts'], help='tries per board before it goes to failures.jsonl'
  )
  eng.add_argument(
    '--max_failures_in_a_row',
    type=int,
    default=_ENGINE['max_failures_in_a_row'],
    help='boards failing one after another before the job stops, naming the engine (a broken engine, not bad boards)',
  )
  p.add_argument('--no_progress', action='store_true', help='no progress line')
  p.add_argument('--verbose', action='store_true', help="Beam's logs, and the traceback of an error")
  return p


def parse(argv: Sequence[str] | None) -> tuple[annotate.AnnotateOptions, engine_lib.EngineConfig, list[str], bool]:
  """The command line as (options, engine config, Beam pipeline args, progress)."""
  args, beam_args = _parser().parse_known_args(argv)
  if args.records is None:
    args.records = 'chessbench' if args.mode == 'board' else 'chessbench,board'
  options = annotate.AnnotateOptions(
    input=tuple(args.input), test_input=tuple(args.test_input), **{f: getattr(args, f) for f in _OPTION_FIELDS}
  )
  annotation_records.record_kinds(
    options.records, options.mode
  )  # A bad --records fails before the engine is looked for.
  engine_config = engine_lib.EngineConfig(
    path=launch.require_stockfish(args.engine_path),
    limit=launch.SearchLimit.parse(args.limit),
    mode=args.mode,
    threads=args.threads,
    hash_mb=args.hash_mb,
    state_value=args.state_value,
    deadline=args.deadline,
    max_attempts=args.max_attempts,
    max_failures_in_a_row=args.max_failures_in_a_row,
  )
  return options, engine_config, beam_args, not args.no_progress


def main(argv: Sequence[str] | None = None) -> None:
  """``searchless-annotate``: `run` as a console command (`beam_job.main`: quiet Beam, one-line errors), then a
  summary of the job."""
  command = [PROG, *(sys.argv[1:] if argv is None else argv)]
  manifest = beam_job.main(lambda args: run(args, command=command), argv, PROG, streams.CorruptInputError)
  errors.print_or_quit(
    f'{summary(manifest)}\nmanifest: {files.join(manifest.output_dir, artefacts.AnnotationManifest.FILE)}'
  )


def run(argv: Sequence[str] | None = None, *, command: Sequence[str] | None = None) -> artefacts.AnnotationManifest:
  """Parses `argv` and runs the job (`run_job`); returns the manifest.

  `command`: the command line the manifest records (default: ``searchless-annotate`` and `argv`).
  """
  if command is None and argv is not None:
    command = [PROG, *argv]
  options, engine_config, beam_args, progress = parse(argv)
  return run_job(options, engine_config, beam_args=beam_args, progress=progress, command=command)


def run_job(
  options: annotate.AnnotateOptions,
  engine_config: engine_lib.EngineConfig,
  *,
  beam_args: Sequence[str] = (),
  progress: bool = True,
  command: Sequence[str] | None = None,
) -> artefacts.AnnotationManifest:
  """Runs the job; returns the manifest (also written to OUTPUT_DIR/manifest.json).

  `command` is recorded in the manifest (default: this process's command line).
  """
  annotation_records.record_kinds(options.records, options.mode)  # A bad record set fails before anything runs.
  pipeline_options, local = beam_job.beam_options(beam_args)
  if local and not os.access(engine_config.path, os.X_OK):
    raise errors.MissingInput(
      f'engine {engine_config.path!r} not found or not executable: install Stockfish '
      '(Debian: apt-get install stockfish) or pass --engine_path'
    )
  if not options.parallelism:
    options = dataclasses.replace(options, parallelism=beam_job.parallelism(pipeline_options))
  with outputs.sole_writer(options.output_dir, 'searchless-annotate', '--out'):  # One job a folder; errors name it.
    return _run(options, engine_config, pipeline_options, local, progress, command)


def _run(
  options: annotate.AnnotateOptions,
  engine_config: engine_lib.EngineConfig,
  pipeline_options: PipelineOptions,
  local: bool,
  progress: bool,
  command: Sequence[str] | None,
) -> artefacts.AnnotationManifest:
  out = options.output_dir
  keeper = resume.Keeper(
    out, _settings(engine_config), 'annotated boards', command or manifest_lib.command_line(), restart=options.restart
  )
  kept = resume.pieces_of_kind(keeper.kept_pieces(), 'boards')
  if local:
    _refuse_another_engine(keeper, kept, engine_config)
  if kept:
    print(
      f'resuming: {resume.items_held(kept)} boards annotated by an interrupted run are kept in {resume.folder(out)}',
      file=sys.stderr,
    )
  progress_dir = annotate.new_progress_dir() if local and progress else None
  bar = progress_lib.ProgressThread(progress_dir) if progress_dir else None

  start = time.time()
  pipeline = beam.Pipeline(options=pipeline_options)
  graph = annotate.AnnotateGames(options, engine_config, progress_dir, kept)
  _ = pipeline | 'Annotate' >> graph  # Building it matches the inputs: a glob that matches nothing fails here.

  roots = sorted({options.output_dir, *(o.spec.directory for o in graph.outputs)})

  def finish(result) -> artefacts.AnnotationManifest:
    results = job_results.read_results(graph.results_path)
    counts, engine_ids, pieces = results.counts, results.engines, results.pieces
    for note in results.notes:
      print(f'warning: {note}', file=sys.stderr)
    if again := counts.get('boards_searched_again', 0):
      print(
        f"warning: {again} kept boards were made by another engine than the workers' "
        f'({", ".join(_engine_names(engine_ids))}): they were annotated again',
        file=sys.stderr,
      )
    if not counts.get('games_kept', 0) and not counts.get('corrupt_input_files', 0):
      keeper.remove()  # The job ran to its end: nothing to resume.
      raise errors.BadInput(_no_games(counts, graph.inputs))  # The runner abandons: nothing that looks finished.
    shards.commit([o.spec for o in graph.outputs], pieces, roots)
    wall = time.time() - start
    timings: dict[str, Any] = {
      **_metric_timings(result),
      'boards_kept_from_an_interrupted_run': counts.get('boards_kept', 0),
      'boards_searched_in_this_run': counts.get('boards_searched', 0) + again,
      'kept_boards_of_another_engine': again,
    }
    manifest = _write_manifest(counts, engine_ids, timings, options, engine_config, graph, wall, command)
    keeper.remove()
    return manifest

  if bar:
    bar.start()
  try:
    return beam_job.run(
      pipeline,
      finish,
      output_dir=options.output_dir,
      roots=roots,
      existing=beam_job.existing_dataset(options.output_dir),
      overwrite=options.overwrite,
      keeper=keeper,
    )
  finally:
    if bar and progress_dir:
      bar.stop()
      shutil.rmtree(progress_dir, ignore_errors=True)


def _settings(engine_config: engine_lib.EngineConfig) -> dict[str, str]:
  """What kept annotations depend on besides the engine itself (whose identity each piece carries): its settings.
  Not the inputs: a board's labels do not depend on the game it came from, so a changed input keeps them."""
  c = engine_config
  return resume.settings(limit=c.limit, mode=c.mode, threads=c.threads, hash_mb=c.hash_mb, state_value=c.state_value)


def _refuse_another_engine(keeper: resume.Keeper, kept: list[str], engine_config: engine_lib.EngineConfig) -> None:
  """On a runner that runs here, where the driver's engine is the workers': refuses (`resume.KeptWorkDiffers`) kept
  annotations that another binary made. Elsewhere each worker compares its own engine (`annotate.AnnotateBoards`)."""
  binary = launch.binary_sha256(engine_config.path)
  for tag, paths in sorted(resume.engines_of(kept).items(), key=lambda item: str(item[0])):
    identity = resume.engine_identity(keeper.output_dir, tag) if tag else None
    if identity is None or binary is None or identity.get('binary_sha256') == binary:
      continue  # Unknown here: its workers will tell.
    made_by = f'{identity.get("name", "?")} (sha256 {str(identity.get("binary_sha256"))[:16]})'
    raise keeper.refusal([f'by the engine {made_by}, not {engine_config.path} (sha256 {binary[:16]})'], paths)


def _engine_names(engine_ids: list[str]) -> list[str]:
  """Each engine identity (JSON) as its name and the start of its binary's sha256."""
  return [
    f'{i.get("name", "?")}, sha256 {str(i.get("binary_sha256"))[:16]}' for i in (json.loads(e) for e in engine_ids)
  ]


def _no_games(counts: dict[str, int], inputs: dict[str, list[str]]) -> str:
  """The error of a job that kept no game: what it read and why each game was skipped."""
  files = ', '.join(f for names in inputs.values() for f in names)
  read = counts.get('games_read', 0)
  if not read:
    return f'no games in {files}: nothing to annotate'
  skipped = ', '.join(f'{counts[k]} {k.split("/", 1)[1]}' for k in sorted(counts) if k.startswith('games_skipped/'))
  return f'all {read} games in {files} were skipped ({skipped}): nothing to annotate'


def _metric_timings(result) -> dict[str, dict]:
  """The runner's distributions (time per board), where the runner reports metrics."""
  try:
    return manifest_lib.distributions(result, annotate.NAMESPACE)
  except NotImplementedError:  # Beam's Dask runner: 'collecting metrics will come later!'
    return {}


def _binary_sha256(engine_ids: list[dict], engine_config: engine_lib.EngineConfig) -> str | None:
  """The workers' engine binary hash where they agree, else (or with no board annotated) the driver's."""
  hashes = {identity.get('binary_sha256') for identity in engine_ids}
  return hashes.pop() if len(hashes) == 1 else launch.binary_sha256(engine_config.path)


def _write_manifest(
  counts: dict[str, int],
  engines: list[str],
  timings: dict[str, dict],
  options: annotate.AnnotateOptions,
  engine_config: engine_lib.EngineConfig,
  graph: annotate.AnnotateGames,
  wall: float,
  command: Sequence[str] | None,
) -> artefacts.AnnotationManifest:
  engine_ids = [json.loads(identity) for identity in engines]
  per_split = {}
  for split in graph.split_names:
    per_split[split] = {
      name: counts.get(f'{name}/{split}', 0)
      for name in ('boards_seen', 'boards', 'boards_annotated', 'boards_failed', 'terminal_boards', 'action_values')
    }
  test_boards = per_split.get('test', {}).get('boards', 0) + counts.get('test_boards_dropped', 0)
  overlap = counts.get('test_boards_in_train', 0)
  manifest = artefacts.AnnotationManifest(
    code=manifest_lib.code_version(),
    command=list(command) if command is not None else manifest_lib.command_line(),
    inputs=graph.inputs,
    output_dir=options.output_dir,
    engine={**engine_config.describe(), 'id': engine_ids, 'binary_sha256': _binary_sha256(engine_ids, engine_config)},
    games={
      **options.games_manifest(counts, pgn.SKIP_REASONS, sample_games=options.sample_games),
      'corrupt_input_files': counts.get('corrupt_input_files', 0),
    },
    split={
      'test_fraction': graph.test_fraction,
      'by': 'test_input files' if options.test_input else 'hash of game',
      'dedup_by': options.dedup_by,
      'drop_test_overlap': options.drop_test_overlap,
      'test_boards_in_train': overlap,
      'test_boards_in_train_fraction': overlap / test_boards if test_boards else None,
    },
    splits=per_split,
    engine_restarts=counts.get('engine_restarts', 0),
    outputs=beam_job.outputs(options.output_dir, graph.split_names, records.ALL_KINDS),
    timings={'wall_seconds': round(wall, 3), **timings},
  )
  manifest.write(FileSystems.join(options.output_dir, artefacts.AnnotationManifest.FILE))
  return manifest


def summary(manifest: artefacts.AnnotationManifest) -> str:
  """A few human lines about a finished job."""
  g = manifest.games
  lines = [f'games: {g["read"]} read, {g["kept"]} kept' + (f', skipped {g["skipped"]}' if g['skipped'] else '')]
  for split, c in manifest.splits.items():
    lines.append(
      f'{split}: {c["boards"]} boards, {c["action_values"]} action-values, {c["boards_failed"]} failed, '
      f'{c["terminal_boards"]} terminal'
    )
  s = manifest.split
  if s['test_boards_in_train_fraction'] is not None:
    lines.append(
      f'test boards also in train: {s["test_boards_in_train"]} ({100 * s["test_boards_in_train_fraction"]:.1f}%)'
    )
  e = manifest.engine
  lines.append(
    f'engine: {", ".join(i.get("name", "?") for i in e["id"])} | {e["mode"]} {e["limit"]} | '
    f'restarts {manifest.engine_restarts}'
  )
  lines.append(f'wall time: {manifest.timings["wall_seconds"]:.1f} s')
  return '\n'.join(lines)


if __name__ == '__main__':
  main()
