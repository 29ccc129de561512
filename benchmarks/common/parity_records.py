"""The learning-parity benchmark's records: one JSON line per finished run, kept in the repo.

`benchmarks/records/learning_parity.jsonl` is the benchmark's memory across sessions and
machines: benchmarks/quality/pretraining_vs_hf.py skips a run whose key is already there and appends
a line when a run ends, and the docs tables (docs/learning_parity.md) are generated from the file,
so every figure there traces back to a line. A line holds:

  key fields   corpus, lr (the peak, as written on the command line), seed, arm, init
               ("own" or "swap"), train_steps, warmup_steps, stop_after
  provenance   code (hash of the files that decide a trajectory), batches (hashes of the
               dumped train/validation batches), git (the commit, "+dirty" with local edits),
               finished (UTC time), seconds, host (CPUs)
  figures      unigram_ppl, curve [[step, {"ppl", "acc"}], ...] every eval_every steps,
               train_loss_every_10 (means of 10 steps), final {"ppl", "acc"}, escaped
"""

from __future__ import annotations

import json
import os

KEY_FIELDS = ("corpus", "lr", "seed", "arm", "init", "train_steps", "warmup_steps", "stop_after")
# benchmarks/records/, beside this module's folder.
DEFAULT_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "records", "learning_parity.jsonl")


def key_of(record: dict) -> tuple:
  return tuple(record[k] for k in KEY_FIELDS)


def read(path: str) -> list[dict]:
  """Every record of `path` (none if it does not exist); a torn last line (a killed writer) is
  skipped, any other bad line is an error naming the line."""
  if not os.path.exists(path):
    return []
  records = []
  with open(path, encoding="utf-8") as f:
    lines = f.read().split("\n")
  for number, line in enumerate(lines, 1):
    if not line.strip():
      continue
    try:
      records.append(json.loads(line))
    except json.JSONDecodeError as e:
      if number == len(lines):  # the file does not end in a newline: an append was cut
        continue
      raise ValueError(f"{path}:{number}: not a JSON record ({e})") from e
  return records


def append(path: str, record: dict, key_fields=KEY_FIELDS) -> None:
  """Appends one record as a line and flushes it to disk (the file stays valid JSON lines).
  `key_fields`: what the record must hold (another benchmark's records have other keys)."""
  missing = [k for k in key_fields if k not in record]
  if missing:
    raise ValueError(f"record lacks key fields {missing}")
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  line = json.dumps(record, separators=(",", ":"), sort_keys=True) + "\n"
  with open(path, "a+", encoding="utf-8") as f:
    f.seek(0, os.SEEK_END)
    if f.tell():  # a torn last line from a killed writer: start on a fresh line
      f.seek(f.tell() - 1)
      if f.read(1) != "\n":
        f.write("\n")
    f.write(line)
    f.flush()
    os.fsync(f.fileno())
