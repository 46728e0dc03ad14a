"""The package list in pyproject.toml: every package of the repository, from its own folder, nothing else."""

import importlib.resources
import os
import pathlib
import tomllib

REPO = pathlib.Path(__file__).resolve().parents[2]


def _pyproject() -> dict:
  return tomllib.loads((REPO / 'pyproject.toml').read_text())


def _folder(package: str, mapping: dict[str, str]) -> pathlib.Path:
  for prefix, folder in mapping.items():
    if package == prefix or package.startswith(prefix + '.'):
      return (
        REPO / folder / pathlib.Path(*package[len(prefix) + 1 :].split('.')) if package != prefix else REPO / folder
      )
  return REPO / pathlib.Path(*package.split('.'))


def _code_and_data_folders(mapping: dict[str, str]) -> tuple[set[str], set[str]]:
  """(packages with an __init__.py, folders of package data) as dotted names, from the tree.

  A data folder is one without an __init__.py whose dotted name Python could import (setuptools warns
  "Package would be ignored" for each that the package list leaves out); names with a dot, such as
  orbax's `ocdbt.process_0`, are not importable and ship through their parent's package data.
  """
  code, data = set(), set()
  for root, package in [(REPO / 'searchless', 'searchless'), *((REPO / f, p) for p, f in mapping.items())]:
    for folder, subfolders, files in os.walk(root):  # Symlinks are not followed.
      subfolders[:] = [d for d in subfolders if d != '__pycache__']
      parts = pathlib.Path(folder).relative_to(root).parts
      if not all(part.isidentifier() for part in parts):
        continue
      name = '.'.join((package, *parts))
      (code if '__init__.py' in files else data).add(name)
  return code, data


def test_every_package_and_data_folder_is_listed_with_its_folder():
  setup = _pyproject()['tool']['setuptools']
  mapping = setup['package-dir']
  listed = set(setup['packages'])
  code, data = _code_and_data_folders(mapping)
  assert listed == code | data
  assert all((_folder(p, mapping) / '__init__.py').exists() for p in code)


def test_the_shipped_models_are_package_data():
  patterns = _pyproject()['tool']['setuptools']['package-data']['searchless']
  for name in ('pretrained', 'pretrained_transformer'):
    assert f'{name}/**/*' in patterns
    assert (REPO / 'searchless' / name / 'MODEL_CARD.md').exists()


def test_mapped_packages_import_from_their_folders():
  for package, folder in _pyproject()['tool']['setuptools']['package-dir'].items():
    assert pathlib.Path(str(importlib.resources.files(package))).resolve() == (REPO / folder).resolve()
