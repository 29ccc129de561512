"""Every file access of the packages goes through roberta_tf/common/files.py (or atomic_write /
directory_lock on top of it), so every path may be a URL: no builtin `open`, `os` file call,
`glob`, `shutil` or `pathlib` I/O elsewhere, and no `os.path.normpath/abspath/realpath/relpath`
(they turn `gs://b/x` into a local path). A line that works on something local by nature (a
temporary directory, /proc, the running Python's own sources) says so with `# local-only: why`.
"""

import ast
import os

import pytest

from tests.conftest import REPO

PACKAGES = ("roberta_tf", "data_prep")
# files_local.py and files_gfile.py: files.py's two backends (local paths, URLs);
# gfile_stream.py: the GFile under files.open's URL files (a stream class only files.py uses).
OWNERS = {os.path.join("roberta_tf", "common", name)
          for name in ("files.py", "files_local.py", "files_gfile.py", "atomic_write.py",
                       "directory_lock.py", "gfile_stream.py")}
FORBIDDEN = {
    "os": {"listdir", "scandir", "walk", "makedirs", "mkdir", "remove", "unlink", "rmdir",
           "replace", "rename", "stat", "chmod", "open"},
    "os.path": {"exists", "lexists", "isdir", "isfile", "islink", "getsize", "getmtime",
                "normpath", "abspath", "realpath", "relpath", "expanduser", "samefile"},
    "glob": {"glob", "iglob"},
    "shutil": {"copy", "copy2", "copyfile", "copytree", "rmtree", "move", "disk_usage"},
    "io": {"open"},
    "gzip": {"open"},
    "pathlib": {"Path"},
}


def _dotted(node: ast.AST) -> str | None:
  if isinstance(node, ast.Name):
    return node.id
  if isinstance(node, ast.Attribute):
    base = _dotted(node.value)
    return f"{base}.{node.attr}" if base else None
  return None


def forbidden_calls(source: str) -> list[tuple[int, str]]:
  """(line, call) of each direct file access in `source` not marked `# local-only`."""
  lines = source.splitlines()
  found = []
  for node in ast.walk(ast.parse(source)):
    if not isinstance(node, ast.Call):
      continue
    name = _dotted(node.func)
    if name is None:
      continue
    module, _, attr = name.rpartition(".")
    bad = name in ("open", "Path") or attr in FORBIDDEN.get(module, ())
    if not bad:
      continue
    span = lines[node.lineno - 1:(node.end_lineno or node.lineno)]
    if any("# local-only" in line for line in span):
      continue
    found.append((node.lineno, name))
  return found


def _modules():
  for package in PACKAGES:
    for root, _, names in os.walk(os.path.join(REPO, package)):
      for name in sorted(names):
        if name.endswith(".py"):
          yield os.path.relpath(os.path.join(root, name), REPO)


def test_the_check_finds_what_it_forbids():
  source = ("import os, glob\nopen('x')\nos.listdir(d)\nos.path.normpath(p)\n"
            "glob.glob(p)\nos.path.join(a, b)\nopen(t)  # local-only: a temp file\n")
  assert forbidden_calls(source) == [(2, "open"), (3, "os.listdir"), (4, "os.path.normpath"),
                                     (5, "glob.glob")]


@pytest.mark.parametrize("module", sorted(_modules()))
def test_file_access_goes_through_the_files_module(module):
  if module in OWNERS:
    return
  with open(os.path.join(REPO, module), encoding="utf-8") as f:
    found = forbidden_calls(f.read())
  assert not found, (f"{module}: direct file access at " + ", ".join(
      f"line {n} ({call})" for n, call in found) + ": use roberta_tf.common.files (or mark a "
      "local-by-nature line `# local-only: why`)")
