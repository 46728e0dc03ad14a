"""``searchless-annotate``: the annotation pipeline (`searchless.pipelines.annotate`, whose docstring says what
it writes) as a console script: quiet Beam, one-line errors, a summary at the end.

    python -m searchless.commands.annotate --input 'games/*.pgn.zst' --out out --limit time=0.05
"""

from collections.abc import Sequence
import sys

from searchless.commands import errors
from searchless.pipelines import annotate  # First: its Beam guard names a missing extra before any Beam import.
from searchless.core import artefacts
from searchless.core import files
from searchless.data import annotation_job
from searchless.data import streams


def main(argv: Sequence[str] | None = None) -> None:
  command = ['searchless-annotate', *(sys.argv[1:] if argv is None else argv)]
  manifest = errors.beam_main(
    lambda args: annotate.run(args, command=command), argv, 'searchless-annotate', streams.CorruptInputError
  )
  errors.print_out(
    f'{annotation_job.summary(manifest)}\n'
    f'manifest: {files.join(manifest.output_dir, artefacts.AnnotationManifest.FILE)}'
  )


if __name__ == '__main__':
  main()
