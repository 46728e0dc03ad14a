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

Read top to bottom: the flags (`parse`), the command (`main`: quiet Beam, one-line errors, a summary), then
`run(argv)`: the job's graph step by step (read the games, extract their boards, skip the kept ones, spread them
over the workers, annotate them with the engine, make the records, write them, gather the job's results; the
transforms are `searchless.data.annotate`'s), run in `searchless.data.beam_job.dataset_job`. `_commit` then
commits the files it wrote (`shards.commit`) and writes ``manifest.json`` (`artefacts.AnnotationManifest`) from
the counts the job itself produced (`job_results.WriteResults`), so every runner gives the same manifest.

Beam's Dask runner (``--runner apache_beam.runners.dask.dask_runner.DaskRunner
--dask_client_address HOST:PORT``) gets one element per partition unless
``--dask_partition_size``/``--dask_npartitions`` say otherwise, and by default
four times as many lanes (`searchless.data.games.Distribute`) as the cluster has worker threads:
each lane is a partition there (enough for an even load), and each GroupByKey costs Dask
about lanes² tasks.
"""

from searchless.plumbing import beam_check  # noqa: F401  # First: Beam is there, or one line says so.

import argparse
from collections.abc import Sequence
import dataclasses
import os
import sys
import time
from typing import Any

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from searchless.core import artefacts
from searchless.data import annotate
from searchless.data import annotation_manifest
from searchless.data import annotation_records
from searchless.data import beam_job
from searchless.data import games
from searchless.data import job_options
from searchless.data import job_results
from searchless.data import manifest as manifest_lib
from searchless.data import progress as progress_lib
from searchless.data import resume
from searchless.data import shards
from searchless.data import streams
from searchless.engines import annotator as engine_lib
from searchless.engines import launch
from searchless.plumbing import cli
from searchless.plumbing import errors
from searchless.plumbing import files
from searchless.plumbing import outputs

_OPTION_FIELDS = [f.name for f in dataclasses.fields(annotate.AnnotateOptions) if f.name not in ('input', 'test_input')]
# The flags' defaults are the dataclasses' (their one home).
_OPTIONS = {f.name: f.default for f in dataclasses.fields(annotate.AnnotateOptions)}
_ENGINE = {f.name: f.default for f in dataclasses.fields(engine_lib.EngineConfig)}

PROG = 'searchless-annotate'  # The command's name, in its usage and the manifest's command line.
KEPT = 'annotated boards'  # What the kept pieces hold, in messages.


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
  where = files.join(manifest.output_dir, artefacts.AnnotationManifest.FILE)
  errors.print_or_quit(f'{annotation_manifest.summary(manifest)}\nmanifest: {where}')


def run(argv: Sequence[str] | None = None, *, command: Sequence[str] | None = None) -> artefacts.AnnotationManifest:
  """Parses `argv`, builds the job's graph and runs it (`beam_job.dataset_job`); returns the manifest (also written
  to OUT/manifest.json). `command`: the command line the manifest records (default: ``searchless-annotate`` and
  `argv`; with neither, this process's)."""
  if command is None and argv is not None:
    command = [PROG, *argv]
  options, engine_config, beam_args, progress = parse(argv)
  pipeline_options, local = _checked(options, engine_config, beam_args)
  if not options.parallelism:
    options = dataclasses.replace(options, parallelism=beam_job.parallelism(pipeline_options))
  out = options.output_dir
  with outputs.sole_writer(out, PROG, '--out'):  # One job a folder; its errors name it.
    keeper = resume.Keeper(
      out, _settings(engine_config), KEPT, command or manifest_lib.command_line(), restart=options.restart
    )
    kept = _kept(keeper, engine_config, local)
    plan = annotate.plan(options)  # The inputs matched: a glob that matches nothing fails here.
    resume_dir, chunk = resume.folder(out), options.chunk_boards
    progress_dir = annotate.new_progress_dir() if local and progress else None
    start = time.time()

    p = beam.Pipeline(options=pipeline_options)
    read = {source: annotate.ReadGames(source, options, plan.test_fraction) for source in plan.inputs}
    extract = games.ExtractBoards(options.dedup_by, options.drop_test_overlap)
    skip_kept = resume.SkipKept(kept, annotate.board_fen, p)
    resolved = (  # ('todo', (split, fen)), or ('kept', (split, fen), annotation, engine) from the kept pieces
      [p | f'Files[{s}]' >> beam.Create(plan.inputs[s]) | f'ReadGames[{s}]' >> r for s, r in read.items()]
      | 'AllGames' >> beam.Flatten()
      | 'ExtractBoards' >> extract
      | 'SkipKept' >> skip_kept
    )
    annotated = (  # Annotated | Failed | EngineSeen; kept boards too: their worker checks its engine made them.
      resolved
      | 'Distribute[boards]' >> games.Distribute(annotate.resolved_fen, options.parallelism)
      | 'AnnotateBoards' >> beam.ParDo(annotate.AnnotateBoards(engine_config, progress_dir, resume_dir, chunk))
    )
    skipped = [r.skipped for r in read.values()] | 'AllSkipped' >> beam.Flatten()
    pieces = (
      (
        annotated | 'ToRecords' >> annotate.ToRecords(plan),
        skipped | 'KeySkipped' >> beam.WithKeys(plan.spec('skipped').key),
      )
      | 'AllRecords' >> beam.Flatten()
      | 'Write' >> shards.WriteShards(plan.record_sets)
    )
    counts = [*(r.counts for r in read.values()), extract.counts]
    counts.append(annotated | 'CountAnnotated' >> beam.FlatMap(annotate.annotation_counts))
    notes = [annotated | 'EngineIds' >> beam.FlatMap(annotate.engine_ids)]
    if skip_kept.dropped is not None:
      notes.append(skip_kept.dropped | 'Dropped' >> beam.Map(lambda r: ('note', resume.dropped_note(r, KEPT))))
    _ = {
      'counts': counts | 'AllCounts' >> beam.Flatten(),
      'pieces': pieces,
      'notes': notes | 'AllNotes' >> beam.Flatten(),
    } | 'WriteResults' >> job_results.WriteResults(plan.results_path)
    if progress_dir:
      _ = resolved | 'TellTotal' >> annotate.TellTotal(progress_dir)

    existing = beam_job.existing_dataset(out)
    with beam_job.dataset_job(out, roots=plan.roots, existing=existing, overwrite=options.overwrite, keeper=keeper):
      with progress_lib.shown(progress_dir):
        result = beam_job.run_pipeline(p)
      return _commit(result, plan, keeper, options, engine_config, start, command)


def _checked(
  options: annotate.AnnotateOptions, engine_config: engine_lib.EngineConfig, beam_args: Sequence[str]
) -> tuple[PipelineOptions, bool]:
  """The pipeline options, and whether the job runs here; a bad record set or a missing engine fails first."""
  annotation_records.record_kinds(options.records, options.mode)
  pipeline_options, local = beam_job.beam_options(beam_args)
  if local and not os.access(engine_config.path, os.X_OK):
    raise errors.MissingInput(
      f'engine {engine_config.path!r} not found or not executable: install Stockfish '
      '(Debian: apt-get install stockfish) or pass --engine_path'
    )
  return pipeline_options, local


def _kept(keeper: resume.Keeper, engine_config: engine_lib.EngineConfig, local: bool) -> list[str]:
  """The pieces of annotated boards an interrupted run kept (said on stderr), refused where they differ."""
  kept = resume.pieces_of_kind(keeper.kept_pieces(), 'boards')
  if local:
    _refuse_another_engine(keeper, kept, engine_config)
  if kept:
    folder = resume.folder(keeper.output_dir)
    print(
      f'resuming: {resume.items_held(kept)} boards annotated by an interrupted run are kept in {folder}',
      file=sys.stderr,
    )
  return kept


def _commit(
  result: Any,
  plan: job_results.JobPlan,
  keeper: resume.Keeper,
  options: annotate.AnnotateOptions,
  engine_config: engine_lib.EngineConfig,
  start: float,
  command: Sequence[str] | None,
) -> artefacts.AnnotationManifest:
  """After the job ran: its counts (`job_results`), its files committed (`shards.commit`), its manifest written, the
  kept work dropped. A job that kept no game is an error (and its output abandoned)."""
  results = job_results.read_results(plan.results_path)
  counts, engine_ids = results.counts, results.engines
  for note in results.notes:
    print(f'warning: {note}', file=sys.stderr)
  if again := counts.get('boards_searched_again', 0):
    print(
      f"warning: {again} kept boards were made by another engine than the workers' "
      f'({", ".join(annotation_manifest.engine_names(engine_ids))}): they were annotated again',
      file=sys.stderr,
    )
  if not counts.get('games_kept', 0) and not counts.get('corrupt_input_files', 0):
    keeper.remove()  # The job ran to its end: nothing to resume.
    raise errors.BadInput(_no_games(counts, plan.inputs))  # The job abandons: nothing that looks finished.
  shards.commit([o.spec for o in plan.outputs], results.pieces, plan.roots)
  wall = time.time() - start
  timings: dict[str, Any] = {
    **annotation_manifest.metric_timings(result),
    'boards_kept_from_an_interrupted_run': counts.get('boards_kept', 0),
    'boards_searched_in_this_run': counts.get('boards_searched', 0) + again,
    'kept_boards_of_another_engine': again,
  }
  manifest = annotation_manifest.write(counts, engine_ids, timings, options, engine_config, plan, wall, command)
  keeper.remove()
  return manifest


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


def _no_games(counts: dict[str, int], inputs: dict[str, list[str]]) -> str:
  """The error of a job that kept no game: what it read and why each game was skipped."""
  files = ', '.join(f for names in inputs.values() for f in names)
  read = counts.get('games_read', 0)
  if not read:
    return f'no games in {files}: nothing to annotate'
  skipped = ', '.join(f'{counts[k]} {k.split("/", 1)[1]}' for k in sorted(counts) if k.startswith('games_skipped/'))
  return f'all {read} games in {files} were skipped ({skipped}): nothing to annotate'


if __name__ == '__main__':
  main()
