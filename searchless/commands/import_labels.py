"""``searchless-import``: the label import (`searchless.pipelines.import_labels`, whose docstring says what
it reads and writes) as a console script: quiet Beam, one-line errors, a summary at the end.

    searchless-import games.pgn.zst lichess_db_eval.jsonl.zst --out free
"""

from collections.abc import Sequence
import sys

from searchless.data import beam_command
from searchless.plumbing import errors

beam_command.require_beam('searchless-import')  # Before the imports that need Beam.
from searchless.core import artefacts  # noqa: E402
from searchless.data import import_job  # noqa: E402
from searchless.data import streams  # noqa: E402
from searchless.pipelines import import_labels  # noqa: E402
from searchless.plumbing import files  # noqa: E402


def main(argv: Sequence[str] | None = None) -> None:
  command = ['searchless-import', *(sys.argv[1:] if argv is None else argv)]
  manifest = beam_command.main(
    lambda args: import_labels.run(args, command=command), argv, 'searchless-import', streams.CorruptInputError
  )
  errors.print_or_quit(
    f'{import_job.summary(manifest)}\nmanifest: {files.join(manifest.output_dir, artefacts.ImportManifest.FILE)}'
  )


if __name__ == '__main__':
  main()
