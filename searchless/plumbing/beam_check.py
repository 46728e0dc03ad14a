"""Imported first by a Beam command's module, before anything that imports Beam: without Apache Beam the command
ends in one line naming the extra to install (`errors.require_beam`), not in an ImportError's traceback, and Beam's
import-time 'apitools not found' warning stays out of the program's log.

    from searchless.plumbing import beam_check  # noqa: F401  # First: Beam is there, or one line says so.
"""

import os
import sys

from searchless.plumbing import errors


def command() -> str:
  """The running command's name as its console script is called (``searchless-annotate``); else 'this command'."""
  name = os.path.basename(sys.argv[0]) if sys.argv else ''
  return name if name.startswith('searchless-') else 'this command'


errors.require_beam(command())
