"""searchless-plot: plot a run's curves (loss, gradient norm, throughput) into WORKDIR/curves.png.

    searchless-plot WORKDIR

Reads the ``metrics.jsonl`` that training writes (`searchless.training.plot`).
"""

import argparse
from collections.abc import Sequence

from searchless.plumbing import cli
from searchless.plumbing import errors
from searchless.training import plot


def _parser() -> argparse.ArgumentParser:
  p = cli.ArgumentParser(prog='searchless-plot', description=__doc__.split('\n\n')[0])
  p.add_argument('workdir', help='the training run directory (holds metrics.jsonl)')
  return p


def main(argv: Sequence[str] | None = None) -> None:
  args = _parser().parse_args(argv)
  with errors.one_line_errors():
    out = plot.plot(args.workdir)
  print(out)


if __name__ == '__main__':
  main()
