"""The Python examples of the docs beside the README's (search, two players: they compile more), run as written."""

import pytest

from helpers import ROOT
from unit.test_docs import PYTHON_PAGES, run_python_examples


@pytest.mark.slow
@pytest.mark.parametrize(
  'page', [p for p in PYTHON_PAGES if p.name != 'README.md'], ids=lambda p: p.relative_to(ROOT).as_posix()
)
def test_every_python_example_runs_as_written(page, capsys):
  run_python_examples(page, capsys)
