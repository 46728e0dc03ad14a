"""The command line's one look: every console command's parser shows each default once, where it says something,
an output path of the wrong kind (a file where a folder goes, or the reverse) is refused naming its flag, and each
flag has one name (an older spelling is accepted for one release, with a warning: `add_deprecated_alias`).

>>> p = ArgumentParser(prog='x')
>>> _ = p.add_argument('--n', type=int, default=3, help='how many')
>>> _ = p.add_argument('--out', help='where to write')
>>> _ = p.add_argument('--no_progress', action='store_true', help='no progress bar')
>>> _ = p.add_argument('--draw', type=int, default=None, help='adjudicate draws (default: off)')
>>> print('\\n'.join(line.strip() for line in p.format_help().splitlines()[-4:]))
--n N          how many (default: 3)
--out OUT      where to write
--no_progress  no progress bar
--draw DRAW    adjudicate draws (default: off)
"""

import argparse
from collections.abc import Callable, Sequence
import inspect
import logging
import os
import re
import sys
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

  def __init__(self, *args: Any, **kwargs: Any) -> None:
    kwargs.setdefault('formatter_class', DefaultsHelpFormatter)
    kwargs['allow_abbrev'] = False
    super().__init__(*args, **kwargs)
    self.deprecated: dict[str, str] = {}  # An older spelling of a flag: its one name now (`add_deprecated_alias`).

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
    if self.deprecated:
      args = self._current_spellings(sys.argv[1:] if args is None else list(args))
    parsed = super().parse_known_args(args, namespace)
    # This program's flags are these; absl's (grain reads them in its worker processes) take their defaults.
    from absl import flags

    if not flags.FLAGS.is_parsed():
      flags.FLAGS.mark_as_parsed()
    return parsed

  def _current_spellings(self, args: list[str]) -> list[str]:
    """`args` with each deprecated spelling of a flag (``--old`` or ``--old=VALUE``; not after ``--``) replaced by
    its current one, and a one-line warning on stderr for each."""
    out: list[str] = []
    for i, arg in enumerate(args):
      if arg == '--':
        return out + args[i:]
      flag, equals, value = arg.partition('=')
      if flag in self.deprecated:
        print(f'warning: {flag} is deprecated; use {self.deprecated[flag]}', file=sys.stderr)
        arg = self.deprecated[flag] + equals + value
      out.append(arg)
    return out


def add_dtype(parser: argparse.ArgumentParser) -> None:
  """Adds ``--dtype`` (default auto): the compute dtype of a command that runs a model."""
  parser.add_argument(
    '--dtype',
    default='auto',
    choices=('auto', 'float32', 'bfloat16'),
    help='Compute dtype (auto: bfloat16 on GPU/TPU, float32 on CPU).',
  )


def add_log_level(parser: argparse.ArgumentParser, what: str = 'the stderr log') -> None:
  """Adds ``--log_level`` (default WARNING): the level of `what`, which `start_logging` sets up."""
  parser.add_argument('--log_level', default='WARNING', help=f'Log level of {what}.')


def start_logging(level: str) -> None:
  """Logs at `level` (a ``--log_level``) to stderr, each line with its time, logger and level."""
  logging.basicConfig(stream=sys.stderr, level=level.upper(), format='%(asctime)s %(name)s %(levelname)s: %(message)s')


def add_deprecated_alias(parser: argparse.ArgumentParser, old: str, new: str) -> None:
  """Accepts `old`, an earlier spelling of `parser`'s flag `new`, for one release: given, it is read as `new`, with
  ``warning: OLD is deprecated; use NEW`` on stderr; the help shows `new` alone.

  >>> p = ArgumentParser(prog='x')
  >>> _ = p.add_argument('--out')
  >>> add_deprecated_alias(p, '--output_dir', '--out')
  >>> import contextlib, io
  >>> with contextlib.redirect_stderr(io.StringIO()) as said:
  ...   args = p.parse_args(['--output_dir=runs/a'])
  >>> args.out, said.getvalue()
  ('runs/a', 'warning: --output_dir is deprecated; use --out\\n')
  """
  if not isinstance(parser, ArgumentParser):
    raise TypeError(f'{parser.prog}: deprecated aliases need searchless.plumbing.cli.ArgumentParser')
  if new not in parser._option_string_actions:  # pylint: disable=protected-access
    raise ValueError(f'{parser.prog} has no flag {new}')
  parser.deprecated[old] = new


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
