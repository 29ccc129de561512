"""The corpora, vocabularies and shards the benchmarks build, each once: a rerun (or another
benchmark pointed at the same directory) finds them and skips the work.

A directory counts as built when the file its tool writes last is there: vocab.json (or
tokenizer.json) for `data_prep.train_tokenizer`, dataset_info.json for `data_prep.build_shards`
(both run as `python -m`, their flags as a user types them, so the bytes are the binaries' own).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable

from benchmarks.common import commands


def parse_corpora(specs: Iterable[str], flag: str = "--corpora") -> dict[str, str]:
  """{name: source} from NAME or NAME=INPUT entries (the built-in names: stdlib, kjv);
  exits with one line naming `flag` on a malformed entry."""
  corpora = {}
  for spec in specs:
    name, _, source = spec.partition("=")
    if not name or not name.replace("_", "").replace("-", "").isalnum():
      sys.exit(f"{flag}: bad corpus name in {spec!r} (use NAME or NAME=INPUT)")
    if not source and name not in ("stdlib", "kjv"):
      sys.exit(f"{flag}: {name!r} needs an input (NAME=FILES); built in: stdlib, kjv")
    corpora[name] = source or name
  return corpora


def corpus_source(source: str, corpus_dir: str) -> str:
  """A data_prep input spec for `source`: `kjv` becomes corpus_dir/kjv.txt (written once by
  benchmarks/common/kjv_corpus.py; exits in one line where the `bible` program is missing); any
  other spec (files, globs, `stdlib`) is returned as it is."""
  if source != "kjv":
    return source
  path = os.path.join(corpus_dir, "kjv.txt")
  if not os.path.isfile(path):
    from benchmarks.common import kjv_corpus  # pylint: disable=import-outside-toplevel
    os.makedirs(corpus_dir, exist_ok=True)
    try:
      kjv_corpus.write_kjv(path)
    except RuntimeError as e:
      sys.exit(f"kjv corpus: {e}")
  return path


def write_jsonl(path: str, texts: Iterable[str]) -> str:
  """`path`: one {"text": ...} line per text (a data_prep corpus file); returns the path."""
  with open(path, "w", encoding="utf-8") as f:
    for text in texts:
      f.write(json.dumps({"text": text}) + "\n")
  return path


def vocab(out_dir: str, source: str, vocab_size: int | None = 8000,
          extra: Iterable[str] = ()) -> str:
  """out_dir: vocab.json + merges.txt, a byte-level BPE of `vocab_size` trained on `source`
  (None: no --vocab_size, as when `extra` has --extend_from and --add_tokens); returns
  out_dir."""
  # vocab.json, or tokenizer.json when `extra` asks for --format=tokenizer_json.
  if not any(os.path.isfile(os.path.join(out_dir, n)) for n in ("vocab.json", "tokenizer.json")):
    size = [] if vocab_size is None else [f"--vocab_size={vocab_size}"]
    _build("data_prep.train_tokenizer",
         [f"--input={source}", *size, f"--output_dir={out_dir}", *extra], out_dir)
  return out_dir


def shards(out_dir: str, source: str, vocab_dir: str, *, max_seq_len: int, num_shards: int = 4,
           validation_fraction: float = 0.02, extra: Iterable[str] = (),
           rebuild: bool = False) -> str:
  """out_dir: `source` as FULL-SENTENCES shards of `vocab_dir`'s ids (`extra`: more
  build_shards flags; `rebuild`: even when built before, for a source written anew);
  returns out_dir."""
  if rebuild or not os.path.isfile(os.path.join(out_dir, "dataset_info.json")):
    _build("data_prep.build_shards",
         [f"--input={source}", f"--vocab_dir={vocab_dir}", f"--output_dir={out_dir}",
          f"--max_seq_len={max_seq_len}", f"--num_shards={num_shards}",
          f"--validation_fraction={validation_fraction}", *extra], out_dir)
  return out_dir


def corpus_shards(corpus_dir: str, source: str, *, vocab_size: int = 8000,
                  max_seq_len: int = 128, validation_fraction: float = 0.05) -> str:
  """corpus_dir/shards of `source` (a data_prep spec or `kjv`) in its own vocabulary,
  corpus_dir/vocab, trained on it first: the recipe of the corpus comparisons (4 shards)."""
  out = os.path.join(corpus_dir, "shards")
  if os.path.isfile(os.path.join(out, "dataset_info.json")):
    return out
  source = corpus_source(source, corpus_dir)
  vocab_dir = vocab(os.path.join(corpus_dir, "vocab"), source, vocab_size)
  return shards(out, source, vocab_dir, max_seq_len=max_seq_len,
                validation_fraction=validation_fraction)


def _build(module: str, args: list[str], out_dir: str) -> None:
  """`python -m module args --overwrite --noprogress`, its output in out_dir + ".log"."""
  os.makedirs(os.path.dirname(os.path.abspath(out_dir)), exist_ok=True)
  commands.run_module([module, *args, "--overwrite", "--noprogress"],
                      os.path.abspath(out_dir) + ".log", timed=True)
