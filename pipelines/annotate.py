r"""Annotate Lichess PGN games with Stockfish into ChessBench bag files.

    searchless-annotate --input 'games/*.pgn.zst' --out out --limit time=0.05
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
"""

import argparse
import dataclasses
from collections.abc import Sequence

from searchless.core import artefacts
from searchless.data import annotate
from searchless.data import annotation_job
from searchless.data import annotation_records
from searchless.data import job_options
from searchless.engines import annotator as engine_lib
from searchless.engines import launch
from searchless.plumbing import cli

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


def run(argv: Sequence[str] | None = None, *, command: Sequence[str] | None = None) -> artefacts.AnnotationManifest:
  """Parses `argv` and runs the job (`annotation_job.run`); returns the manifest.

  `command`: the command line the manifest records (default: ``searchless-annotate`` and `argv`).
  """
  if command is None and argv is not None:
    command = [PROG, *argv]
  options, engine_config, beam_args, progress = parse(argv)
  return annotation_job.run(options, engine_config, beam_args=beam_args, progress=progress, command=command)
