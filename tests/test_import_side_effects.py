"""Importing the project changes nothing in the process; quieting TensorFlow is the binaries'.

- Every module of roberta_tf and data_prep, imported in one fresh process, leaves os.environ,
  fd 2 (the same open file) and sys.meta_path as importing the third-party packages they load
  leaves them (TensorFlow itself sets a few variables, absl and six add import hooks).
- No binary's module imports TensorFlow, so common/cli.py's `run` can quiet TF's start-up before
  the binary's `main` imports it.
- A binary's own process is quiet, and ROBERTA_TF_VERBOSE=1 shows TensorFlow's own lines.
"""

import json
import os
import re

from roberta_tf.common import quiet_start
from tests.conftest import REPO
from tests.harness import module_env, run_module, run_script

PACKAGES = ("roberta_tf", "data_prep")
# The binaries: the modules that hand their `main` to cli.run.
BINARIES = sorted(
    f"{package}.{name[:-3]}" for package in PACKAGES
    for name in os.listdir(os.path.join(REPO, package))
    if name.endswith(".py") and "cli.run(main" in open(os.path.join(REPO, package, name),
                                                         encoding="utf-8").read())

# argv[1]: JSON list of modules to import (argv[2] "--third_party": skip those that do not
# import by name). Prints what importing them changed: environment
# variables, whether fd 2 is still the same open file, the import hooks added (by type), and
# the top-level third-party modules loaded.
_IMPORT_ALL = r"""
import importlib, json, os, sys
stdlib = set(sys.stdlib_module_names)
before_env, before_fd2, before_hooks = dict(os.environ), os.fstat(2), list(sys.meta_path)
before_modules = set(sys.modules)
for name in json.loads(sys.argv[1]):
  try:
    importlib.import_module(name)
  except ImportError:
    if sys.argv[2:] != ["--third_party"]:  # an extension module loaded under its own name
      raise
after_fd2 = os.fstat(2)
print(json.dumps({
    "env": {k: os.environ.get(k) for k in set(before_env) | set(os.environ)
            if before_env.get(k) != os.environ.get(k)},
    "fd2_same": (before_fd2.st_dev, before_fd2.st_ino) == (after_fd2.st_dev, after_fd2.st_ino),
    "hooks": sorted(type(h).__qualname__ for h in sys.meta_path if h not in before_hooks),
    "third_party": sorted(m for m in {m.split(".")[0] for m in set(sys.modules) - before_modules}
                          - stdlib - {"roberta_tf", "data_prep", "__main__"}
                          if getattr(sys.modules.get(m), "__file__", None)),  # not generated
    "tensorflow": "tensorflow" in sys.modules}))
"""


def _modules() -> list[str]:
  """Every module of the packages, by walking their files (importing nothing)."""
  names = []
  for package in PACKAGES:
    for root, dirs, filenames in os.walk(os.path.join(REPO, package)):
      dirs[:] = sorted(d for d in dirs if os.path.isfile(os.path.join(root, d, "__init__.py")))
      parts = os.path.relpath(root, REPO).split(os.sep)
      for name in sorted(filenames):
        if name.endswith(".py"):
          names.append(".".join(parts if name == "__init__.py" else parts + [name[:-3]]))
  return names


def _imported(modules: list[str], env: dict | None = None, *args: str) -> dict:
  proc = run_script(_IMPORT_ALL, json.dumps(modules), *args, env=env)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])


def test_importing_every_package_module_changes_no_variable_descriptor_or_hook():
  modules = _modules()
  assert len(modules) > 100 and "roberta_tf.common.quiet_start" in modules
  env = {k: v for k, v in module_env().items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  ours = _imported(modules, env)
  # What the third-party packages do themselves when imported alone:
  theirs = _imported(ours["third_party"], env, "--third_party")
  assert ours["fd2_same"] and theirs["fd2_same"]
  assert "TF_CPP_MIN_LOG_LEVEL" not in ours["env"], ours["env"]
  assert ours["env"] == theirs["env"]
  assert ours["hooks"] == theirs["hooks"] and "_QuietTensorFlowImport" not in ours["hooks"]


def test_no_binary_module_imports_tensorflow():
  assert len(BINARIES) >= 13 and "data_prep.build_shards" in BINARIES
  assert not _imported(BINARIES)["tensorflow"]


# A line of TensorFlow's C++ logging: severity, date, time, thread, file:line].
_TF_LOG = re.compile(r"^[IWEF]\d{4} [\d:.]+ +\d+ [\w.]+:\d+\] ")


def test_a_binary_is_quiet_and_roberta_tf_verbose_shows_tensorflow_own_lines(train_shards):
  """inspect_data reads a batch: TensorFlow starts and logs while running (on a machine without
  a GPU, "failed call to cuInit"), which TF_CPP_MIN_LOG_LEVEL=3 (the quiet start's) hides, as
  it filters the lines TF prints while it is imported."""
  env = {k: v for k, v in module_env().items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  args = ("roberta_tf.inspect_data", f"--data={train_shards}", "--num_batches=1",
          "--batch_size=2", "--json")
  quiet = run_module(*args, env=env)
  assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
  assert json.loads(quiet.stdout)["batches"] == 1
  verbose = run_module(*args, env={**env, quiet_start.VERBOSE_ENV: "1"})
  assert verbose.returncode == 0 and verbose.stdout == quiet.stdout
  lines = verbose.stderr.splitlines()
  assert any(quiet_start.IMPORT_CHATTER.search(line) for line in lines), verbose.stderr
  running = [line for line in lines if _TF_LOG.match(line)
             and not quiet_start.IMPORT_CHATTER.search(line)]
  assert running, verbose.stderr  # logged once running: what the log level hides
