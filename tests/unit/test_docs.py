"""The README and docs/ as a stranger reads them: the Python examples run, every command line's flags exist."""

import argparse
import functools
import importlib
import importlib.util
import inspect
import pathlib
import re
import shlex
import tomllib

import pytest

from helpers import ROOT

PAGES = [
  ROOT / 'README.md',
  *sorted((ROOT / 'docs').glob('*.md')),
  *(
    ROOT / page
    for page in (
      'benchmarks/README.md',
      'data/README.md',
      'tools/README.md',
      'searchless/samples/README.md',
      'searchless/pretrained/MODEL_CARD.md',
      'searchless/pretrained_transformer/MODEL_CARD.md',
    )
  ),
]
FENCE = re.compile(r'^```(\w*)\n(.*?)^```', re.MULTILINE | re.DOTALL)
INLINE = re.compile(r'`(searchless-[a-z-]+ [^`]*)`')
STOP = {'|', '||', '&&', ';', '&', '#', '>', '2>'}  # Where a command line ends.


def _scripts() -> dict[str, str]:
  return tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']['scripts']


@functools.cache
def _parsers(script: str) -> tuple[argparse.ArgumentParser, ...]:
  """The command's own parser; for the Beam jobs (a pipeline whose unknown flags go to Beam), Beam's options too."""
  module = importlib.import_module(_scripts()[script].partition(':')[0])
  own = module._parser()
  if not module.__name__.startswith('searchless.pipelines.') or 'parse_known_args' not in inspect.getsource(module):
    return (own,)
  from apache_beam.options import pipeline_options
  import apache_beam.runners.dask.dask_runner  # noqa: F401  # Registers DaskOptions (--dask_client_address).

  beam = argparse.ArgumentParser(add_help=False)
  stack = [pipeline_options.PipelineOptions]
  while stack:
    cls = stack.pop()
    stack.extend(cls.__subclasses__())
    try:
      cls._add_argparse_args(beam)
    except argparse.ArgumentError:  # An option two classes declare.
      pass
  return (own, beam)


def _options(parsers: tuple[argparse.ArgumentParser, ...]) -> set[str]:
  """Each option's spellings (``-h``, ``--help``; an older spelling, still read with a warning, is none of them:
  `cli.add_deprecated_alias`); a command with subcommands (`searchless-strength measure`) has its subcommands'
  options too."""
  options = set()
  for parser in parsers:
    for action in parser._actions:
      if isinstance(action, argparse._SubParsersAction):
        options |= _options(tuple(action.choices.values()))
      else:
        options.update(action.option_strings)
  return options


def _command_lines() -> list[tuple[str, str, list[str]]]:
  """(page, script, its arguments) of every `searchless-*` command line: in shell blocks and in code spans."""
  found = []
  for page in PAGES:
    text = page.read_text()
    snippets = [body for lang, body in FENCE.findall(text) if lang in ('sh', 'bash', '')]
    prose = FENCE.sub('', text)
    lines = [line for snippet in snippets for line in snippet.replace('\\\n', ' ').splitlines()]
    indented = [line for line in prose.replace('\\\n', ' ').splitlines() if line.startswith('    searchless-')]
    lines += indented
    lines += INLINE.findall(prose)
    for line in (line for line in lines if 'searchless-' in line):
      try:
        words = shlex.split(line.replace('…', ''), comments=True)
      except ValueError as e:  # A command line a shell would not read either.
        raise ValueError(f'{page.relative_to(ROOT)}: {line!r}: {e}') from None
      for i, word in enumerate(words):
        if re.fullmatch(r'(\S*/)?searchless-[a-z-]+', word) and (i == 0 or words[i - 1] in STOP):
          args = []
          for arg in words[i + 1 :]:
            if arg in STOP:
              break
            args.append(arg)
          found.append((page.relative_to(ROOT).as_posix(), word.rsplit('/', 1)[-1], args))
  return found


def test_the_pages_show_command_lines():
  pages = {page for page, _, _ in _command_lines()}
  assert 'README.md' in pages and len(pages) >= 5


@pytest.mark.parametrize('page, script, args', _command_lines(), ids=lambda v: v if isinstance(v, str) else None)
def test_every_command_line_names_a_console_script_and_its_flags(page, script, args):
  assert script in _scripts(), f'{page}: {script} is not a console script of pyproject.toml'
  options = _options(_parsers(script))
  flags = [a.split('=', 1)[0] for a in args if a.startswith('--') and a != '--']
  unknown = [f for f in flags if f not in options]
  assert not unknown, f'{page}: {script} has no flag {unknown} by that spelling (its flags: {sorted(options)})'


SPAN = re.compile(r'`([^`]+)`')
COMMAND = re.compile(r'(?<![\w/.-])searchless-[a-z]+(?:-[a-z]+)*')
SENTENCE = re.compile(r'(?<=[.;:])\s+(?=[A-Z`(])')  # Where a sentence of prose ends.


def _prose_flags() -> list[tuple[str, str, str]]:
  """(page, script, flag) of every flag that prose shows in a code span (```--dtype```, not a whole command line)
  after naming a command in the same sentence: the flag is the nearest such command's ("`searchless-evaluate`
  and `searchless-puzzles` take `--dtype`" is a flag of searchless-puzzles)."""
  found = []
  for page in PAGES:
    prose = FENCE.sub('', page.read_text())
    for paragraph in re.split(r'\n\s*\n', prose):
      for sentence in SENTENCE.split(' '.join(paragraph.split())):
        named = [(m.start(), 'script', m[0]) for m in COMMAND.finditer(sentence) if m[0] in _scripts()]
        flags = [
          (m.start(), 'flag', flag)
          for m in SPAN.finditer(sentence)
          if not m[1].lstrip().startswith('searchless-')
          for flag in re.findall(r'(?:^|\s)(--[a-z][\w-]*)', m[1])
        ]
        script = None
        for _, kind, word in sorted(named + flags):
          if kind == 'script':
            script = word
          elif script is not None:
            found.append((page.relative_to(ROOT).as_posix(), script, word))
  return sorted(set(found))


def test_prose_shows_flags_after_their_commands():
  assert ('docs/published.md', 'searchless-evaluate', '--dtype') in _prose_flags()


@pytest.mark.parametrize('page, script, flag', _prose_flags(), ids=lambda v: v if isinstance(v, str) else None)
def test_every_flag_prose_gives_a_command_is_one_of_its_flags(page, script, flag):
  options = _options(_parsers(script))
  assert flag in options, f'{page}: {script} has no flag {flag} by that spelling'


def test_the_pages_name_no_path_a_plain_install_lacks():
  for page in PAGES:
    assert '.venv/bin/searchless' not in page.read_text(), page  # `pip install .` puts the commands on PATH.


PYTHON_PAGES = [p for p in PAGES if any(lang == 'python' for lang, _ in FENCE.findall(p.read_text()))]


def run_python_examples(page: pathlib.Path, capsys) -> None:
  """Each block in a fresh namespace, as a reader pastes it (the shipped models, no files of a run)."""
  for block in (body for lang, body in FENCE.findall(page.read_text()) if lang == 'python'):
    exec(compile(block, str(page.relative_to(ROOT)), 'exec'), {'__name__': '__docs__'})  # noqa: S102
    assert capsys.readouterr().out.strip()  # Each example shows what it computes.


def test_the_readmes_python_example_runs_as_written(capsys):
  """The README's example; the other pages' compile more (search, two players): integration/test_docs_examples.py."""
  run_python_examples(ROOT / 'README.md', capsys)


def test_the_readme_has_a_python_example():
  assert ROOT / 'README.md' in PYTHON_PAGES


def _anchor(heading: str) -> str:
  """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
  return re.sub(r'[^\w\- ]', '', heading.strip().lower()).replace(' ', '-')


def test_every_relative_link_and_anchor_resolves():
  pages = PAGES + [ROOT / 'benchmarks' / 'RESULTS.md', ROOT / 'benchmarks' / 'HISTORY.md']
  pages += sorted((ROOT / 'benchmarks' / 'studies').glob('*.md')) + sorted(
    (ROOT / 'benchmarks' / 'results').glob('*.md')
  )
  broken = []
  for page in pages:
    for target in re.findall(r'\]\(([^)\s]+)\)', FENCE.sub('', page.read_text())):
      if '://' in target or target.startswith('mailto:'):
        continue
      path, _, anchor = target.partition('#')
      resolved = (page.parent / path).resolve() if path else page
      if not resolved.exists():
        broken.append(f'{page.relative_to(ROOT)}: {target}')
        continue
      if anchor and resolved.suffix == '.md':
        headings = re.findall(r'^#+ (.*)$', FENCE.sub('', resolved.read_text()), re.MULTILINE)
        if anchor not in {_anchor(h) for h in headings}:
          broken.append(f'{page.relative_to(ROOT)}: {target}')
  assert not broken


def test_the_pypi_description_stands_alone():
  project = tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']
  text = (ROOT / project['readme']['file']).read_text()
  links = re.findall(r'\]\(([^)]+)\)', text)
  assert links and all(link.startswith('https://') for link in links), links  # No link that breaks on PyPI.


MODEL_CARDS = [ROOT / 'searchless' / name / 'MODEL_CARD.md' for name in ('pretrained', 'pretrained_transformer')]
PATH = re.compile(r'(?<![\w./-])((?:\.\./)*[\w.-]+/[\w./*-]*)')  # A word with a slash: a path, maybe.
MODULE = re.compile(r'`((?:searchless|campaign)(?:\.\w+)+)`')  # A module in a code span.


def _named_but_missing(text: str, folder: pathlib.Path) -> list[str]:
  """The files, folders and modules that `text` (a model card in `folder`) names and the checkout lacks: a path whose
  first part is a top-level entry of the repository or of `folder` must exist there, a path out of the checkout
  (``../``) is missing by definition, and a named module must be importable."""
  tops = {p.name: ROOT for p in ROOT.iterdir() if not p.name.startswith('.')} | {
    p.name: folder for p in folder.iterdir()
  }
  missing = []
  for path in PATH.findall(text):
    first = path.split('/', 1)[0]
    if path.startswith('../') or (first in tops and not list(tops[first].glob(path.rstrip('/')))):
      missing.append(path)
  return missing + [m for m in MODULE.findall(text) if importlib.util.find_spec(m) is None]


def test_the_model_cards_name_only_files_of_the_checkout():
  assert {card.parent.name: _named_but_missing(card.read_text(), card.parent) for card in MODEL_CARDS} == {
    'pretrained': [],
    'pretrained_transformer': [],
  }
  stale = 'the labels of `../shared/data/labels/`, `benchmarks/device_campaign.py` and `searchless.data.board_columns`'
  folder = MODEL_CARDS[0].parent
  assert _named_but_missing(stale, folder) == [
    '../shared/data/labels/',
    'benchmarks/device_campaign.py',
    'searchless.data.board_columns',
  ]
  assert _named_but_missing('`config/config.json`, `campaign/board_columns.py`, `campaign.ship`, 4/20', folder) == []


def test_the_readme_names_every_command_that_does_not_write_with_out():
  text = (ROOT / 'README.md').read_text()
  paragraph = text[text.index('Every command takes `--help`') :].split('\n\n', 1)[0]
  assert '`--out` where it writes' in paragraph
  named = set(re.findall(r'`(searchless-[a-z-]+)', paragraph))
  assert named == {script for script in _scripts() if '--out' not in _options(_parsers(script))}
  convert = [a.dest for p in _parsers('searchless-convert') for a in p._actions if not a.option_strings]
  assert convert == ['input', 'output_dir'] and 'searchless-convert --to board INPUT OUTPUT_DIR' in paragraph


def _current_figure(figure: str) -> str:
  """The value of the row of benchmarks/RESULTS.md's current figures whose figure starts with `figure`."""
  text = (ROOT / 'benchmarks' / 'RESULTS.md').read_text()
  table = text.split('\n## Current figures\n', 1)[1].split('\n## ', 1)[0]
  rows = [[cell.strip() for cell in line.strip().strip('|').split('|')] for line in table.splitlines()]
  values = [row[1] for row in rows if row[0].startswith(figure)]
  assert len(values) == 1, figure
  return values[0]


def test_the_uci_page_quotes_the_measured_overrun_of_a_search():
  worst = re.match(r'(\d+) ms ', _current_figure("a search's worst overrun of its `go` time limit"))
  assert worst and f'at most {worst[1]} ms late' in (ROOT / 'docs' / 'uci.md').read_text()
