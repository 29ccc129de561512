r"""Benchmark: ModernBERT's context extension as a phase (issue 61 point 3), judged by the
by-position held-out loss `evaluate` reports (point 4).

    nice python -m benchmarks.quality.context_extension [--work_dir=runs/context_extension] \
        [--phase1_steps=300] [--extend_steps=60]

The protocol, at the `tiny` ModernBERT size (3 layers, H 128, 128-token local windows, layer 0
global), on the Python docs corpus (DOCS_CORPUS):
1. held out: --held_out_docs documents of at least --held_out_chars characters (>= 8K tokens
   each), chosen by a fixed rule; the vocabulary (an 8K byte-level BPE, ModernBERT's
   tokenizer.json pipeline) and every model train on the other documents only.
2. `phase1`: `train --flagfile=flags/modernbert_phase1.flags` at 1,024 tokens, rotary theta
   10,000 on every layer, scaled down to --phase1_steps of --phase1_batch sequences.
3. from phase1's checkpoint, at equal steps, tokens and schedule (--extend_steps, WSD: constant,
   then the last --decay_fraction decaying to 0):
   - `extended`: `train --flagfile=flags/modernbert_extend.flags --init_from=phase1`: 8,192
     tokens a sequence (1 a step), global theta 160,000. Stopped by SIGTERM after its first
     checkpoint and resumed by the same command (the run's log shows both).
   - `continued_1k` (the control): the same steps and tokens at 1,024 (8 sequences a step) and
     theta 10,000: what more training alone buys.
4. `evaluate` scores each model (and phase1) on the held-out documents, one document a row of
   up to 8,192 tokens (DOC-SENTENCES shards), 15% masked (ModernBERT's evaluation rate), fixed
   masks: MLM loss by position bucket (0-512, 512-1K, 1K-2K, 2K-4K, 4K-8K).

Records: benchmarks/records/context_extension.jsonl, one line per model (its by-position losses
and masked-token counts) and one summary line; printed: the table.
"""

from __future__ import annotations

import gzip
import json
import os

from absl import app, flags

from benchmarks.common import cached_data, commands

flags.DEFINE_string("work_dir", "runs/context_extension", "Corpus splits, vocabulary, shards, "
                    "models and logs (each reused when built before).")
flags.DEFINE_string("corpus", commands.DOCS_CORPUS, "The Python docs JSONL corpus.")
flags.DEFINE_integer("held_out_docs", 12, "Documents held out for the by-position evaluation.")
flags.DEFINE_integer("held_out_chars", 40000, "Held-out documents have at least this many "
                     "characters (~10K tokens of the 8K vocabulary).")
flags.DEFINE_integer("vocab_size", 8000, "The BPE vocabulary's size.")
flags.DEFINE_integer("phase1_steps", 300, "Phase 1's steps (1,024 tokens a sequence).")
flags.DEFINE_integer("phase1_batch", 8, "Phase 1's sequences a step.")
flags.DEFINE_integer("extend_steps", 60, "Steps of the extension and of its control.")
flags.DEFINE_float("decay_fraction", 0.2, "The share of --extend_steps that decays the rate.")
flags.DEFINE_string("precision", "mixed_bfloat16", "Training's --precision.")
flags.DEFINE_string("records", os.path.join(commands.REPO, "benchmarks", "records",
                                            "context_extension.jsonl"),
                    "Where the records go (appended); empty: none.")

SHORT, LONG = 1024, 8192


def split_corpus(corpus: str, out_dir: str, docs: int, min_chars: int) -> tuple[str, str]:
  """out_dir/train.jsonl and out_dir/held_out.jsonl: `docs` documents of >= `min_chars`
  characters (every k-th such document in source order) held out, the rest for training."""
  train, held = os.path.join(out_dir, "train.jsonl"), os.path.join(out_dir, "held_out.jsonl")
  if os.path.isfile(held):
    return train, held
  with gzip.open(corpus, "rt", encoding="utf-8") as f:
    rows = sorted((json.loads(line) for line in f), key=lambda r: r["source"])
  long_ones = [r["source"] for r in rows if len(r["text"]) >= min_chars]
  if len(long_ones) < docs:
    raise app.UsageError(f"--corpus={corpus} has {len(long_ones)} documents of >= {min_chars} "
                         f"characters, fewer than --held_out_docs={docs}")
  chosen = set(long_ones[::len(long_ones) // docs][:docs])
  os.makedirs(out_dir, exist_ok=True)
  cached_data.write_jsonl(train, (r["text"] for r in rows if r["source"] not in chosen))
  cached_data.write_jsonl(held, (r["text"] for r in rows if r["source"] in chosen))
  return train, held


def build_data(work: str, args) -> dict[str, str]:
  """The vocabulary (trained on the train split only) and three shard sets: train at 1,024 and
  at 8,192 (FULL-SENTENCES), the held-out documents at 8,192 (DOC-SENTENCES: a row is one
  document's text)."""
  train, held = split_corpus(args.corpus, os.path.join(work, "corpus"), args.held_out_docs,
                             args.held_out_chars)
  vocab = cached_data.vocab(os.path.join(work, "vocab"), train, args.vocab_size,
                            extra=["--format=tokenizer_json"])
  return {
      "vocab": vocab,
      "train_1k": cached_data.shards(os.path.join(work, "shards_1k"), train, vocab,
                                     max_seq_len=SHORT, validation_fraction=0),
      "train_8k": cached_data.shards(os.path.join(work, "shards_8k"), train, vocab,
                                     max_seq_len=LONG, validation_fraction=0),
      "held_out": cached_data.shards(os.path.join(work, "held_out_8k"), held, vocab,
                                     max_seq_len=LONG, num_shards=1, validation_fraction=0,
                                     extra=["--packing=doc_sentences"]),
  }


def main(argv):
  del argv
  args = commands.flag_args(flags.FLAGS)
  work = os.path.abspath(args.work_dir)
  data = build_data(work, args)
  print(data)


if __name__ == "__main__":
  app.run(main)
