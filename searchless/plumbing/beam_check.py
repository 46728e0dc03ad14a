"""Imported first by a Beam command's module, before anything that imports Beam: without Apache Beam the command
ends in one line naming itself and the extra to install (`errors.require_beam`), not in an ImportError's
traceback, and Beam's import-time 'apitools not found' warning stays out of the program's log.

    from searchless.plumbing import beam_check  # noqa: F401  # First: Beam is there, or one line says so.

The command is named by the console script whose entry point is the importing module (``searchless-annotate`` for
`searchless.pipelines.annotate`), so the module need run no statement before its imports.
"""

import importlib.metadata
import sys
import types

from searchless.plumbing import errors


def _importer() -> str:
  """The name of the module whose import of this one runs now (its spec's: the same under ``python -m``)."""
  frame: types.FrameType | None = sys._getframe(1)
  while frame is not None and frame.f_globals.get('__name__', '').startswith((__name__, 'importlib', '_frozen')):
    frame = frame.f_back
  if frame is None:
    return ''
  spec = frame.f_globals.get('__spec__')
  return spec.name if spec is not None else frame.f_globals.get('__name__', '')


def command(module: str) -> str:
  """The console script whose entry point is in `module` (``searchless-annotate``); else 'this command'."""
  scripts = importlib.metadata.entry_points(group='console_scripts')
  return next((s.name for s in scripts if s.value.split(':')[0] == module), 'this command')


errors.require_beam(command(_importer()))
