"""``searchless-annotate``: the annotation pipeline (`searchless.pipelines.annotate`, whose docstring says what
it writes) as a console script: quiet Beam, one-line errors, a summary at the end.

    python -m searchless.commands.annotate --input 'games/*.pgn.zst' --out out --limit time=0.05
"""

from collections.abc import Sequence
import sys

from searchless.data import beam_command
from searchless.plumbing import errors

beam_command.require_beam('searchless-annotate')  # Before the imports that need Beam.
from searchless.core import artefacts  # noqa: E402
from searchless.data import annotation_job  # noqa: E402
from searchless.data import streams  # noqa: E402
from searchless.pipelines import annotate  # noqa: E402
from searchless.plumbing import files  # noqa: E402


def main(argv: Sequence[str] | None = None) -> None:
  command = ['searchless-annotate', *(sys.argv[1:] if argv is None else argv)]
  manifest = beam_command.main(
    lambda args: annotate.run(args, command=command), argv, 'searchless-annotate', streams.CorruptInputError
  )
  errors.print_or_quit(
    f'{annotation_job.summary(manifest)}\n'
    f'manifest: {files.join(manifest.output_dir, artefacts.AnnotationManifest.FILE)}'
  )


if __name__ == '__main__':
  main()
