"""A study's runs as records: one JSON line per finished run, appended to a file kept in the repo
(`ablate --records=benchmarks/records/modern_budget.jsonl`), so that the docs' figures trace
back to a line (tests/test_doc_figures.py's record markers) and a later session adds lines.

A line holds the study, corpus, arm, its train flags, seed, the arm it trained beside (--paired),
steps, perplexity, BLiMP, the 1-minute load average before and after its training (the machine
is shared: say the load), the CPU and when it finished; the curve is left to results.json.

TensorFlow-free.
"""

from __future__ import annotations

import json
import os
import time

# result.json keys a record keeps (the others, like the curve, stay in the work dir).
_KEPT = ("arm", "seed", "beside", "flags", "batch_size", "learning_rate", "train_steps", "tokens",
         "real_tokens", "perplexity", "mlm_accuracy", "blimp", "blimp_pairs", "problem_metric",
         "problem_value", "load", "minutes")


def load_average() -> float | None:
  """The 1-minute load average (None where the OS has none)."""
  try:
    return round(os.getloadavg()[0], 2)
  except (AttributeError, OSError):
    return None


def cpu_name() -> str:
  """'model name' of /proc/cpuinfo, else its cpu family and model, with the CPU count."""
  fields = {}
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:  # local-only: this machine's
      for line in f:
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
  except OSError:
    pass
  family = f"family {fields.get('cpu family', '?')} model {fields.get('model', '?')}"
  name = fields.get("model name")
  return f"{name + ' ' if name else ''}{family}, {os.cpu_count()} CPUs"


def record(result: dict, study: str, corpus: str) -> dict:
  """The record of one run's result (runner.run_arm's dict)."""
  kept = {k: result[k] for k in _KEPT if k in result}
  if os.sep in corpus and "://" not in corpus:  # a local file: its name, not this machine's path
    corpus = os.path.basename(corpus.rstrip(os.sep))  # local-only: a local path
  return {"study": study, "corpus": corpus, **kept, "cpu": cpu_name(),
          "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def append(path: str, result: dict, study: str, corpus: str) -> dict:
  """Appends `result`'s record to `path` (created with its folder); returns the record."""
  line = record(result, study, corpus)
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)  # local-only: in the repo
  with open(path, "a", encoding="utf-8") as f:  # local-only: a file in the repo
    f.write(json.dumps(line, sort_keys=True) + "\n")
  return line
