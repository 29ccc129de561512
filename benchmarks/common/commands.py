"""`python -m module args` from the repository root, for the benchmarks that chain binaries;
the paths every benchmark shares; a script's absl flags as one object."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import types

from absl import flags

# The flags its define_* functions declare belong to the calling script: its --help lists them.
flags.disclaim_key_flags()

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The corpus most benchmarks read by default: the Python docs beside the repository (not in it).
DOCS_CORPUS = os.path.join(os.path.dirname(REPO), "shared", "corpora", "python-docs.jsonl.gz")
# Its slice in the test data (the fallback where the corpus is absent) and the fixture's
# 8000-id vocabulary trained on it.
DOCS_SLICE = os.path.join(REPO, "tests", "testdata", "python_docs_small.jsonl.gz")
FIXTURE_VOCAB = os.path.join(REPO, "tests", "testdata", "hf_roberta_tiny")
# The docs_sections task (5 Python-docs sections; roberta_tf/finetuning/docs_sections.py).
DOCS_SECTIONS = os.path.join(REPO, "tests", "testdata", "docs_sections")


def docs_corpus() -> str:
  """DOCS_CORPUS where it is, else DOCS_SLICE."""
  return DOCS_CORPUS if os.path.isfile(DOCS_CORPUS) else DOCS_SLICE


def define_corpus_flags(dev_percent: int, test_percent: int) -> None:
  """--corpus (DOCS_CORPUS) and its split by document hash, --dev_percent and --test_percent
  (docs_retrieval.split_of), with a set's defaults."""
  flags.DEFINE_string("corpus", DOCS_CORPUS, "The Python docs JSONL corpus ({\"text\", "
                      "\"source\"} per line; default: ../shared beside the repository).")
  flags.DEFINE_integer("dev_percent", dev_percent, "Percent of the documents (by hash) held out "
                       "for dev.")
  flags.DEFINE_integer("test_percent", test_percent, "Percent of the documents (by hash) held "
                       "out for test.")


def define_batch_flags(batch_size: int | None, max_seq_len: int,
                       batch_help: str = "Sequences per step.",
                       seq_help: str = "Tokens per sequence (S).") -> None:
  """--batch_size (None: none) and --max_seq_len, the batch's shape, with a benchmark's
  defaults."""
  if batch_size is not None:
    flags.DEFINE_integer("batch_size", batch_size, batch_help)
  flags.DEFINE_integer("max_seq_len", max_seq_len, seq_help)


def flag_args(flag_values) -> types.SimpleNamespace:
  """The parsed flags as a plain namespace that a script may adjust (e.g. a --quick preset)
  without writing back into absl's FLAGS."""
  return types.SimpleNamespace(**flag_values.flag_values_dict())


def run_module(args: list[str], log_path: str | None = None, timed: bool = False,
               cwd: str = REPO) -> str:
  """Runs `python -m args` in `cwd` (another checkout's root runs that code); returns its
  stdout (also written with stderr to `log_path`).

  Exits naming the command, with the end of its stderr, when it fails. `timed`: prints the
  command's first two words and its seconds.
  """
  start = time.time()
  proc = subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True,
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
