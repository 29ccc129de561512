"""The code reads as a newcomer reads it: objects built whole, functions that fit a screen.

Checked with `ast` over the packages (roberta_tf/ and data_prep/) and the benchmarks/ scripts
(a second codebase only in where it lives), so a new module is held to the same rules without
being listed:
- every attribute a class sets on `self` is set in its `__init__` (or `__post_init__`), so what
  an object has never depends on which method ran first. Keras layers' `build` (weights made
  once the input shape is known: Keras's own contract) is the one exception;
- no function longer than MAX_FUNCTION_LINES (a screen), nested functions counted in it;
- no module longer than MAX_MODULE_LINES;
- no README line longer than MAX_README_LINE characters (it is read in a terminal and a diff).
"""

import ast
import os

import pytest

from tests.conftest import REPO

PACKAGES = ("roberta_tf", "data_prep", "benchmarks")
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 400
MAX_README_LINE = 120
CONSTRUCTORS = ("__init__", "__post_init__")
# Keras creates a layer's weights in build(input_shape); the attributes it sets there are the
# framework's contract, not a half-built object.
LATE_BUILDERS = ("build",)


def _modules():
  for package in PACKAGES:
    for folder, _, names in os.walk(os.path.join(REPO, package)):
      for name in sorted(names):
        if name.endswith(".py"):
          path = os.path.join(folder, name)
          yield os.path.relpath(path, REPO), path


def _parse(path):
  with open(path, encoding="utf-8") as f:
    source = f.read()
  return source, ast.parse(source, filename=path)


def _self_attributes(function):
  """The names assigned as `self.<name> = ...` (also augmented, annotated, tuple targets)."""
  names = set()
  for node in ast.walk(function):
    if isinstance(node, ast.Assign):
      targets = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
      targets = [node.target]
    else:
      continue
    for target in targets:
      for part in ast.walk(target):
        if (isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name)
            and part.value.id == "self"):
          names.add(part.attr)
  return names


def attributes_set_outside_constructor(tree):
  """[(class, attribute, method)] for each attribute first set outside the constructor."""
  found = []
  for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
    methods = [n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    built = set()
    for method in methods:
      if method.name in CONSTRUCTORS + LATE_BUILDERS:
        built |= _self_attributes(method)
    for method in methods:
      if method.name in CONSTRUCTORS + LATE_BUILDERS:
        continue
      for name in sorted(_self_attributes(method) - built):
        found.append((cls.name, name, method.name))
  return found


def long_functions(tree, limit=MAX_FUNCTION_LINES):
  """[(function, lines)] for each function (nested ones included) longer than `limit`."""
  return [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(tree)
          if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
          and node.end_lineno - node.lineno + 1 > limit]


def test_every_attribute_is_set_in_the_constructor():
  found = []
  for rel, path in _modules():
    _, tree = _parse(path)
    found += [f"{rel}: {cls}.{name} first set in {method}()"
              for cls, name, method in attributes_set_outside_constructor(tree)]
  assert not found, "set these in __init__ (or pass them in):\n" + "\n".join(found)


def test_no_function_is_longer_than_a_screen():
  found = []
  for rel, path in _modules():
    _, tree = _parse(path)
    found += [f"{rel}: {name}() is {lines} lines" for name, lines in long_functions(tree)]
  assert not found, (f"split these (at most {MAX_FUNCTION_LINES} lines each):\n"
                     + "\n".join(found))


def test_no_module_is_longer_than_the_limit():
  found = []
  for rel, path in _modules():
    source, _ = _parse(path)
    lines = len(source.splitlines())
    if lines > MAX_MODULE_LINES:
      found.append(f"{rel}: {lines} lines")
  assert not found, f"split these (at most {MAX_MODULE_LINES} lines each):\n" + "\n".join(found)


def test_no_readme_line_is_longer_than_the_limit():
  with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:  # local-only: the checkout
    found = [f"README.md:{n}: {len(line)} characters" for n, line in enumerate(f, 1)
             if len(line.rstrip("\n")) > MAX_README_LINE]
  assert not found, f"wrap these (at most {MAX_README_LINE} characters):\n" + "\n".join(found)


@pytest.mark.parametrize("source, expected", [
    ("class A:\n  def __init__(self):\n    self.a = 1\n  def f(self):\n    self.a = 2\n", []),
    ("class A:\n  def __init__(self):\n    pass\n  def attach(self, x):\n    self.x = x\n",
     [("A", "x", "attach")]),
    ("class L:\n  def build(self, shape):\n    self.w = 1\n  def call(self, x):\n"
     "    self.w += 1\n", []),
    ("class A:\n  def f(self):\n    self.a, (self.b, c) = 1, (2, 3)\n",
     [("A", "a", "f"), ("A", "b", "f")]),
])
def test_the_attribute_check_finds_what_it_forbids(source, expected):
  assert attributes_set_outside_constructor(ast.parse(source)) == expected


def test_the_length_check_counts_nested_functions():
  body = "\n".join(f"    x{i} = {i}" for i in range(59))
  tree = ast.parse(f"def outer():\n  def inner():\n{body}\n  return inner\n")
  assert long_functions(tree) == [("outer", 62)]
  assert long_functions(tree, limit=62) == []
