"""Every command's --help: each default shown once, and only where it says something."""

import importlib
import pkgutil
import re

import pytest

import searchless.commands


def _parsers():
  for info in pkgutil.iter_modules(searchless.commands.__path__):
    module = importlib.import_module(f'searchless.commands.{info.name}')
    if hasattr(module, '_parser'):
      yield pytest.param(module._parser, id=info.name)  # pylint: disable=protected-access


@pytest.mark.parametrize('parser', list(_parsers()))
def test_help_shows_each_default_once_and_never_none(parser):
  text = parser().format_help()
  flat = re.sub(r'\s+', ' ', text)
  assert '(default: None)' not in flat and '(default: [])' not in flat and '(default: False)' not in flat
  for option in re.split(r' (?=--?\w)', flat):  # One option's help at a time.
    assert option.lower().count('default') <= 1, option
