"""The package list in pyproject.toml: every package of the repository, from its own folder, nothing else."""

import importlib.resources
import pathlib
import tomllib

REPO = pathlib.Path(__file__).resolve().parents[2]


def _pyproject() -> dict:
  return tomllib.loads((REPO / 'pyproject.toml').read_text())


def _folder(package: str, mapping: dict[str, str]) -> pathlib.Path:
  for prefix, folder in mapping.items():
    if package == prefix or package.startswith(prefix + '.'):
      return REPO / folder / pathlib.Path(*package[len(prefix) + 1:].split('.')) if package != prefix else REPO / folder
  return REPO / pathlib.Path(*package.split('.'))


def test_every_package_is_listed_with_its_folder():
  setup = _pyproject()['tool']['setuptools']
  mapping = setup['package-dir']
  listed = set(setup['packages'])
  found = set()
  for root, package in [(REPO / 'searchless', 'searchless'), *((REPO / f, p) for p, f in mapping.items())]:
    for init in root.rglob('__init__.py'):
      parts = init.parent.relative_to(root).parts
      found.add('.'.join((package, *parts)))
  assert listed == found
  assert all((_folder(p, mapping) / '__init__.py').exists() for p in listed)


def test_mapped_packages_import_from_their_folders():
  for package, folder in _pyproject()['tool']['setuptools']['package-dir'].items():
    assert pathlib.Path(str(importlib.resources.files(package))).resolve() == (REPO / folder).resolve()
