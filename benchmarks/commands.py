"""`python -m module args` from the repository root, for the benchmarks that chain binaries."""

from __future__ import annotations

import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The corpus most benchmarks read by default: the Python docs beside the repository (not in it).
DOCS_CORPUS = os.path.join(os.path.dirname(REPO), "shared", "corpora", "python-docs.jsonl.gz")


def run_module(args: list[str], log_path: str | None = None, timed: bool = False) -> str:
  """Runs `python -m args` in REPO; returns its stdout (also written with stderr to `log_path`).

  Exits naming the command, with the end of its stderr, when it fails. `timed`: prints the
  command's first two words and its seconds.
  """
  start = time.time()
  proc = subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True,
                        check=False)
  if log_path:
    with open(log_path, "w", encoding="utf-8") as f:
      f.write(proc.stdout + proc.stderr)
  if proc.returncode:
    sys.exit(f"failed: python -m {' '.join(args)}\n{proc.stderr[-3000:]}")
  if timed:
    print(f"    {args[0]} {args[1] if len(args) > 1 else ''}... {time.time() - start:.0f} s",
          flush=True)
  return proc.stdout
