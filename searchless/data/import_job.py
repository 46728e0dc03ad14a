"""The label import (``searchless-import``): Lichess's own evaluations as ChessBench records, on any Beam runner.

The graph and its options are `searchless.data.import_graph`'s; this module runs it and writes the manifest.

Games are parsed, filtered and split (by a hash of the game) exactly as annotation does
(`searchless.data.games`); a database board goes to the split its FEN hashes to. A board
met more than once in a split (openings) becomes one record: its state value from the deepest
source (the database before games, then depth, then thousands of nodes), and every move any
source valued, each with its deepest value. What `searchless.data.lichess_evals` skips is counted
and written to ``skipped.jsonl`` with its file and line. Counts are data, summed by
`job_results.WriteResults`; `run` commits the files and writes ``manifest.json``
(`artefacts.ImportManifest`), with each source's depth and knodes distribution.
"""

from collections.abc import Sequence
import dataclasses
import sys
import time
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from searchless.core import artefacts
from searchless.data import annotation_job
from searchless.data import beam_job
from searchless.data import import_graph
from searchless.data import job_results
from searchless.data import lichess_evals
from searchless.data import manifest as manifest_lib
from searchless.data import resume
from searchless.data import shards
from searchless.plumbing import errors
from searchless.plumbing import outputs


def _distribution(counts: dict[str, int], prefix: str) -> dict[str, int]:
  """{bucket: n} of the counts named prefix/bucket, buckets in numeric order ('unknown' last)."""
  found = {name[len(prefix) + 1 :]: n for name, n in counts.items() if name.startswith(prefix + '/')}
  key = lambda b: (b == 'unknown', int(b.split('-')[0]) if b != 'unknown' else 0)
  return {bucket: found[bucket] for bucket in sorted(found, key=key)}


def run(
  options: import_graph.ImportOptions, *, beam_args: Sequence[str] = (), command: Sequence[str] | None = None
) -> artefacts.ImportManifest:
  """Runs the import; returns the manifest (also written to OUTPUT_DIR/manifest.json). What it parsed is kept as it
  goes (`resume`): after an interrupt, the same call parses only the rest and writes the same dataset."""
  pipeline_options, _ = beam_job.beam_options(beam_args)
  if not options.parallelism:
    options = dataclasses.replace(options, parallelism=beam_job.parallelism(pipeline_options))
  with outputs.sole_writer(options.output_dir, 'searchless-import', '--out'):  # One job a folder; errors name it.
    return _run(options, pipeline_options, command)


def _run(
  options: import_graph.ImportOptions, pipeline_options: Any, command: Sequence[str] | None
) -> artefacts.ImportManifest:
  out = options.output_dir
  o = options
  paths = import_graph.input_paths(options)  # A glob that matches nothing fails before the folder is made.
  settings = resume.settings(  # What a parse depends on: the filters, and the split of a database board.
    min_elo=o.min_elo,
    max_elo=o.max_elo,
    speeds=o.speeds,
    exclude_bots=o.exclude_bots,
    test_fraction=o.test_fraction,
    dedup_by=o.dedup_by,
  )
  keeper = resume.Keeper(
    out,
    settings,
    'parsed games and lines',
    command or manifest_lib.command_line(),
    inputs={path: resume.input_identity(path) for path in paths},  # Pieces hold their lines' parses.
    restart=options.restart,
  )
  if options.restart and (dropped := resume.pieces(out)):
    print(
      f'restarting: {resume.items_held(dropped)} parsed games and lines kept in {resume.folder(out)} are dropped',
      file=sys.stderr,
    )
  kept = keeper.kept_pieces()
  if kept:
    print(f'resuming: {resume.items_held(kept)} games and lines parsed by an interrupted run are kept', file=sys.stderr)
  start = time.time()
  pipeline = beam.Pipeline(options=pipeline_options)
  graph = import_graph.ImportLabels(options, kept, paths)
  _ = pipeline | 'Import' >> graph
  roots = sorted({options.output_dir, *(o.spec.directory for o in graph.outputs)})

  def finish(_) -> artefacts.ImportManifest:
    results = job_results.read_results(graph.results_path)
    counts, pieces = results.counts, results.pieces
    for note in results.notes:
      print(f'warning: {note}', file=sys.stderr)
    if not counts.get('lines_kept', 0) and not counts.get('games_kept', 0):
      files = ', '.join(p for paths in graph.inputs.values() for p in paths)
      skipped = ', '.join(f'{n} {k}' for k, n in sorted(counts.items()) if 'skipped' in k) or 'nothing skipped'
      keeper.remove()  # The job ran to its end: nothing to resume.
      raise errors.BadInput(
        f'no evaluations in {files}: no game with [%eval] comments and no usable database line ({skipped})'
      )
    shards.commit([o.spec for o in graph.outputs], pieces, roots)
    manifest = _write_manifest(counts, options, graph, time.time() - start, command)
    keeper.remove()
    return manifest

  return beam_job.run(
    pipeline,
    finish,
    output_dir=options.output_dir,
    roots=roots,
    existing=annotation_job.existing_dataset(options.output_dir),
    overwrite=options.overwrite,
    keeper=keeper,
  )


def _write_manifest(
  counts: dict[str, int],
  options: import_graph.ImportOptions,
  graph: import_graph.ImportLabels,
  wall: float,
  command: Sequence[str] | None,
) -> artefacts.ImportManifest:
  per_split = {
    split: {name: counts.get(f'{name}/{split}', 0) for name in ('boards_seen', 'boards', 'moves_valued', 'best_moves')}
    for split in graph.split_names
  }
  manifest = artefacts.ImportManifest(
    code=manifest_lib.code_version(),
    command=list(command) if command is not None else manifest_lib.command_line(),
    inputs=graph.inputs,
    output_dir=options.output_dir,
    games=options.games_manifest(counts, import_graph.GAME_SKIP_REASONS),
    lines={
      'read': counts.get('lines_read', 0),
      'kept': counts.get('lines_kept', 0),
      'skipped': {
        r: counts[f'lines_skipped/{r}'] for r in lichess_evals.SKIP_REASONS if counts.get(f'lines_skipped/{r}')
      },
      'max_lines_per_file': options.max_lines,
    },
    corrupt_input_files=counts.get('corrupt_input_files', 0),
    sources={
      source: {'depth': _distribution(counts, f'depth/{source}'), 'knodes': _distribution(counts, f'knodes/{source}')}
      for source in lichess_evals.SOURCES
      if graph.inputs[source]
    },
    split={
      'test_fraction': options.test_fraction,
      'by': 'hash of game; database boards: hash of board',
      'dedup_by': options.dedup_by,
    },
    splits=per_split,
    outputs=beam_job.outputs(options.output_dir, graph.split_names, options.kinds),
    timings={
      'wall_seconds': round(wall, 3),
      'parsed_in_this_run': {kind: counts.get(f'parsed/{kind}', 0) for kind in ('games', 'lines')},
      'kept_from_an_interrupted_run': {kind: counts.get(f'kept/{kind}', 0) for kind in ('games', 'lines')},
    },
  )
  manifest.write(FileSystems.join(options.output_dir, artefacts.ImportManifest.FILE))
  return manifest


def summary(manifest: artefacts.ImportManifest) -> str:
  """A few human lines about a finished import."""
  g, l = manifest.games, manifest.lines
  lines = []
  if manifest.inputs['games']:
    lines.append(
      f'games: {g["read"]} read, {g["kept"]} kept (with evals)' + (f', skipped {g["skipped"]}' if g['skipped'] else '')
    )
  if manifest.inputs['eval_db']:
    lines.append(
      f'database lines: {l["read"]} read, {l["kept"]} kept' + (f', skipped {l["skipped"]}' if l['skipped'] else '')
    )
  for split, c in manifest.splits.items():
    lines.append(
      f'{split}: {c["boards"]} boards ({c["boards_seen"]} before merging), {c["moves_valued"]} move values, '
      f'{c["best_moves"]} best moves'
    )
  lines.append(f'wall time: {manifest.timings["wall_seconds"]:.1f} s')
  return '\n'.join(lines)
