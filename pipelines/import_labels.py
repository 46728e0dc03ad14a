r"""Import Lichess's own evaluations as ChessBench records: no engine time.

    searchless-import games.pgn.zst lichess_db_eval.jsonl.zst --out free

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
"""

import argparse
from collections.abc import Sequence
import dataclasses

from searchless.core import artefacts
from searchless.data import import_graph
from searchless.data import import_job
from searchless.data import job_options
from searchless.plumbing import cli

_OPTIONS = {f.name: f.default for f in dataclasses.fields(import_graph.ImportOptions)}  # The defaults' one home.

PROG = 'searchless-import'  # The command's name, in its usage and the manifest's command line.


def _parser() -> argparse.ArgumentParser:
  p = cli.ArgumentParser(prog=PROG, description=__doc__.split('\n\n')[0])
  io, _, _ = job_options.add_flags(p, _OPTIONS)
  p.add_argument(
    'input',
    nargs='+',
    help='game dumps with [%%eval] comments (.pgn[.zst|.bz2|.gz]) and/or evaluation databases (.jsonl[.zst]), or globs',
  )
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


def run(argv: Sequence[str], *, command: Sequence[str] | None = None) -> artefacts.ImportManifest:
  """Parses `argv` and runs the import (`import_job.run`); returns the manifest.

  `command`: the command line the manifest records (default: ``searchless-import`` and `argv`).
  """
  args, beam_args = _parser().parse_known_args(argv)
  fields = {f.name for f in dataclasses.fields(import_graph.ImportOptions)} - {'input'}
  options = import_graph.ImportOptions(input=tuple(args.input), **{f: getattr(args, f) for f in fields})
  return import_job.run(options, beam_args=beam_args, command=command or [PROG, *argv])
