"""The command line's one look: every console command's parser shows each default once, where it says something,
and an output path of the wrong kind (a file where a folder goes, or the reverse) is refused naming its flag.

>>> p = ArgumentParser(prog='x')
>>> _ = p.add_argument('--n', type=int, default=3, help='how many')
>>> _ = p.add_argument('--out', help='where to write')
>>> _ = p.add_argument('--quiet', action='store_true', help='no progress')
>>> _ = p.add_argument('--draw', type=int, default=None, help='adjudicate draws (default: off)')
>>> print('\\n'.join(line.strip() for line in p.format_help().splitlines()[-4:]))
--n N        how many (default: 3)
--out OUT    where to write
--quiet      no progress
--draw DRAW  adjudicate draws (default: off)
"""

import argparse
from collections.abc import Callable, Sequence
import inspect
import os
import re
from typing import Any, NoReturn


def input_file(value: str) -> str:
  """An argparse type: a file to read; a missing one, or a folder, is refused (gs://... is left to the reader)."""
  if '://' not in value:
    if os.path.isdir(value):
      raise argparse.ArgumentTypeError(f'{value!r} is a folder, not a file')
    if not os.path.exists(value):
      raise argparse.ArgumentTypeError(f'{value!r}: no such file')
  return value


def output_dir(value: str) -> str:
  """An argparse type: a folder to write into (made if missing); an existing file there is refused."""
  if '://' not in value and os.path.exists(value) and not os.path.isdir(value):
    raise argparse.ArgumentTypeError(f'{value!r} is a file, not a folder')
  return value


def output_file(value: str) -> str:
  """An argparse type: a file to write; an existing folder there is refused."""
  if '://' not in value and os.path.isdir(value):
    raise argparse.ArgumentTypeError(f'{value!r} is a folder, not a file')
  return value


# argparse's error about one argument's value, and those about the flag's use (which show the usage).
_BAD_VALUE = re.compile(r'^argument [^:]+: ')
_WRONG_FLAG = re.compile(r'^argument [^:]+: (expected .* argument|not allowed with|ignored explicit argument)')


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
  """Appends ``(default: X)`` unless X is None, False or empty (nothing to say) or the help names its default."""

  def _get_help_string(self, action: argparse.Action) -> str | None:
    text = action.help or ''
    if action.default in (None, False, argparse.SUPPRESS, []) or 'default' in text.lower():
      return text
    return super()._get_help_string(action)


class ArgumentParser(argparse.ArgumentParser):
  """`argparse.ArgumentParser` with `DefaultsHelpFormatter` unless another formatter is given, and no abbreviated
  flags: ``--num`` is not taken for ``--num_shards`` (a typo must not start a long job)."""

  def __init__(self, *args, **kwargs):
    kwargs.setdefault('formatter_class', DefaultsHelpFormatter)
    kwargs['allow_abbrev'] = False
    super().__init__(*args, **kwargs)

  def error(self, message: str) -> NoReturn:  # type: ignore[override]
    """A bad value for a flag is one line naming the flag; the usage is printed only for a wrong flag (unknown,
    missing, or without its value)."""
    if _BAD_VALUE.match(message) and not _WRONG_FLAG.search(message):
      self.exit(2, f'error: {message}\n')
    super().error(message)

  def parse_known_args(  # type: ignore[override]  # parse_args calls it.
    self,
    args: Sequence[str] | None = None,
    namespace: argparse.Namespace | None = None,
  ) -> tuple[argparse.Namespace, list[str]]:
    parsed = super().parse_known_args(args, namespace)
    # This program's flags are these; absl's (grain reads them in its worker processes) take their defaults.
    from absl import flags

    if not flags.FLAGS.is_parsed():
      flags.FLAGS.mark_as_parsed()
    return parsed


def keywords(function: Callable[..., Any], args: argparse.Namespace, **given: Any) -> dict[str, Any]:
  """The keyword arguments of `function` that `args` holds a flag of the same name for, and `given` (the others,
  or a flag under another name): how a command passes its flags to the library's typed `run(...)`.

  >>> def run(games, *, limit='nodes=1', workers=1, progress=True): ...
  >>> keywords(run, argparse.Namespace(games=['a.pgn'], limit='nodes=5', no_progress=True), progress=False)
  {'games': ['a.pgn'], 'limit': 'nodes=5', 'progress': False}
  """
  parameters = inspect.signature(function).parameters
  unknown = set(given) - set(parameters)
  if unknown:
    raise TypeError(f'{function.__qualname__} takes no {sorted(unknown)}')
  return {**{name: value for name, value in vars(args).items() if name in parameters}, **given}
