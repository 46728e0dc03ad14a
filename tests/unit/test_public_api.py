"""The public API: every public function and method is annotated, and `import searchless` stays light."""

import importlib
import inspect
import pkgutil
import subprocess
import sys
import types
from collections.abc import Callable, Iterator

import searchless

# Parameters that need no annotation.
_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def _modules() -> Iterator[types.ModuleType]:
  """Every module of the package except the config scripts."""
  yield searchless
  for info in pkgutil.walk_packages(searchless.__path__, prefix='searchless.'):
    if info.name.startswith('searchless.configs.'):
      continue
    yield importlib.import_module(info.name)


def _methods(cls: type) -> Iterator[tuple[str, Callable[..., object]]]:
  """(name, function) for the public methods (and __init__) written in `cls`'s own body."""
  for name, member in vars(cls).items():
    if name.startswith('_') and name != '__init__':
      continue
    if isinstance(member, (staticmethod, classmethod)):
      member = member.__func__
    elif isinstance(member, property):
      member = member.fget
    if not inspect.isfunction(member):
      continue
    # Generated or inherited machinery (NamedTuple, dataclass, DoFn, hk.Module) lives elsewhere.
    if member.__module__ != cls.__module__ or member.__qualname__ != f'{cls.__qualname__}.{name}':
      continue
    yield name, member


def _public_callables() -> Iterator[tuple[str, Callable[..., object]]]:
  """(module:qualname, function) for every public function and method defined in the package."""
  for module in _modules():
    for name, member in vars(module).items():
      if name.startswith('_') or getattr(member, '__module__', None) != module.__name__:
        continue
      if callable(member) and hasattr(member, '__wrapped__'):  # functools.cache, jax.jit, ...
        member = inspect.unwrap(member)
      if inspect.isfunction(member):
        yield f'{module.__name__}:{member.__qualname__}', member
      elif inspect.isclass(member):
        for _, method in _methods(member):
          yield f'{module.__name__}:{method.__qualname__}', method


def _missing(function: Callable[..., object]) -> list[str]:
  """The parameters (and 'return') of `function` that have no annotation."""
  signature = inspect.signature(function)
  missing = [
    parameter.name
    for index, parameter in enumerate(signature.parameters.values())
    if parameter.kind not in _VARIADIC
    and not (index == 0 and parameter.name in ('self', 'cls'))
    and parameter.annotation is inspect.Parameter.empty
  ]
  if signature.return_annotation is inspect.Signature.empty and function.__name__ != '__init__':
    missing.append('return')
  return missing


def test_public_functions_are_annotated():
  checked, offenders = 0, []
  for name, function in _public_callables():
    checked += 1
    if missing := _missing(function):
      offenders.append(f'{name} ({", ".join(missing)})')
  assert checked > 100  # The walk found the package.
  assert not offenders, f'{len(offenders)} public functions lack annotations:\n' + '\n'.join(offenders)


def test_public_names_resolve():
  for name in searchless.__all__:
    assert getattr(searchless, name) is not None, name
  assert set(searchless.__all__) <= set(dir(searchless))


def test_import_is_light():
  code = 'import sys, searchless; print(sorted(m for m in ("jax", "apache_beam") if m in sys.modules))'
  result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)
  assert result.stdout.strip() == '[]', result.stdout + result.stderr
