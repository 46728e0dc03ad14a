"""``searchless-convert``: the conversion pipeline (`searchless.pipelines.convert`, whose docstring says what it
writes) as a console script.

    searchless-convert 'out/train/action_value*' boards_out --to board
"""

from collections.abc import Sequence
import logging

from searchless.data import beam_command
from searchless.plumbing import errors

beam_command.require_beam('searchless-convert')  # Before the imports that need Beam.
from searchless.pipelines import convert  # noqa: E402


def main(argv: Sequence[str] | None = None) -> None:
  logging.getLogger().setLevel(logging.WARNING)
  with errors.one_line_errors():
    summary = convert.run(argv)
  print(summary.lines())


if __name__ == '__main__':
  main()
