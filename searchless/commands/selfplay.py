"""``searchless-selfplay``: the self-play pipeline (`searchless.pipelines.selfplay`, whose docstring says what it
plays) as a console script.

    searchless-selfplay --out games.pgn --num_games 50 --seed 0 --nodes 10000
"""

from collections.abc import Sequence

from searchless.pipelines import selfplay
from searchless.plumbing import errors


def main(argv: Sequence[str] | None = None) -> None:
  with errors.one_line_errors():
    summary = selfplay.run(argv)
  print(summary.line())


if __name__ == '__main__':
  main()
