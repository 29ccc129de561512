"""Every benchmark entry point (`python -m benchmarks.<folder>.<name>` of a file whose
`__main__` block calls absl's `app.run`) answers --help as absl does: exit code 1, its usage
docstring, then its flags -- every flag its own file defines included.

All of them in ONE fresh process (a process per script would pay the interpreter and TensorFlow
start-up ~30 times): each script runs as `python -m` runs it (runpy, run_name "__main__",
sys.argv[0] its file), and between two scripts the benchmarks' modules leave sys.modules and
every flag they added leaves absl's global FLAGS, so each starts as in a process of its own
(the project's modules, TensorFlow among them, stay imported). The other entry points
(serving/peer_jobs.py, serving/peer_sides.py) are workers another benchmark starts with
arguments of its own, not absl binaries.
"""

import json
import os
import re

from tests import harness
from tests.conftest import SOURCE_TREE

# Run in the child: {module: [exit code, --help's output]} as JSON on the last stdout line.
_CHILD = r"""
import contextlib, io, json, runpy, sys
from absl import app, flags

FLAGS = flags.FLAGS
app.define_help_flags()  # what app.run defines once per process: absl's, kept
BASE = set(FLAGS)  # absl's own flags, before any script
results, kept = {}, []
for module, path in json.loads(sys.argv[1]):
  out = io.StringIO()
  sys.argv = [path, "--help"]
  try:
    with contextlib.redirect_stdout(out):
      runpy.run_module(module, run_name="__main__", alter_sys=True)
    code = 0
  except SystemExit as e:
    code = e.code
  results[module] = [code, out.getvalue()]
  # Every flag the script added leaves, whoever absl took for its owner (the script's path,
  # a benchmarks.* module, or runpy's frame when absl's caller lookup lands there).
  for name in [n for n in list(FLAGS) if n not in BASE]:
    if name in FLAGS:
      delattr(FLAGS, name)
  # Kept alive, not freed: absl disclaims a helper module by id(module) (flags.disclaim_key_flags),
  # and a freed module's id reused by the next script's __main__ made absl credit that script's
  # flags to runpy, so --help left them out (now and then).
  for name in [m for m in sys.modules if m == "benchmarks" or m.startswith("benchmarks.")]:
    kept.append(sys.modules.pop(name))
print(json.dumps(results))
"""


def entry_points() -> list[tuple[str, str]]:
  """[(module, file)] of every benchmark whose `__main__` block calls app.run."""
  found = []
  root = os.path.join(SOURCE_TREE, "benchmarks")
  for folder, dirs, names in os.walk(root):
    dirs[:] = sorted(d for d in dirs if d not in ("__pycache__", "records"))
    for name in sorted(names):
      path = os.path.join(folder, name)
      if not name.endswith(".py"):
        continue
      with open(path, encoding="utf-8") as f:
        source = f.read()
      main_block = source.partition('if __name__ == "__main__":')[2]
      if "app.run(" in main_block:
        module = os.path.relpath(path, SOURCE_TREE)[:-3].replace(os.sep, ".")
        found.append((module, path))
  return found


def own_flags(path: str) -> list[str]:
  """The flags the file defines itself (flags.DEFINE_*("name", ...))."""
  with open(path, encoding="utf-8") as f:
    return re.findall(r"flags\.DEFINE_\w+\(\s*\"(\w+)\"", f.read())


def test_every_benchmark_answers_help():
  points = entry_points()
  assert len(points) >= 25, points  # the walk finds the folders' scripts
  result = harness.run_script(_CHILD, json.dumps(points),
                              env=harness.module_env(PYTHONPATH=SOURCE_TREE))
  assert result.returncode == 0, result.stderr[-3000:]
  answers = json.loads(result.stdout.strip().splitlines()[-1])
  wrong = []
  for module, path in points:
    code, text = answers[module]
    missing = [name for name in own_flags(path)
               if not re.search(rf"--(\[no\])?{name}:", text)]  # a bool flag: --[no]name
    if code != 1 or "flags:" not in text or missing:
      wrong.append(f"{module}: exit {code}, flags missing from --help: {missing}\n{text[:300]}")
  assert not wrong, "\n".join(wrong)
