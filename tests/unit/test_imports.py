"""The package's imports flow one way: no circles, and no import from a lower layer to a higher one.

Every ``import searchless...`` / ``from searchless... import ...`` in the package's
source counts, wherever it stands (module top, a function, ``if TYPE_CHECKING``), and so
does every module the source loads by name through `importlib`
(``importlib.import_module('searchless.x')``, ``importlib.resources.files('searchless.x')``).
"""

import ast
import collections
import importlib.resources
import io
import pathlib
import re
import tokenize

# The layer order (lowest first), written once: a module may import its own layer and those below it.
LAYERS = (
  ('plumbing',),  # Paths, HTTP, atomic writes, locks, output folders, the parser, errors, progress: no chess.
  ('core',),
  ('engines', 'model'),
  ('configs',),  # The experiment configs: config values (core) and the model's fields (model).
  ('data',),
  ('play',),
  ('evaluation',),
  ('training',),
  ('report',),
  ('pipelines',),
  ('commands',),
)
RANK = {package: rank for rank, packages in enumerate(LAYERS) for package in packages}
MAX_LINES = 400  # Lines of code of any module (`_code_lines`): split by concern beyond it.

ROOT = pathlib.Path(str(importlib.resources.files('searchless')))
# Packages whose folder is elsewhere in the repository (pyproject's package-dir); inside ROOT in a wheel.
MAPPED = ('searchless.configs', 'searchless.pipelines')


def _modules() -> dict[str, pathlib.Path]:
  modules = {}
  roots = [('searchless', ROOT)] + [(name, pathlib.Path(str(importlib.resources.files(name)))) for name in MAPPED]
  for package, root in roots:
    for path in root.rglob('*.py'):
      parts = (*package.split('.'), *path.relative_to(root).with_suffix('').parts)
      if parts[-1] == '__init__':
        parts = parts[:-1]
      modules['.'.join(parts)] = path
  return modules


MODULES = _modules()


def _resolve(name: str) -> str:
  """The module `name` is, or the package it is an attribute of."""
  while name not in MODULES and '.' in name:
    name = name.rpartition('.')[0]
  return name


IMPORTLIB_LOADS = ('import_module', 'files')  # importlib.import_module(NAME), importlib.resources.files(NAME).


def _loaded_by_name(node: ast.Call) -> str | None:
  """The module an importlib call loads by a literal name, if `node` is one."""
  func = node.func
  called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ''
  if called in IMPORTLIB_LOADS and node.args and isinstance(node.args[0], ast.Constant):
    name = node.args[0].value
    # The package itself (`files('searchless')`: its data) is no dependency of one layer on another.
    return name if isinstance(name, str) and name.startswith('searchless.') else None
  return None


def _imports(name: str, path: pathlib.Path) -> set[str]:
  package = name if path.name == '__init__.py' else name.rpartition('.')[0]
  found = set()
  for node in ast.walk(ast.parse(path.read_text(), str(path))):
    if isinstance(node, ast.Call) and (loaded := _loaded_by_name(node)):
      found.add(_resolve(loaded))
    elif isinstance(node, ast.Import):
      found |= {_resolve(a.name) for a in node.names if a.name.startswith('searchless')}
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ''
      if node.level:
        parts = package.split('.')[: len(package.split('.')) - node.level + 1]
        base = '.'.join(parts + ([base] if base else []))
      if base.startswith('searchless'):
        found |= {_resolve(f'{base}.{a.name}') for a in node.names}
  return found - {name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _layer(name: str) -> int | None:
  parts = name.split('.')
  return RANK.get(parts[1]) if len(parts) > 1 else None


DATA_PACKAGES = ('samples',)  # Package data only: no code of their own.


def test_every_package_with_code_has_a_layer():
  packages = {p.name for p in ROOT.iterdir() if (p / '__init__.py').exists()} | {m.split('.')[1] for m in MAPPED}
  assert packages - set(RANK) == set(DATA_PACKAGES)
  assert [p.name for name in DATA_PACKAGES for p in (ROOT / name).glob('*.py')] == ['__init__.py']


def _upward(graph: dict[str, set[str]]) -> list[str]:
  return sorted(
    f'{a} -> {b}'
    for a, targets in graph.items()
    for b in targets
    if _layer(a) is not None and _layer(b) is not None and _layer(b) > _layer(a)
  )


def test_no_import_goes_up_a_layer():
  assert _upward(GRAPH) == []


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
  """A circle of imports, if there is one (depth-first search)."""
  state: dict[str, int] = collections.defaultdict(int)  # 0 new, 1 on the stack, 2 done.
  stack: list[str] = []

  def visit(node: str) -> list[str] | None:
    state[node] = 1
    stack.append(node)
    for target in sorted(graph.get(node, ())):
      if state[target] == 1:
        return stack[stack.index(target) :] + [target]
      if state[target] == 0 and (found := visit(target)):
        return found
    stack.pop()
    state[node] = 2
    return None

  for node in sorted(graph):
    if state[node] == 0 and (found := visit(node)):
      return found
  return None


def test_no_circle_of_imports():
  assert _cycle(GRAPH) is None


def test_the_walk_follows_importlib_loads(tmp_path):
  source = tmp_path / 'm.py'
  source.write_text(
    "import importlib.resources\nimportlib.resources.files('searchless.configs').iterdir()\n"
    "importlib.import_module('searchless.play.player')\n"
  )
  assert _imports('searchless.core.m', source) == {'searchless.configs', 'searchless.play.player'}
  assert _upward({'searchless.core.m': _imports('searchless.core.m', source)}) == [
    'searchless.core.m -> searchless.configs',
    'searchless.core.m -> searchless.play.player',
  ]


def _repository_tools_named(path: pathlib.Path) -> list[str]:
  """The repository's own tools (`campaign`, `benchmarks`) that `path` imports, or names in a string outside its
  docstrings (a script it would run)."""
  tree = ast.parse(path.read_text(), str(path))
  docstrings = {
    id(n.body[0].value)
    for n in ast.walk(tree)
    if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
    and n.body
    and isinstance(n.body[0], ast.Expr)
    and isinstance(n.body[0].value, ast.Constant)
  }
  found = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      found += [a.name for a in node.names if a.name.split('.')[0] in ('campaign', 'benchmarks')]
    elif (
      isinstance(node, ast.ImportFrom)
      and not node.level
      and (node.module or '').split('.')[0] in ('campaign', 'benchmarks')
    ):
      found.append(node.module or '')
    elif (
      isinstance(node, ast.Constant)
      and isinstance(node.value, str)
      and id(node) not in docstrings
      and 'benchmarks/' in node.value
      and '.py' in node.value
    ):
      found.append(node.value)
  return found


def test_the_package_uses_none_of_the_repository_tools():
  """The wheel holds what a user runs: no module imports the campaign or a benchmark, or runs a benchmark script."""
  assert {name: used for name, path in MODULES.items() if (used := _repository_tools_named(path))} == {}


def test_the_checks_find_what_they_look_for():
  looped = {'searchless.model.a': {'searchless.model.b'}, 'searchless.model.b': {'searchless.model.a'}}
  assert _cycle(looped) == ['searchless.model.a', 'searchless.model.b', 'searchless.model.a']
  assert _upward({'searchless.core.x': {'searchless.play.y'}}) == ['searchless.core.x -> searchless.play.y']


def test_the_walk_sees_imports_wherever_they_stand():
  assert 'searchless.model.network' in GRAPH['searchless.training.step']  # At the top.
  assert 'searchless.training.train' in GRAPH['searchless.commands.train']  # Inside a function.
  assert 'searchless.model.config' in GRAPH['searchless.model.graph']  # from a module import a name.
  assert 'searchless.data.annotate' in GRAPH['searchless.pipelines.annotate']  # A mapped package.


def test_one_module_knows_the_models_kinds():
  """`model.network` builds either kind; the transformer and the graph model do not know each other."""
  assert {'searchless.model.transformer', 'searchless.model.graph'} <= GRAPH['searchless.model.network']
  kinds = {'searchless.model.transformer', 'searchless.model.graph', 'searchless.model.network'}
  assert GRAPH['searchless.model.transformer'] & kinds == set()
  assert GRAPH['searchless.model.graph'] & kinds == set()


NOT_CODE = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)


def _code_lines(source: str) -> int:
  """The lines of `source` that hold code: not docstrings (of the module, a class or a function), comments or
  blank lines. A line with code and a comment counts; every line of a string that is not a docstring counts."""
  docstrings = {
    (n.body[0].value.lineno, n.body[0].value.col_offset)
    for n in ast.walk(ast.parse(source))
    if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
    and n.body
    and isinstance(n.body[0], ast.Expr)
    and isinstance(n.body[0].value, ast.Constant)
    and isinstance(n.body[0].value.value, str)
  }
  lines: set[int] = set()
  for token in tokenize.generate_tokens(io.StringIO(source).readline):
    if token.type not in NOT_CODE and not (token.type == tokenize.STRING and token.start in docstrings):
      lines.update(range(token.start[0], token.end[0] + 1))
  return len(lines)


def test_code_lines_leave_out_docstrings_comments_and_blank_lines():
  source = (
    '"""A module.\n\nIts docstring."""\n\n# A comment.\nx = 1  # Code and a comment.\ns = """a\nb"""\n\n\n'
    'class C:\n  """A class."""\n\n  def f(self):\n    """A method."""\n    return x\n'
  )
  assert _code_lines(source) == 6  # x = 1, the two lines of s, class, def, return.


def test_every_module_is_at_most_400_lines_of_code():
  """Every module of the package has at most 400 lines of code: docstrings, comments and blank lines are not
  counted (`_code_lines`), so explaining code never pushes a module to a split."""
  long = {name: n for name, path in MODULES.items() if (n := _code_lines(path.read_text())) > MAX_LINES}
  assert long == {}


REPO = pathlib.Path(__file__).resolve().parents[2]


def _layers_of_layout(text: str) -> tuple[tuple[str, ...], ...]:
  """The layer order docs/layout.md states: ``core → engines, model → ...``, after "in this layer order (...):"."""
  stated = re.search(r'in this layer order \([^)]*\): (.*?)\.', text, re.DOTALL)
  assert stated, 'docs/layout.md states no layer order'
  return tuple(tuple(p.strip() for p in layer.split(',')) for layer in ' '.join(stated[1].split()).split('→'))


def _layers_of_docstring(text: str) -> tuple[tuple[str, ...], ...]:
  """The layer order the package's docstring states: `core` (...) -> `engines` (...), `model` (...) -> ..."""
  paragraph = text[text.index('in their import layers') :].split('\n\n', 1)[0]
  while re.search(r'\([^()]*\)', paragraph):
    paragraph = re.sub(r'\([^()]*\)', '', paragraph)  # The descriptions, innermost first.
  return tuple(tuple(re.findall(r'`(\w+)`', layer)) for layer in paragraph.split('->'))


def test_the_docs_state_the_layer_order_the_test_holds():
  assert _layers_of_layout((REPO / 'docs' / 'layout.md').read_text()) == LAYERS
  import searchless

  assert _layers_of_docstring(searchless.__doc__ or '') == LAYERS
  drifted = 'in this layer order (the test): core → engines, model → data → configs, report.'
  assert _layers_of_layout(drifted) == (('core',), ('engines', 'model'), ('data',), ('configs', 'report'))
