"""pyproject.toml agrees with the requirements files, and ships the flagfiles and the library's
default data as package data."""

import glob
import os
import re
import tomllib

import roberta_tf
from roberta_tf.ablation.settings import StudySettings
from roberta_tf.common import flagfiles
from tests.conftest import SOURCE_TREE as REPO


def _pins(name):
  """The pins a requirements file states itself (comments and `-r` includes left out)."""
  with open(os.path.join(REPO, name), encoding="utf-8") as f:
    lines = [line.split("#")[0].strip() for line in f]
  return [line for line in lines if line and not line.startswith("-r")]


def _pyproject():
  with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
    return tomllib.load(f)


def test_dependencies_are_the_requirements_pins():
  project = _pyproject()["project"]
  runtime = _pins("requirements.txt")
  assert sorted(project["dependencies"]) == sorted(runtime)
  assert sorted(project["optional-dependencies"]["dev"]) == sorted(_pins("requirements-dev.txt"))
  assert sorted(project["optional-dependencies"]["bench"]) == sorted(
      _pins("requirements-bench.txt"))
  for pin in runtime + project["optional-dependencies"]["dev"]:
    assert re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][0-9A-Za-z.+-]*", pin), pin
  # Test tools are not runtime dependencies.
  assert not any(p.startswith(("pytest", "ruff")) for p in runtime)


def test_flagfiles_are_package_data_linked_from_flags():
  assert "flags/*.flags" in _pyproject()["tool"]["setuptools"]["package-data"]["roberta_tf"]
  shipped = flagfiles.names()
  linked = sorted(n[: -len(".flags")] for n in os.listdir(os.path.join(REPO, "flags"))
                  if n.endswith(".flags"))
  assert shipped == linked and {"tiny", "small", "base", "quickstart"} <= set(shipped)
  for name in shipped:
    link = os.path.join(REPO, "flags", f"{name}.flags")
    assert os.path.islink(link), f"{link} must be a symlink to roberta_tf/flags/{name}.flags"
    assert os.path.realpath(link) == os.path.realpath(flagfiles.path(name))
  assert flagfiles.path("tiny.flags") == flagfiles.path("tiny")


def test_library_defaults_are_package_data_not_test_data():
  """ablate's default downstream problem ships with the package (pip install . has it) and is
  named by a path inside the package, not the checkout's tests/ (whose copies link to it)."""
  package = os.path.dirname(os.path.abspath(roberta_tf.__file__))
  shipped = {os.path.relpath(p, package) for pattern in
             _pyproject()["tool"]["setuptools"]["package-data"]["roberta_tf"]
             for p in glob.glob(os.path.join(package, pattern))}
  for path in (StudySettings().task_train, StudySettings().task_dev):
    assert os.path.isfile(path), path
    assert os.path.relpath(os.path.abspath(path), package) in shipped, f"{path}: not package data"
