"""``searchless-report``: writes a run's report (``RUN_DIR/report/report.html`` and ``report.md``).

    searchless-report --run_dir runs/demo

The report only reads the artefacts of the other steps (see
`searchless.report.build`); its sample game is analysed beforehand by
``searchless-analyse-game``. The last stdout line is the path of ``report.html``.
"""

import argparse
from collections.abc import Sequence

from searchless.plumbing import cli
from searchless.plumbing import errors
from searchless.report import build


def _parser() -> argparse.ArgumentParser:
  p = cli.ArgumentParser(prog='searchless-report', description=__doc__.split('\n\n')[0])
  p.add_argument('--run_dir', required=True, help='the run directory (data/, train/, eval/, puzzles/, match/)')
  p.add_argument('--out', default=None, type=cli.output_dir, help='output directory (default: RUN_DIR/report)')
  p.add_argument('--data_dir', default=None, help="the run's annotated data (default: RUN_DIR/data)")
  # Kept so that older command lines still work: the sample game is now searchless-analyse-game's.
  p.add_argument('--no_model', action='store_true', help='ignored (see searchless-analyse-game --no_model)')
  p.add_argument('--stockfish_nodes', type=int, default=None, help='ignored (see searchless-analyse-game)')
  return p


def main(argv: Sequence[str] | None = None) -> None:
  args = _parser().parse_args(argv)
  with errors.one_line_errors():
    report = build.build(args.run_dir, out_dir=args.out, data_dir=args.data_dir)
  errors.print_or_quit(f'markdown: {report.markdown}\n{report.html}')


if __name__ == '__main__':
  main()
