"""BUILD stays true: a target for every module, binary and test, and nothing that is gone."""

import ast
import os
import re
import subprocess
import sys
import tomllib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDERS = ("roberta_tf", "data_prep", "tests", "benchmarks", "tools")


def _targets():
  with open(os.path.join(REPO, "BUILD"), encoding="utf-8") as f:
    text = f.read()
  return [(m.group(1), m.group(2), m.group(3)) for m in re.finditer(
      r'(py_library|py_binary|py_test)\(\s*name = "([^"]+)",\s*srcs = \["([^"]+)"\]', text)]


def _py_files():
  out = set()
  for folder in FOLDERS:
    for root, dirs, files in os.walk(os.path.join(REPO, folder)):
      dirs[:] = [d for d in dirs if d not in ("__pycache__", "testdata")]
      out.update(os.path.relpath(os.path.join(root, f), REPO) for f in files if f.endswith(".py"))
  return out


def test_every_file_has_exactly_one_target_and_every_target_a_file():
  targets = _targets()
  srcs = [src for _, _, src in targets]
  assert len(srcs) == len(set(srcs)), "a file is in two targets"
  assert set(srcs) == _py_files()
  names = [name for _, name, _ in targets]
  assert len(names) == len(set(names))


def test_kinds_match_the_files():
  for rule, _, src in _targets():
    with open(os.path.join(REPO, src), encoding="utf-8") as f:
      text = f.read()
    if os.path.basename(src).startswith("test_"):
      assert rule == "py_test", src
    elif "app.run(" in text or src.startswith("benchmarks/"):
      assert rule == "py_binary", src
  binaries = {src for rule, _, src in _targets() if rule == "py_binary"}
  for module in ("roberta_tf/train.py", "roberta_tf/evaluate.py", "roberta_tf/export.py",
                 "roberta_tf/fill_mask.py", "data_prep/build_shards.py",
                 "data_prep/train_tokenizer.py"):
    assert module in binaries, module


def test_build_is_what_the_generator_writes():
  proc = subprocess.run([sys.executable, os.path.join(REPO, "tools", "gen_build.py"), "--check"],
                        capture_output=True, text=True, check=False)
  assert proc.returncode == 0, proc.stderr


def test_console_scripts_name_existing_functions():
  """Every pyproject.toml [project.scripts] entry is a top-level function of its module."""
  with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
    scripts = tomllib.load(f)["project"]["scripts"]
  assert scripts
  for name, target in scripts.items():
    module, _, function = target.partition(":")
    with open(os.path.join(REPO, *module.split(".")) + ".py", encoding="utf-8") as f:
      tree = ast.parse(f.read())
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert function in defined, f"{name} = {target!r}: {module} has no top-level {function}()"
