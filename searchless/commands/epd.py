r"""searchless-epd: score an agent on EPD test suites (Win At Chess, Bratko-Kopec, STS).

    searchless-epd --suite wac_clean.epd --suite sts01_undermine.epd \
        --agent stockfish:nodes=100000 --out runs/epd-sf

Prints one line per suite (and per theme of a multi-theme suite); the scoring
rules are `searchless.evaluation.epd`'s.
"""

import argparse
from collections.abc import Sequence
import os

from searchless.evaluation import epd
from searchless.plumbing import cli
from searchless.plumbing import errors


def _parser() -> argparse.ArgumentParser:
  p = cli.ArgumentParser(prog='searchless-epd', description=__doc__.split('\n\n')[0])
  p.add_argument(
    '--suite', action='append', required=True, type=cli.input_file, help='EPD file (repeat for several suites)'
  )
  p.add_argument(
    '--agent',
    required=True,
    help='agent spec: checkpoint:DIR, stockfish:nodes=N, stockfish:time=S, uci:PATH,time=S, ...',
  )
  p.add_argument('--num', type=int, default=None, help='evaluate only the first NUM positions of each suite')
  p.add_argument('--out', required=True, type=cli.output_dir, help='output directory')
  p.add_argument('--no_progress', action='store_true', help='no progress bar')
  return p


def main(argv: Sequence[str] | None = None) -> None:
  args = _parser().parse_args(argv)
  with errors.one_line_errors():
    summary = epd.run(suites=args.suite, agent=args.agent, out=args.out, num=args.num, progress=not args.no_progress)
  lines = [f'agent: {summary["agent"]}', f'results: {os.path.join(args.out, "results.csv")}']
  for suite in summary['results']:
    lines.append(suite.total.line())
    themes = suite.themes
    if len(themes) > 1:
      lines.extend(f'  {theme.line()}' for theme in themes)
  errors.print_or_quit('\n'.join(lines))


if __name__ == '__main__':
  main()
