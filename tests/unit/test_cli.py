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


@pytest.mark.parametrize(
  'command, argv, flag, kind',
  [
    ('commands.train', ['--config', 'tiny', '--workdir', '{file}'], '--workdir', 'file, not a folder'),
    (
      'commands.evaluate',
      ['--checkpoint', 'pretrained', '--data', 'x.bag', '--out', '{file}'],
      '--out',
      'file, not a folder',
    ),
    (
      'commands.tournament',
      ['--agent', 'random', '--agent', 'random', '--out', '{file}'],
      '--out',
      'file, not a folder',
    ),
    ('commands.openings', ['--out', '{folder}'], '--out', 'folder, not a file'),
    ('pipelines.selfplay', ['--checkpoint', 'pretrained', '--out', '{folder}'], '--out', 'folder, not a file'),
  ],
)
def test_an_output_of_the_wrong_kind_is_refused_naming_its_flag(tmp_path, capsys, command, argv, flag, kind):
  (tmp_path / 'a_file').write_text('x')
  paths = {'file': str(tmp_path / 'a_file'), 'folder': str(tmp_path)}
  module = importlib.import_module(f'searchless.{command}')
  with pytest.raises(SystemExit) as exit:
    module.main([a.format(**paths) for a in argv])
  assert exit.value.code == 2
  lines = capsys.readouterr().err.strip().splitlines()
  assert len(lines) == 1, lines  # The one line, without the usage (only a wrong flag shows it).
  last = lines[0]
  assert last.endswith(f'error: argument {flag}: {paths["file" if "file," in kind else "folder"]!r} is a {kind}')


@pytest.mark.parametrize(
  'command, canonical, old, dest, value',
  [
    ('pipelines.annotate', '--out', '--output_dir', 'output_dir', 'runs/a'),
    ('pipelines.import_labels', '--out', '--output_dir', 'output_dir', 'runs/a'),
    ('commands.puzzles_data', '--out', '--output', 'output', 'dev.csv'),
    ('pipelines.selfplay', '--out', '--output', 'output', 'games.pgn'),
    ('commands.openings', '--engine_path', '--engine', 'engine', 'sf'),
    ('commands.tournament', '--engine_path', '--engine', 'engine', 'sf'),
    ('commands.improve', '--no_progress', '--quiet', 'quiet', None),
    ('commands.puzzles_data', '--num', '--limit', 'limit', '7'),
    ('commands.demo', '--config', '--preset', 'config', '9m'),
  ],
)
def test_one_name_per_flag_and_an_old_spelling_read_as_it_with_a_warning(capsys, command, canonical, old, dest, value):
  parser = importlib.import_module(f'searchless.{command}')._parser()  # pylint: disable=protected-access
  option = parser._option_string_actions[canonical]  # pylint: disable=protected-access
  assert (option.option_strings, option.dest) == ([canonical], dest)  # One name, which --help shows.
  assert not re.search(f'{old}\\b(?!_)', parser.format_help())
  given = [old] if value is None else [old, value, f'{old}={value}', '--', old]
  read = [canonical] if value is None else [canonical, value, f'{canonical}={value}', '--', old]
  assert parser._current_spellings(given) == read  # What argparse parses.  # pylint: disable=protected-access
  assert capsys.readouterr().err == f'warning: {old} is deprecated; use {canonical}\n' * (1 if value is None else 2)


def test_a_wrong_flag_still_shows_the_usage(tmp_path, capsys):
  (tmp_path / 'a.epd').write_text('')
  module = importlib.import_module('searchless.commands.epd')
  with pytest.raises(SystemExit) as exit:
    module.main(['--suite', str(tmp_path / 'a.epd'), '--agent', 'random', '--out', 'o', '--bogus'])
  err = capsys.readouterr().err
  assert exit.value.code == 2 and err.startswith('usage: searchless-epd') and 'unrecognized arguments: --bogus' in err


@pytest.mark.parametrize(
  'command, argv, flag',
  [
    ('epd', ['--suite', '{missing}', '--agent', 'random', '--out', '{out}'], '--suite'),
    ('puzzles', ['--puzzles', '{missing}', '--agent', 'random', '--out', '{out}'], '--puzzles'),
    ('puzzles_data', ['--puzzles', '{missing}', '--out', '{out}/p.csv'], '--puzzles'),
  ],
)
def test_a_missing_input_file_is_one_line_naming_its_flag_and_leaves_no_output(tmp_path, capsys, command, argv, flag):
  paths = {'missing': str(tmp_path / 'nope.txt'), 'out': str(tmp_path / 'out')}
  module = importlib.import_module(f'searchless.commands.{command}')
  with pytest.raises(SystemExit) as exit:
    module.main([a.format(**paths) for a in argv])
  assert exit.value.code == 2
  assert capsys.readouterr().err == f'error: argument {flag}: {paths["missing"]!r}: no such file\n'
  assert not (tmp_path / 'out').exists()


def test_an_epd_file_that_is_not_utf8_is_one_line_naming_its_file_and_line(tmp_path, capsys):
  suite = tmp_path / 'bad.epd'
  suite.write_bytes(b'8/8/8/8/8/8/8/K6k w - - bm Kb1; id "a";\n\xff\xfe not text\n')
  module = importlib.import_module('searchless.commands.epd')
  with pytest.raises(SystemExit) as exit:
    module.main(['--suite', str(suite), '--agent', 'random', '--out', str(tmp_path / 'out'), '--no_progress'])
  err = capsys.readouterr().err
  assert exit.value.code == 2 and len(err.splitlines()) == 1
  assert err.startswith(f"error: {suite}:2: not UTF-8 text ('utf-8' codec can't decode byte 0xff in position 0")


def test_an_interrupt_is_one_line_and_exit_status_130(capsys):
  from searchless.plumbing import errors

  for raised, said in (
    (KeyboardInterrupt(), 'stopped before the end'),
    (KeyboardInterrupt('saved: rerun'), 'saved: rerun'),
  ):
    with pytest.raises(SystemExit) as exit:
      with errors.one_line_errors():
        raise raised
    assert exit.value.code == 130 and capsys.readouterr().err == f'interrupted; {said}\n'


def test_a_user_error_is_one_line_and_a_bug_keeps_its_traceback(capsys, monkeypatch):
  import errno

  from searchless.plumbing import errors

  with pytest.raises(SystemExit) as exit:
    with errors.one_line_errors():
      raise errors.BadInput('--num must be >= 1, got 0')
  assert (exit.value.code, capsys.readouterr().err) == (2, 'error: --num must be >= 1, got 0\n')
  assert issubclass(errors.BadInput, ValueError) and issubclass(errors.MissingInput, FileNotFoundError)
  for bug in (ValueError('Incompatible shapes for broadcasting: (3,) and (4,)'), OSError(errno.EIO, 'I/O error')):
    with pytest.raises(type(bug)):  # Not a SystemExit: Python prints the traceback, exit status 1.
      with errors.one_line_errors():
        raise bug
    assert capsys.readouterr().err == ''
  monkeypatch.setattr('sys.argv', ['searchless-puzzles', '--agent', 'random', '--out', 'runs/a'])
  with pytest.raises(PermissionError):  # A path it names is said first, with the flag that gave it.
    with errors.one_line_errors():
      raise OSError(errno.EACCES, 'Permission denied', 'runs/a/journal.jsonl')
  assert capsys.readouterr().err == (
    'error: runs/a/journal.jsonl (--out): Permission denied (not a checked input; the traceback follows)\n'
  )


def _script_parsers():
  """Every console script's own parser, by script name (pyproject.toml)."""
  import tomllib

  from helpers import ROOT

  scripts = tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']['scripts']
  for script, target in sorted(scripts.items()):
    module = importlib.import_module(target.partition(':')[0])
    yield pytest.param(module._parser, id=script)  # pylint: disable=protected-access


def _with_subparsers(parser):
  import argparse

  yield parser
  for action in parser._actions:  # pylint: disable=protected-access
    if isinstance(action, argparse._SubParsersAction):  # pylint: disable=protected-access
      for sub in action.choices.values():
        yield from _with_subparsers(sub)


@pytest.mark.parametrize('parser', list(_script_parsers()))
def test_no_command_takes_an_abbreviated_flag(parser):
  for p in _with_subparsers(parser()):
    longs = sorted({s for a in p._actions for s in a.option_strings if s.startswith('--')})  # pylint: disable=protected-access
    assert longs
    assert not p.allow_abbrev
    for action in p._actions:  # pylint: disable=protected-access  # Nothing required: only the flag is parsed.
      action.required = False
      if not action.option_strings and action.nargs in (None, '+'):
        action.nargs, action.choices = '*', None
    for flag in longs:  # Each long flag less its last letter, where no other flag is spelt so.
      prefix = flag[:-1]
      if len(prefix) > 3 and prefix not in longs:
        _, rest = p.parse_known_args([prefix])
        assert rest[0] == prefix, (p.prog, flag)  # Left unknown, not taken for the flag it begins.


def test_beam_refuses_a_flag_that_nobody_knows():
  from searchless.data import beam_job

  with pytest.raises(ValueError, match=r'^unrecognized arguments: --num --num_shard \(neither'):
    beam_job.checked_options(['--num', '0', '--num_shard', '2', '--runner', 'DirectRunner'])
  options = beam_job.checked_options(['--runner', 'DirectRunner', '--direct_num_workers', '2'])
  assert options.get_all_options()['direct_num_workers'] == 2


def test_a_dashed_config_override_points_to_the_documented_form(capsys):
  from searchless.commands import train

  with pytest.raises(SystemExit) as exit:
    train.main(['--config', 'tiny', '--workdir', 'unused', '--config.model.num_layers=abc'])
  assert exit.value.code == 2
  assert capsys.readouterr().err == (
    'error: unknown flag --config.model.num_layers=abc: write the override as model.num_layers=abc\n'
  )  # Was argparse's usage and 'unrecognized arguments'.
