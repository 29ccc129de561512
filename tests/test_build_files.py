"""The Bazel BUILD files stay true to the code: a target per file, deps equal to the imports.

BUILD files are written by hand (one per package). This test reads them (they are Starlark, which
Python can execute with the rules stubbed out) and fails, naming the target and the labels to
add or remove, when:
- a .py file has no target, or two, or a target lists a file that is gone;
- a target's kind is wrong (test_*.py → pytest_test, a module that calls app.run and every
  benchmark → py_binary, the rest → py_library);
- a target's first-party `deps` differ from what its file imports (third-party packages come
  from the venv and are not listed);
- a binary that a file runs as `python -m pkg.module` is not in its `data` (or `deps`);
- a test reads test data (tests/testdata, flags/) that its `data` does not name.

Under Bazel this test reads the workspace itself (tests/conftest.py's SOURCE_TREE, found
through a real path; the target is tagged "local" and "external", so it is never cached against
stale BUILD files).
"""

import ast
import dataclasses
import glob
import os
import re
import tomllib

from tests.conftest import SOURCE_TREE as REPO

FOLDERS = ("roberta_tf", "data_prep", "benchmarks", "tests", "tools")
# Shared by every pytest_test (tools/bazel/pytest.bzl adds it), not a target of its own.
RUNNER = "tools/bazel/pytest_main.py"
# A test whose file mentions the key needs the labels in its data.
TEST_DATA = {
    "hf_tiny_dir": {"//tests:hf_roberta_tiny"},
    "HF_TINY": {"//tests:hf_roberta_tiny"},
    "hf_roberta_tiny": {"//tests:hf_roberta_tiny"},
    "modernbert_tiny": {"//tests:modernbert_tiny"},
    "python_docs_small": {"//tests:python_docs_small"},
    "docs_sections": {"//tests:docs_sections"},
    "flag_surfaces": {"//tests:flag_surfaces"},
    # conftest's fixture builds shards from these (its own data has build_shards).
    "train_shards": {"//tests:hf_roberta_tiny", "//tests:python_docs_small"},
    "flags/": {"//flags:flags"},
}


@dataclasses.dataclass
class Target:
  kind: str
  label: str
  srcs: list
  deps: set
  data: set


def _label(package: str, ref: str) -> str:
  """A full label: ":x" in package p → "//p:x"; "//a/b" → "//a/b:b"."""
  if ref.startswith(":"):
    return f"//{package}{ref}"
  if ":" not in ref:
    return f"{ref}:{ref.rsplit('/', 1)[-1]}"
  return ref


def _read_build(package: str) -> list[Target]:
  targets = []

  def rule(kind):
    def add(name, srcs=(), deps=(), data=(), **_):
      if kind == "pytest_test":  # What tools/bazel/pytest.bzl expands to.
        srcs, deps = [f"{name}.py"], [*deps, ":conftest", ":tests"]
      targets.append(Target(kind, f"//{package}:{name}",
                            [os.path.join(package, s) for s in srcs],
                            {_label(package, d) for d in deps},
                            {_label(package, d) for d in data}))
    return add

  def globbed(patterns, **_):
    return [os.path.relpath(p, os.path.join(REPO, package)) for pattern in patterns
            for p in glob.glob(os.path.join(REPO, package, pattern), recursive=True)]

  namespace = {kind: rule(kind) for kind in ("py_library", "py_binary", "py_test",
                                              "pytest_test", "filegroup", "toolchain")}
  namespace.update(load=lambda *a, **k: None, package=lambda **k: None, glob=globbed,
                   exports_files=lambda *a, **k: None, py_runtime=lambda **k: None,
                   test_suite=lambda **k: None,
                   py_runtime_pair=lambda **k: None)
  path = os.path.join(REPO, package, "BUILD")
  with open(path, encoding="utf-8") as f:
    exec(compile(f.read(), path, "exec"), namespace)  # pylint: disable=exec-used
  return targets


def _py_files() -> list[str]:
  out = []
  for folder in FOLDERS:
    for root, dirs, files in os.walk(os.path.join(REPO, folder)):
      dirs[:] = [d for d in dirs if d not in ("__pycache__", "testdata")]
      out += [os.path.relpath(os.path.join(root, f), REPO) for f in files if f.endswith(".py")]
  return sorted(out)


def _module(path: str) -> str:
  module = path[:-3].replace(os.sep, ".")
  return module.removesuffix(".__init__")


def _targets() -> list[Target]:
  packages = sorted({os.path.dirname(p) for p in _py_files()} | {"flags"})
  return [t for package in packages for t in _read_build(package)]


def _by_src():
  return {src: t for t in _targets() if t.kind != "filegroup" for src in t.srcs
          if src.endswith(".py") and src != RUNNER}


def _source(path: str) -> str:
  with open(os.path.join(REPO, path), encoding="utf-8") as f:
    return f.read()


def _imported_files(path: str, modules: dict[str, str]) -> set[str]:
  """The first-party files `path` imports (anywhere in it: lazy imports count too)."""
  found = set()
  for node in ast.walk(ast.parse(_source(path))):
    names = []
    if isinstance(node, ast.Import):
      names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      names = [f"{node.module}.{a.name}" for a in node.names]
    for name in names:
      while name and name not in modules:  # `from pkg.mod import Class` → pkg.mod
        name = name.rpartition(".")[0]
      if name and modules[name] != path:
        found.add(modules[name])
  return found


def test_every_package_has_a_build_file():
  for package in {os.path.dirname(p) for p in _py_files()}:
    assert os.path.isfile(os.path.join(REPO, package, "BUILD")), f"{package}/BUILD is missing"


def test_the_root_build_aliases_every_binary_and_the_suite():
  aliases, suites = {}, {}
  namespace = {"package": lambda **k: None,
               "alias": lambda name, actual: aliases.__setitem__(name, actual),
               "test_suite": lambda name, tests=(): suites.__setitem__(name, list(tests))}
  path = os.path.join(REPO, "BUILD")
  with open(path, encoding="utf-8") as f:
    exec(compile(f.read(), path, "exec"), namespace)  # pylint: disable=exec-used
  binaries = {t.label for t in _targets() if t.kind == "py_binary"
              and t.label.startswith(("//roberta_tf:", "//data_prep:"))}
  assert set(aliases.values()) == binaries, sorted(binaries ^ set(aliases.values()))
  assert all(actual.rsplit(":", 1)[1] == name for name, actual in aliases.items())
  assert suites == {"tests": ["//tests:all_tests"]}
  assert re.search(r'test_suite\(name = "all_tests"\)', _source("tests/BUILD"))


def test_every_file_has_exactly_one_target_and_every_target_a_file():
  files = set(_py_files()) - {RUNNER}
  owners = {}
  for t in _targets():
    for src in t.srcs:
      if src.endswith(".py") and src != RUNNER:
        owners.setdefault(src, []).append(t.label)
        assert os.path.isfile(os.path.join(REPO, src)), f"{t.label} lists {src}, which is gone"
  assert not files - set(owners), f"files without a target: {sorted(files - set(owners))}"
  doubles = {src: labels for src, labels in owners.items() if len(labels) > 1}
  assert not doubles, f"files in two targets: {doubles}"


def test_kinds_match_the_files():
  for src, t in _by_src().items():
    text = _source(src)
    if os.path.basename(src).startswith("test_"):
      want = "pytest_test"
    elif (re.search(r"^\s*(app\.run\(main|cli\.run\(main, FLAGS)\)$", text, re.M)
          or src.startswith("benchmarks/")):
      want = "py_binary"
    else:
      want = "py_library"
    assert t.kind == want, f"{t.label} ({src}) is a {t.kind}, should be a {want}"


def test_deps_are_the_imports():
  by_src = _by_src()
  modules = {_module(p): p for p in by_src}
  wrong = []
  for src, t in sorted(by_src.items()):
    want = {by_src[f].label for f in _imported_files(src, modules)}
    have = {d for d in t.deps if d not in ("//tests:conftest", "//tests:tests")}
    want -= {"//tests:conftest", "//tests:tests"}
    if want != have:
      wrong.append(f"{t.label}: add {sorted(want - have)}, remove {sorted(have - want)}")
  assert not wrong, "deps disagree with the imports:\n" + "\n".join(wrong)


def test_binaries_run_as_subprocesses_are_in_data():
  by_src = _by_src()
  binaries = {_module(src): t.label for src, t in by_src.items() if t.kind == "py_binary"}
  missing = []
  for src, t in sorted(by_src.items()):
    named = set(re.findall(r"[\"']((?:roberta_tf|data_prep|benchmarks)\.[a-z_.]+)[\"']",
                           _source(src)))
    for module in sorted(named & set(binaries)):
      if binaries[module] != t.label and binaries[module] not in t.data | t.deps:
        missing.append(f"{t.label} runs {module}: add {binaries[module]} to its data")
  assert not missing, "\n".join(missing)


def test_tests_name_their_data():
  missing = []
  for src, t in sorted(_by_src().items()):
    if t.kind != "pytest_test" or src == os.path.relpath(os.path.realpath(__file__), REPO):
      continue  # This file names every key without reading the data.
    text = _source(src)
    for key, labels in TEST_DATA.items():
      if key in text and not labels <= t.data:
        missing.append(f"{t.label} uses {key!r}: add {sorted(labels - t.data)} to its data")
  assert not missing, "\n".join(missing)


def test_console_scripts_name_existing_functions():
  """Every pyproject.toml [project.scripts] entry is a top-level function of its module."""
  with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
    scripts = tomllib.load(f)["project"]["scripts"]
  assert scripts
  for name, target in scripts.items():
    module, _, function = target.partition(":")
    tree = ast.parse(_source(os.path.join(*module.split(".")) + ".py"))
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert function in defined, f"{name} = {target!r}: {module} has no top-level {function}()"
