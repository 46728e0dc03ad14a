"""Running the annotation graph: runner options, progress, and the manifest it leaves.

`run` builds a Beam pipeline around `annotate.AnnotateGames`, runs it (the
DirectRunner with one worker process per core by default, or any runner that
`beam_args` names), commits the files it wrote (`shards.commit`) and writes
``OUTPUT_DIR/manifest.json`` (`artefacts.AnnotationManifest`) from the counts
the job itself produced (`job_results.WriteResults`), so every runner gives the
same manifest.

Beam's Dask runner (``--runner apache_beam.runners.dask.dask_runner.DaskRunner
--dask_client_address HOST:PORT``) gets one element per partition unless
``--dask_partition_size``/``--dask_npartitions`` say otherwise, and by default
four times as many lanes (`searchless.data.games.Distribute`) as the cluster has worker threads:
each lane is a partition there (enough for an even load), and each GroupByKey costs Dask
about lanes² tasks.
"""

from collections.abc import Sequence
import dataclasses
import json
import os
import shutil
import sys
import time
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from searchless.core import artefacts
from searchless.core import records
from searchless.data import annotate
from searchless.data import annotation_records
from searchless.data import beam_job
from searchless.data import job_results
from searchless.data import manifest as manifest_lib
from searchless.data import pgn
from searchless.data import progress as progress_lib
from searchless.data import resume
from searchless.data import shards
from searchless.engines import annotator as engine_lib
from searchless.engines import launch
from searchless.plumbing import errors
from searchless.plumbing import outputs


SPLITS = ('train', 'test')  # The split folders a job writes.


def existing_dataset(output_dir: str) -> list[str]:
  """The files of an annotation job already in `output_dir` (manifest, logs, every record set of each split)."""
  found = [
    path
    for path in (
      FileSystems.join(output_dir, name)
      for name in (artefacts.AnnotationManifest.FILE, 'failures.jsonl', 'skipped.jsonl')
    )
    if FileSystems.exists(path)
  ]
  for split in SPLITS:
    for kind in records.ALL_KINDS:
      for ext in ('.bag', '.bagz'):
        found += sorted(shards.ShardSpec(FileSystems.join(output_dir, split), kind, ext).existing())
  return found


def run(
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
  if options.restart and (dropped := resume.pieces(out)):
    print(
      f'restarting: {resume.items_held(dropped)} annotated boards kept in {resume.folder(out)} are dropped',
      file=sys.stderr,
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
      existing=existing_dataset(options.output_dir),
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
