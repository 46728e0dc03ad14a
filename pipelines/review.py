r"""Review games with the model, one or a million: each move's win% before and after, the model's best move, the
mark, and each player's accuracy (Lichess's formula on the model's win%: `searchless.play.review`).

    searchless-review GAMES.pgn[.zst] ... --checkpoint NAME --out DIR [--limit N] [--sample_games N] [--min_rating R]

writes ``DIR/games.jsonl`` (one line per game: its tags, each player's accuracy and marks, every move's review),
``DIR/skipped.jsonl`` (games not reviewed, with file:line and reason), ``DIR/summary.json`` (games read, reviewed and
skipped by reason, the marks, and the accuracy by 100-point rating band: mean, spread, count) and
``DIR/accuracy_by_rating.png``.

The job is a Beam pipeline (`searchless.evaluation.review_job`): DirectRunner here by default, one worker process
per core; Beam's Dask runner (``--runner apache_beam.runners.dask.dask_runner.DaskRunner --dask_client_address
HOST:PORT``), Dataflow, Flink and Spark with Beam's own flags, as ``searchless-annotate``. Beam's flags follow the
games. The model runs in Beam's RunInference, loaded once per worker, in batches that fill its compiled shapes.

Each reviewed game is kept as it is done (``DIR/.searchless-resume/``): after Ctrl-C, a kill or a crash the same
command reviews only the games not yet kept, and writes the same files. A rerun with another model, policy, dtype,
package version or a changed input is refused, naming what differs (``--restart`` drops the kept work); a second
job writing to the same folder is refused.
"""

from searchless.plumbing import beam_check  # noqa: F401  # First: Beam is there, or one line says so.

import argparse
from collections.abc import Sequence
import contextlib
import dataclasses
import json
import math
import os
import sys
import tempfile
import time
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import DirectOptions

from searchless.data import beam_job
from searchless.data import games
from searchless.data import job_results
from searchless.data import manifest as manifest_lib
from searchless.data import pgn
from searchless.data import progress as progress_lib
from searchless.data import resume
from searchless.data import shards
from searchless.data import streams
from searchless.evaluation import review_job
from searchless.play import policy as policy_lib
from searchless.play import review
from searchless.plumbing import cli
from searchless.plumbing import errors
from searchless.plumbing import outputs

PROG = 'searchless-review'
SUMMARY = 'summary.json'
PLOT = 'accuracy_by_rating.png'
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(review_job.ReviewOptions)}


def _parser() -> argparse.ArgumentParser:
  p = cli.ArgumentParser(prog=PROG, description=__doc__.split('\n\n')[0])
  p.add_argument('games', nargs='+', metavar='GAMES', help='PGN files or globs (.pgn, .pgn.zst, .pgn.bz2, .pgn.gz)')
  p.add_argument('--checkpoint', required=True, help="the model: a workdir, checkpoint dir or a shipped model's name")
  p.add_argument('--out', dest='output_dir', required=True, type=cli.output_dir, help='where the review goes')
  p.add_argument('--policy', choices=policy_lib.POLICIES[:2], help="default: the checkpoint's")
  cli.add_dtype(p)
  p.add_argument('--limit', type=int, help='review the first N games of the input (file by file; skipped ones count)')
  p.add_argument(
    '--sample_games',
    type=int,
    help='review a uniform sample of N games: those whose hash (of their Lichess URL, else their text) is smallest',
  )
  p.add_argument('--min_rating', type=int, help='review only games whose players are both rated at least this')
  p.add_argument(
    '--batch_boards', type=int, default=0, help="positions per model call (0: those that fill the model's shapes)"
  )
  p.add_argument(
    '--chunk_games',
    type=int,
    default=_DEFAULTS['chunk_games'],
    help='a worker keeps its reviewed positions every this many chunks (about a game each) or two minutes: what a '
    'kill can lose',
  )
  p.add_argument('--parallelism', type=int, default=_DEFAULTS['parallelism'], help='lanes the games are spread over')
  p.add_argument('--skip_corrupt_inputs', action='store_true', help='keep the games read before a corrupt stream')
  p.add_argument('--overwrite', action='store_true', help='replace a review already in --out')
  p.add_argument('--restart', action='store_true', help='drop the work an interrupted run kept, and start afresh')
  p.add_argument('--no_progress', action='store_true', help='no progress line')
  p.add_argument('--verbose', action='store_true', help="Beam's logs, and the traceback of an error")
  return p


def _split_beam_args(parser: argparse.ArgumentParser, argv: Sequence[str]) -> tuple[list[str], list[str]]:
  """`argv` as (this command's arguments, Beam's flags): a flag the parser does not know is Beam's, and so is the
  word after it when it is no flag and the flag has no ``=`` (``--runner DirectRunner``)."""
  known = {s for action in parser._actions for s in action.option_strings}  # pylint: disable=protected-access
  valued = {s for a in parser._actions for s in a.option_strings if a.nargs != 0}  # pylint: disable=protected-access
  ours: list[str] = []
  beams: list[str] = []
  words = list(argv)
  i = 0
  while i < len(words):
    word = words[i]
    flag = word.split('=', 1)[0]
    if word.startswith('--') and flag not in known:
      beams.append(word)
      if '=' not in word and i + 1 < len(words) and not words[i + 1].startswith('-'):
        beams.append(words[i + 1])
        i += 1
    else:
      ours.append(word)
      if flag in valued and '=' not in word and i + 1 < len(words):
        ours.append(words[i + 1])
        i += 1
    i += 1
  return ours, beams


def parse(argv: Sequence[str]) -> tuple[review_job.ReviewOptions, list[str], bool]:
  """The command line as (options, Beam's flags, progress)."""
  parser = _parser()
  ours, beam_args = _split_beam_args(parser, argv)
  args = parser.parse_args(ours)
  for name in ('limit', 'sample_games', 'chunk_games', 'parallelism'):
    if getattr(args, name) is not None and getattr(args, name) < 1:
      raise errors.BadInput(f'--{name} must be >= 1, got {getattr(args, name)}')
  if args.batch_boards < 0 or (args.min_rating is not None and args.min_rating < 0):
    raise errors.BadInput('--batch_boards and --min_rating must be >= 0')
  fields = {f: getattr(args, f) for f in _DEFAULTS if f not in ('input',)}
  options = review_job.ReviewOptions(input=tuple(args.games), **fields)
  return options, beam_args, not args.no_progress


def main(argv: Sequence[str] | None = None) -> None:
  """``searchless-review``: `run` as a console command (quiet Beam, one-line errors), then its summary's lines."""
  command = [PROG, *(sys.argv[1:] if argv is None else argv)]
  summary = beam_job.main(lambda args: run(args, command=command), argv, PROG, streams.CorruptInputError)
  errors.print_or_quit(f'{describe(summary)}\nsummary: {FileSystems.join(summary["output_dir"], SUMMARY)}')


def run(argv: Sequence[str], *, command: Sequence[str] | None = None) -> dict[str, Any]:
  """Parses `argv` and runs the job; returns the summary (also written to DIR/summary.json)."""
  options, beam_args, progress = parse(argv)
  return run_job(options, beam_args=beam_args, progress=progress, command=command or [PROG, *argv])


def _existing(out: str) -> list[str]:
  names = [SUMMARY, PLOT, 'games.jsonl', 'skipped.jsonl']
  return [path for path in (FileSystems.join(out, n) for n in names) if FileSystems.exists(path)]


def run_job(
  options: review_job.ReviewOptions,
  *,
  beam_args: Sequence[str] = (),
  progress: bool = True,
  command: Sequence[str] = (PROG,),
) -> dict[str, Any]:
  """Builds the review's graph and runs it; returns its summary (also written to DIR/summary.json)."""
  pipeline_options, local = beam_job.beam_options(beam_args)
  o = options
  batch = o.batch_boards or review_job.default_batch(o.checkpoint, o.policy)
  out = o.output_dir
  with outputs.sole_writer(out, PROG, '--out'):  # One job a folder.
    inputs = streams.match_files(list(o.input), 'GAMES')  # A glob that matches nothing fails here.
    identity = review_job.model_identity(o.checkpoint)
    # A chunk's numbers depend on its positions (`review_job.PolicyHandler`): --batch_boards is a setting.
    settings = {**resume.settings(policy=o.policy, dtype=o.dtype, batch_boards=batch), 'model': identity}
    keeper = resume.Keeper(
      out,
      settings,
      'chunks of reviewed positions',
      list(command),
      inputs={path: resume.input_identity(path) for path in inputs},
      restart=o.restart,
    )
    kept = resume.pieces_of_kind(keeper.kept_pieces(), review_job.PIECE_KIND)
    if kept:
      print(
        f'resuming: {resume.items_held(kept)} chunks of positions an interrupted run reviewed are kept', file=sys.stderr
      )
    progress_dir = tempfile.mkdtemp(prefix='searchless-review-progress-') if local and progress else None
    direct = pipeline_options.view_as(DirectOptions)
    workers = direct.direct_num_workers if local and direct.direct_running_mode == 'multi_processing' else 0
    slots_dir = tempfile.TemporaryDirectory(prefix='searchless-review-cores-') if workers > 1 else None
    slots = None if slots_dir is None else (slots_dir.name, workers)  # Each local worker on its share of the cores.
    start = time.time()

    p = beam.Pipeline(options=pipeline_options)
    read = (
      p
      | 'Files' >> beam.Create(inputs)
      | 'ReadGames' >> beam.ParDo(games.ReadGames(o.limit, o.skip_corrupt_inputs))  # RawGame | CorruptInput
    )
    texts = read | 'Texts' >> beam.Filter(review_job.is_text)
    if o.limit is not None:
      texts = texts | 'Limit' >> review_job.FirstGames(o.limit, inputs)
    parsed = (  # ReviewGame | Skip
      texts
      | 'Distribute' >> games.Distribute(review_job.location, o.parallelism)
      | 'Parse' >> beam.ParDo(review_job.ParseForReview(pgn.GameFilter(min_elo=o.min_rating)))
    )
    to_review = parsed | 'Kept' >> beam.Filter(review_job.is_game).with_output_types(review_job.ReviewGame)
    if o.sample_games is not None:
      to_review = to_review | 'Sample' >> games.SampleGames(o.sample_games)
    skip_kept = resume.SkipKept(kept, review_job.chunk_key, p)
    resolved = (  # ('todo', ((game, ply), chunk)), or ('kept', ((game, ply), chunk), views) from the kept pieces
      to_review | 'Positions' >> beam.FlatMap(review_job.positions, batch) | 'SkipKept' >> skip_kept
    )
    views = resolved | 'ReviewChunks' >> review_job.ReviewChunks(o, progress_dir, slots)  # ((game, ply), views)
    lines = (
      {
        'game': to_review | 'GameByKey' >> beam.Map(review_job.by_game),
        'views': views | 'ViewsByGame' >> beam.Map(review_job.views_by_game),
      }
      | 'ByGame' >> beam.CoGroupByKey()
      | 'Review' >> beam.FlatMap(review_job.joined)
    )
    skipped = parsed | 'Skipped' >> beam.Filter(review_job.is_skip).with_output_types(pgn.Skip)
    specs = review_job.outputs(out)
    pieces = (
      (lines | 'KeyLines' >> beam.WithKeys(specs[0].key), skipped | 'KeySkipped' >> beam.WithKeys(specs[1].key))
      | 'ToWrite' >> beam.Flatten()
      | 'Write' >> shards.WriteShards(review_job.record_sets(specs))
    )
    counts = (
      read | 'CountRead' >> beam.Map(review_job.read_count),
      parsed | 'CountParsed' >> beam.Map(review_job.parse_count),
      lines | 'CountRecords' >> beam.FlatMap(review_job.record_counts),
      resolved | 'CountKept' >> beam.FlatMap(review_job.kept_count),
    )
    notes = [p | 'NoNotes' >> beam.Create([])]  # Flattened below: never an empty Flatten (Dask's runner fails).
    if skip_kept.dropped is not None:
      notes.append(
        skip_kept.dropped | 'Dropped' >> beam.Map(lambda r: ('note', resume.dropped_note(r, 'chunks of positions')))
      )
    results_path = job_results.results_path(out)
    _ = {
      'counts': counts | 'AllCounts' >> beam.Flatten(),
      'pieces': pieces,
      'notes': notes | 'AllNotes' >> beam.Flatten(),
    } | 'WriteResults' >> job_results.WriteResults(results_path)

    existing = _existing(out)
    bar = {'desc': 'review', 'unit': 'position', 'detail': False}
    with progress_lib.shown(progress_dir, **bar), slots_dir or contextlib.nullcontext():  # Gone at the end.
      with beam_job.dataset_job(out, roots=[out], existing=existing, overwrite=o.overwrite, keeper=keeper):
        beam_job.run_pipeline(p)
        results = job_results.read_results(results_path)
        for note in results.notes:
          print(f'warning: {note}', file=sys.stderr)
        counts = results.counts
        if not counts.get('games_reviewed', 0) and not counts.get('corrupt_input_files', 0):
          keeper.remove()
          raise errors.BadInput(_no_games(counts, inputs))
        shards.commit(specs, results.pieces, [out])
        summary = _summary(counts, options, inputs, batch, identity, list(command), time.time() - start)
        _write_json(FileSystems.join(out, SUMMARY), summary)
        if '://' not in out:
          plot(summary['bands'], os.path.join(out, PLOT))
        keeper.remove()
        return summary


def _no_games(counts: dict[str, int], inputs: Sequence[str]) -> str:
  read = counts.get('games_read', 0)
  if not read:
    return f'no games in {", ".join(inputs)}: nothing to review'
  skipped = ', '.join(f'{counts[k]} {k.split("/", 1)[1]}' for k in sorted(counts) if k.startswith('games_skipped/'))
  return f'all {read} games in {", ".join(inputs)} were skipped ({skipped}): nothing to review'


def bands(counts: dict[str, int]) -> list[dict[str, Any]]:
  """The players' accuracy by rating band from the job's counts: band, count, mean and standard deviation.

  >>> bands({'band/1500/n': 2, 'band/1500/sum': 15000, 'band/1500/squares': 7000 ** 2 + 8000 ** 2})
  [{'band': 1500, 'count': 2, 'mean': 75.0, 'sd': 5.0}]
  """
  found = sorted({int(k.split('/')[1]) for k in counts if k.startswith('band/')})
  rows = []
  for band in found:
    n, total, squares = (counts.get(f'band/{band}/{f}', 0) for f in ('n', 'sum', 'squares'))
    mean = total / n
    variance = max(0.0, squares / n - mean * mean)
    rows.append({'band': band, 'count': n, 'mean': round(mean / 100, 2), 'sd': round(math.sqrt(variance) / 100, 2)})
  return rows


def slope_per_band(rows: Sequence[dict[str, Any]]) -> float | None:
  """The least-squares slope of the players' accuracy against their band, per 100 points (each player one point).

  >>> slope_per_band([{'band': 1000, 'count': 1, 'mean': 70.0}, {'band': 1200, 'count': 1, 'mean': 74.0}])
  2.0
  """
  n = sum(r['count'] for r in rows)
  if n < 2 or len(rows) < 2:
    return None
  x = sum(r['band'] * r['count'] for r in rows) / n
  y = sum(r['mean'] * r['count'] for r in rows) / n
  sxy = sum(r['count'] * (r['band'] - x) * (r['mean'] - y) for r in rows)
  sxx = sum(r['count'] * (r['band'] - x) ** 2 for r in rows)
  return round(100 * sxy / sxx, 3)


def _summary(counts, options, inputs, batch, identity, command, wall) -> dict[str, Any]:
  rows = bands(counts)
  return {
    'code': manifest_lib.code_version(),
    'command': command,
    'output_dir': options.output_dir,
    'inputs': inputs,
    'model': {'checkpoint': options.checkpoint, 'identity': identity, 'policy': options.policy, 'dtype': options.dtype},
    'games': {
      'read': counts.get('games_read', 0),
      'kept': counts.get('games_kept', 0),
      'reviewed': counts.get('games_reviewed', 0),
      'skipped': {r: counts[f'games_skipped/{r}'] for r in pgn.SKIP_REASONS if counts.get(f'games_skipped/{r}')},
      'corrupt_input_files': counts.get('corrupt_input_files', 0),
      'filters': {'limit': options.limit, 'sample_games': options.sample_games, 'min_rating': options.min_rating},
    },
    'positions': counts.get('positions', 0),
    'positions_from_an_interrupted_run': counts.get('positions_from_an_interrupted_run', 0),
    'marks': {name: counts.get(f'marks/{name}', 0) for name in review.MARK_NAMES},
    'bands': rows,
    'accuracy_per_100_points': slope_per_band(rows),
    'batch_boards': batch,
    'wall_seconds': round(wall, 3),
  }


def _write_json(path: str, value: Any) -> None:
  with FileSystems.create(path) as f:
    f.write((json.dumps(value, indent=1) + '\n').encode('utf-8'))


def plot(rows: Sequence[dict[str, Any]], path: str) -> None:
  """The mean accuracy by rating band, with its spread (one standard deviation), as a PNG."""
  import matplotlib

  matplotlib.use('Agg')
  import matplotlib.pyplot as plt

  figure, axes = plt.subplots(figsize=(7, 4))
  if rows:
    axes.errorbar(
      [r['band'] + 50 for r in rows], [r['mean'] for r in rows], yerr=[r['sd'] for r in rows], fmt='o-', capsize=3
    )
  axes.set_xlabel('rating (100-point bands)')
  axes.set_ylabel("accuracy by the model's win% (Lichess's formula)")
  axes.grid(alpha=0.3)
  figure.tight_layout()
  figure.savefig(path, dpi=100)
  plt.close(figure)


def describe(summary: dict[str, Any]) -> str:
  """A few lines about a finished review."""
  g = summary['games']
  skipped = sum(g['skipped'].values())
  lines = [f'games: {g["read"]} read, {g["reviewed"]} reviewed' + (f', {skipped} skipped' if skipped else '')]
  lines.append(f'positions: {summary["positions"]}; ' + ', '.join(f'{n} {k}' for k, n in summary['marks'].items()))
  if summary['accuracy_per_100_points'] is not None:
    lines.append(f'accuracy per 100 rating points: {summary["accuracy_per_100_points"]:+.2f}')
  lines.append(f'wall time: {summary["wall_seconds"]:.1f} s')
  return '\n'.join(lines)


if __name__ == '__main__':
  main()
