"""Minimal pairs in BLiMP's JSON-lines format (Warstadt et al. 2020), and their accuracy.

One JSON object a line (the file may be gzipped): `sentence_good`, `sentence_bad` (required),
`UID` (the paradigm, e.g. "adjunct_island"), `linguistics_term` (the phenomenon, e.g.
"island_effects") and `field` ("syntax", "semantics", ...), as in BLiMP's data/*.jsonl; a
directory means every .jsonl(.gz) file in it; either may be a URL (roberta_tf.common.files).
A pair is right when the model gives the good sentence the higher score (pseudo-log-likelihood:
pretraining/minimal_pair_evaluation.py); ties count as wrong. TensorFlow-free for local files.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import random
from collections import defaultdict

from roberta_tf.common import error_text, files


class MinimalPairsError(ValueError):
  """The minimal-pairs file is missing or malformed; names the file (and line)."""


@dataclasses.dataclass(frozen=True)
class MinimalPair:
  good: str
  bad: str
  paradigm: str       # BLiMP's UID
  phenomenon: str     # BLiMP's linguistics_term (else field, else the paradigm)


def _files(path: str) -> list[str]:
  if files.isdir(path):
    found = sorted(files.join(path, n) for n in files.listdir(path)
                   if n.endswith((".jsonl", ".jsonl.gz")))
    if not found:
      raise MinimalPairsError(f"{path}: directory holds no .jsonl or .jsonl.gz files")
    return found
  if not files.isfile(path):
    raise MinimalPairsError(f"{path}: no such file (--minimal_pairs)")
  return [path]


def _read_text(name: str) -> str:
  """The UTF-8 text of a file, gunzipped when its name ends in .gz."""
  with files.open(name, "rb") as raw:
    if name.endswith(".gz"):
      raw = gzip.GzipFile(fileobj=raw)
    with io.TextIOWrapper(raw, encoding="utf-8") as f:
      return f.read()


def read(path: str, per_paradigm: int = 0, seed: int = 0) -> list[MinimalPair]:
  """The pairs of a BLiMP-format file or directory, in file order.

  Args:
    per_paradigm: > 0: at most this many pairs of each paradigm (UID), drawn without
      replacement with `seed` and kept in file order (BLiMP has 1,000 a paradigm, 67,000 in
      all; 50 a paradigm scores in ~2 min on 2 CPU cores for a small model); 0: all.

  Raises:
    MinimalPairsError: naming file:line for invalid JSON, a missing or non-text sentence field,
      or an empty file.
  """
  pairs = []
  for name in _files(path):
    try:
      lines = _read_text(name).split("\n")
    except Exception as e:
      if not (isinstance(e, (OSError, UnicodeDecodeError, EOFError))
              or error_text.is_tf_error(e)):
        raise
      raise MinimalPairsError(f"{name}: cannot read: {e}") from e
    for number, line in enumerate(lines, 1):
      if not line.strip():
        continue
      try:
        row = json.loads(line)
      except json.JSONDecodeError as e:
        raise MinimalPairsError(f"{name}:{number}: invalid JSON: {e}") from e
      if not isinstance(row, dict):
        raise MinimalPairsError(f"{name}:{number}: expected a JSON object")
      for key in ("sentence_good", "sentence_bad"):
        if not isinstance(row.get(key), str) or not row[key].strip():
          raise MinimalPairsError(f"{name}:{number}: no text in {key!r} (BLiMP's format: "
                                  "sentence_good, sentence_bad, UID, linguistics_term, field)")
      paradigm = str(row.get("UID") or files.basename(name).split(".")[0])
      phenomenon = str(row.get("linguistics_term") or row.get("field") or paradigm)
      pairs.append(MinimalPair(row["sentence_good"], row["sentence_bad"], paradigm, phenomenon))
  if not pairs:
    raise MinimalPairsError(f"{path}: no minimal pairs")
  return sample(pairs, per_paradigm, seed) if per_paradigm > 0 else pairs


def sample(pairs: list[MinimalPair], per_paradigm: int, seed: int = 0) -> list[MinimalPair]:
  """At most `per_paradigm` pairs of each paradigm, the same ones for the same seed and file."""
  by_paradigm = defaultdict(list)
  for i, pair in enumerate(pairs):
    by_paradigm[pair.paradigm].append(i)
  keep = set()
  for paradigm, indices in sorted(by_paradigm.items()):
    rng = random.Random(f"{seed}:{paradigm}")  # per paradigm: adding a file keeps the others'
    keep.update(rng.sample(indices, min(per_paradigm, len(indices))))
  return [pair for i, pair in enumerate(pairs) if i in keep]


def summarize(pairs: list[MinimalPair], good_scores, bad_scores) -> dict:
  """{"accuracy", "pairs", "by_phenomenon": {name: accuracy}, "by_paradigm": {UID: accuracy}}:
  the share of pairs whose good sentence scored strictly higher (overall, and per group)."""
  if not len(pairs) == len(good_scores) == len(bad_scores):
    raise ValueError("one good and one bad score per pair")
  right = [float(g) > float(b) for g, b in zip(good_scores, bad_scores, strict=True)]
  groups = {"by_phenomenon": defaultdict(list), "by_paradigm": defaultdict(list)}
  for pair, ok in zip(pairs, right, strict=True):
    groups["by_phenomenon"][pair.phenomenon].append(ok)
    groups["by_paradigm"][pair.paradigm].append(ok)
  return {"accuracy": sum(right) / len(right), "pairs": len(right),
          **{k: {name: sum(v) / len(v) for name, v in sorted(g.items())}
             for k, g in groups.items()}}
