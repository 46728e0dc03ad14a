r"""Import Lichess's own evaluations as ChessBench records: no engine time.

    searchless-import --input games.pgn.zst --input lichess_db_eval.jsonl.zst --out free

reads game dumps whose games carry ``[%eval]`` comments (.pgn, .pgn.zst, .bz2, .gz)
and Lichess's evaluation database (``lichess_db_eval.jsonl.zst``, from
database.lichess.org) and writes, per split (train, test), ``free/<split>/<kind>_data.bag``
for kind in state_value (every scored board's value for the side to move),
behavioral_cloning (the database's best line's first move; games have no engine
line) and partial_board_value (a board with the moves that have values: the
database's lines' first moves, the moves played in games), plus ``free/manifest.json``
(each source's depth and knodes distribution, counts, skips) and ``free/skipped.jsonl``.

What it parsed is kept as it goes (``free/.searchless-resume/``): after an interrupt the same command parses
only the rest. A rerun whose filters or split differ, or whose input changed (size or modification time; an
http(s) input's ETag), is refused, naming what differs; ``--restart`` drops the kept work instead.

Games are parsed, filtered and split as ``searchless-annotate`` does them; the same
Beam runner options apply (DirectRunner with one worker per core here; e.g.
``--runner DataflowRunner --project … --region … --temp_location gs://…`` for the
whole 330M-board database: no engine is needed on the workers).

Read top to bottom: the flags (`_parser`), the command (`main`: quiet Beam, one-line errors, a summary), then
`run(argv)`: the import's graph step by step (per source, read the files and parse them; merge each board's
evaluations; make the records, write them, gather the job's results; the transforms are
`searchless.data.import_graph`'s), run in `searchless.data.beam_job.dataset_job`; `_commit` commits the files and
writes the manifest.

Games are parsed, filtered and split (by a hash of the game) exactly as annotation does
(`searchless.data.games`); a database board goes to the split its FEN hashes to. A board
met more than once in a split (openings) becomes one record: its state value from the deepest
source (the database before games, then depth, then thousands of nodes), and every move any
source valued, each with its deepest value. What `searchless.data.lichess_evals` skips is counted
and written to ``skipped.jsonl`` with its file and line. Counts are data, summed by
`job_results.WriteResults`; `_commit` commits the files and writes ``manifest.json``
(`artefacts.ImportManifest`), with each source's depth and knodes distribution.
"""

from searchless.plumbing import beam_check  # noqa: F401  # First: Beam is there, or one line says so.

import argparse
from collections.abc import Sequence
import dataclasses
import sys
import time

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from searchless.core import artefacts
from searchless.data import beam_job
from searchless.data import import_graph
from searchless.data import job_options
from searchless.data import job_results
from searchless.data import lichess_evals
from searchless.data import manifest as manifest_lib
from searchless.data import resume
from searchless.data import shards
from searchless.data import streams
from searchless.plumbing import cli
from searchless.plumbing import errors
from searchless.plumbing import files
from searchless.plumbing import outputs

_OPTIONS = {f.name: f.default for f in dataclasses.fields(import_graph.ImportOptions)}  # The defaults' one home.

PROG = 'searchless-import'  # The command's name, in its usage and the manifest's command line.


def _parser(positional: bool = False) -> argparse.ArgumentParser:
  p = cli.ArgumentParser(prog=PROG, description=__doc__.split('\n\n')[0])
  io, _, _ = job_options.add_flags(p, _OPTIONS)
  io.add_argument(
    '--input',
    action='append',
    default=[],
    help='game dumps with [%%eval] comments (.pgn[.zst|.bz2|.gz]) and/or evaluation databases (.jsonl[.zst]), or '
    "globs; repeat or comma-separate for several (as searchless-annotate's --input)",
  )
  if positional:  # The earlier form, `searchless-import FILE...`, still read as it was.
    p.add_argument('paths', nargs='*', metavar='input', help='the same inputs without --input')
  io.add_argument('--records', default=_OPTIONS['records'], help='comma-separated record kinds to write')
  io.add_argument(
    '--chunk_games',
    type=int,
    default=_OPTIONS['chunk_games'],
    help='each worker commits its parsed games (or database lines) every this many (and every 2 minutes): what '
    'Ctrl-C, a kill or a reboot can lose; the same command again resumes from them',
  )
  io.add_argument(
    '--max_lines',
    type=int,
    default=_OPTIONS['max_lines'],
    help='read at most this many lines from each evaluation database',
  )
  p.add_argument('--verbose', action='store_true', help="Beam's logs, and the traceback of an error")
  return p


def main(argv: Sequence[str] | None = None) -> None:
  """``searchless-import``: `run` as a console command (`beam_job.main`: quiet Beam, one-line errors), then a
  summary of the import."""
  command = [PROG, *(sys.argv[1:] if argv is None else argv)]
  manifest = beam_job.main(lambda args: run(args, command=command), argv, PROG, streams.CorruptInputError)
  errors.print_or_quit(
    f'{summary(manifest)}\nmanifest: {files.join(manifest.output_dir, artefacts.ImportManifest.FILE)}'
  )


def run(argv: Sequence[str], *, command: Sequence[str] | None = None) -> artefacts.ImportManifest:
  """Parses `argv`, builds the import's graph and runs it (`beam_job.dataset_job`); returns the manifest (also
  written to OUT/manifest.json). What it parsed is kept as it goes (`resume`): after an interrupt, the same call
  parses only the rest and writes the same dataset. `command`: the command line the manifest records (default:
  ``searchless-import`` and `argv`)."""
  options, beam_args = _options(argv)
  command = command or [PROG, *argv]
  pipeline_options, _ = beam_job.beam_options(beam_args)
  if not options.parallelism:
    options = dataclasses.replace(options, parallelism=beam_job.parallelism(pipeline_options))
  out = options.output_dir
  paths = import_graph.input_paths(options)  # A glob that matches nothing fails before the folder is made.
  with outputs.sole_writer(out, PROG, '--out'):  # One job a folder; its errors name it.
    keeper = resume.Keeper(
      out,
      _settings(options),
      'parsed games and lines',
      command,
      inputs={path: resume.input_identity(path) for path in paths},  # Pieces hold their lines' parses.
      restart=options.restart,
    )
    kept = keeper.kept_pieces()
    plan = import_graph.plan(options, paths)
    start = time.time()

    p = beam.Pipeline(options=pipeline_options)
    sources = [s for s, names in plan.inputs.items() if names]  # 'games' (game dumps), 'eval_db' (databases)
    read = {s: import_graph.Read(s, options) for s in sources}
    parse = {s: import_graph.Parse(s, options, kept, p) for s in sources}
    merge = import_graph.MergePerBoard(options.dedup_by)
    boards = (  # (split, Labelled): one a board and split, with every source's evaluations merged
      [
        p | f'Files[{s}]' >> beam.Create(plan.inputs[s]) | f'Read[{s}]' >> read[s] | f'Parse[{s}]' >> parse[s]
        for s in sources
      ]
      | 'AllLabelled' >> beam.Flatten()
      | 'Merge' >> merge
    )
    skipped = [x.skipped for x in parse.values()] | 'AllSkipped' >> beam.Flatten()
    pieces = (
      (
        boards | 'ToRecords' >> import_graph.ToRecords(plan),
        skipped | 'KeySkipped' >> beam.WithKeys(plan.spec('skipped').key),
      )
      | 'AllRecords' >> beam.Flatten()
      | 'Write' >> shards.WriteShards(plan.record_sets)
    )
    counts = [*(x.counts for x in read.values()), *(x.counts for x in parse.values()), merge.counts]
    notes = [x.notes for x in parse.values() if x.notes is not None]
    _ = {
      'counts': counts | 'AllCounts' >> beam.Flatten(),
      'pieces': pieces,
      'notes': notes | 'AllNotes' >> beam.Flatten(pipeline=p),
    } | 'WriteResults' >> job_results.WriteResults(plan.results_path)

    existing = beam_job.existing_dataset(out)
    with beam_job.dataset_job(out, roots=plan.roots, existing=existing, overwrite=options.overwrite, keeper=keeper):
      beam_job.run_pipeline(p)
      return _commit(plan, keeper, kept, options, start, command)


def _options(argv: Sequence[str]) -> tuple[import_graph.ImportOptions, list[str]]:
  """The import's options and the Beam pipeline args, from `argv`."""
  given = any(a == '--input' or a.startswith('--input=') for a in argv)  # Else the inputs are positional.
  args, beam_args = _parser(positional=not given).parse_known_args(argv)
  fields = {f.name for f in dataclasses.fields(import_graph.ImportOptions)} - {'input'}
  inputs = (*args.input, *getattr(args, 'paths', ()))
  if not inputs:
    raise errors.BadInput('no input: name the game dumps or evaluation databases with --input')
  return import_graph.ImportOptions(input=inputs, **{f: getattr(args, f) for f in fields}), beam_args


def _settings(o: import_graph.ImportOptions) -> dict[str, str]:
  """What a parse depends on (what kept parses must share with a rerun): the filters, and a database board's split."""
  return resume.settings(
    min_elo=o.min_elo,
    max_elo=o.max_elo,
    speeds=o.speeds,
    exclude_bots=o.exclude_bots,
    test_fraction=o.test_fraction,
    dedup_by=o.dedup_by,
  )


def _commit(
  plan: job_results.JobPlan,
  keeper: resume.Keeper,
  kept: Sequence[str],
  options: import_graph.ImportOptions,
  start: float,
  command: Sequence[str],
) -> artefacts.ImportManifest:
  """After the job ran: what it reused of `kept` said, its files committed (`shards.commit`), its manifest written,
  the kept work dropped. An import that kept nothing is an error (and its output abandoned)."""
  results = job_results.read_results(plan.results_path)
  counts = results.counts
  for note in results.notes:
    print(f'warning: {note}', file=sys.stderr)
  if kept:
    print(reused(counts, resume.items_held(kept)), file=sys.stderr)
  if not counts.get('lines_kept', 0) and not counts.get('games_kept', 0):
    files = ', '.join(p for paths in plan.inputs.values() for p in paths)
    skipped = ', '.join(f'{n} {k}' for k, n in sorted(counts.items()) if 'skipped' in k) or 'nothing skipped'
    keeper.remove()  # The job ran to its end: nothing to resume.
    raise errors.BadInput(
      f'no evaluations in {files}: no game with [%eval] comments and no usable database line ({skipped})'
    )
  shards.commit([o.spec for o in plan.outputs], results.pieces, plan.roots)
  manifest = _write_manifest(counts, options, plan, time.time() - start, command)
  keeper.remove()
  return manifest


def reused(counts: dict[str, int], held: int) -> str:
  """What a resumed import says it reused: the games and lines it took from the kept pieces (`counts`: the job's
  own ``kept/games`` and ``kept/lines``), not what the pieces hold (`held`), which other inputs' parses may fill.

  >>> reused({'kept/games': 2900, 'kept/lines': 100}, 3000)
  'resumed: reused 2900 games and 100 lines parsed by an interrupted run'
  >>> reused({}, 3000)
  'resumed nothing: none of the 3000 games and lines an interrupted run kept is of these inputs'
  """
  games, lines = counts.get('kept/games', 0), counts.get('kept/lines', 0)
  if not games and not lines:
    return f'resumed nothing: none of the {held} games and lines an interrupted run kept is of these inputs'
  return f'resumed: reused {games} games and {lines} lines parsed by an interrupted run'


def _distribution(counts: dict[str, int], prefix: str) -> dict[str, int]:
  """{bucket: n} of the counts named prefix/bucket, buckets in numeric order ('unknown' last)."""
  found = {name[len(prefix) + 1 :]: n for name, n in counts.items() if name.startswith(prefix + '/')}
  key = lambda b: (b == 'unknown', int(b.split('-')[0]) if b != 'unknown' else 0)
  return {bucket: found[bucket] for bucket in sorted(found, key=key)}


def _write_manifest(
  counts: dict[str, int],
  options: import_graph.ImportOptions,
  plan: job_results.JobPlan,
  wall: float,
  command: Sequence[str] | None,
) -> artefacts.ImportManifest:
  per_split = {
    split: {name: counts.get(f'{name}/{split}', 0) for name in ('boards_seen', 'boards', 'moves_valued', 'best_moves')}
    for split in plan.split_names
  }
  manifest = artefacts.ImportManifest(
    code=manifest_lib.code_version(),
    command=list(command) if command is not None else manifest_lib.command_line(),
    inputs=plan.inputs,
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
      if plan.inputs[source]
    },
    split={
      'test_fraction': options.test_fraction,
      'by': 'hash of game; database boards: hash of board',
      'dedup_by': options.dedup_by,
    },
    splits=per_split,
    outputs=beam_job.outputs(options.output_dir, plan.split_names, options.kinds),
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


if __name__ == '__main__':
  main()
