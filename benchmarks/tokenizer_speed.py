r"""Tokenizer throughput and parity: roberta_tf vs keras-hub (TF path) vs HF `tokenizers`.

    python -m benchmarks.tokenizer_speed                       # full python-docs corpus
    python -m benchmarks.tokenizer_speed --max_mb=1 --big_vocab_size=0 --long_mb=0.1   # quick

Input: every line of the corpus (each document's text split on "\n"), in batches of
--batch_size lines. The TF tokenizers run inside `tf.data` (`map` with --parallel_calls),
HF `tokenizers` runs `encode_batch` (Rust threads on all cores). "cold" is a fresh tokenizer's
first pass (graph tracing and, for keras-hub, an empty word cache included; the construction
time is printed apart), "warm" the second pass. MB are UTF-8 bytes of the input lines (1e6).
CPU s/MB (process time, all threads) is printed beside each MB/s: on a shared machine it is the
steadier figure.

Also printed: id parity with HF over every line (this tokenizer and keras-hub), the time for
one line of --long_mb MB without whitespace, and the memory of the tables (RSS growth while
building the tokenizer) for the test vocabulary and a --big_vocab_size vocabulary trained on
the corpus (roberta-base's size by default).
"""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import (
  app,  # noqa: E402
  flags,  # noqa: E402
)

from roberta_tf.tokenization.tokenizer import BytePairTokenizer  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FLAGS = flags.FLAGS
flags.DEFINE_string("corpus", os.path.join(os.path.dirname(REPO), "shared", "corpora",
                                           "python-docs.jsonl.gz"), ".jsonl(.gz) corpus.")
flags.DEFINE_string("vocab_dir", os.path.join(REPO, "tests/testdata/hf_roberta_tiny"),
                    "vocab.json + merges.txt used for throughput and parity.")
flags.DEFINE_float("max_mb", 0, "Use only the first MB of lines (0: all).")
flags.DEFINE_integer("batch_size", 4096, "Lines per batch (~150 KB of this corpus).")
flags.DEFINE_integer("parallel_calls", 2, "tf.data map parallelism (the machine has 2 cores).")
flags.DEFINE_bool("keras_hub", True, "Include keras-hub's BytePairTokenizer (slow: ~1 min).")
flags.DEFINE_float("long_mb", 1.0, "Size of the line without whitespace (0: skip).")
flags.DEFINE_integer("big_vocab_size", 50265, "Train a vocabulary of this size on the corpus "
                     "for the table-memory and throughput figures (0: skip).")


def read_lines(path: str, max_mb: float) -> list[str]:
  lines, size = [], 0
  with gzip.open(path, "rt", encoding="utf-8") as f:
    for doc in f:
      for line in json.loads(doc)["text"].split("\n"):
        lines.append(line)
        size += len(line.encode("utf-8"))
        if max_mb and size >= max_mb * 1e6:
          return lines
  return lines


def hf_tokenizer(vocab_dir: str):
  import tokenizers  # pylint: disable=import-outside-toplevel
  from tokenizers import models, pre_tokenizers  # pylint: disable=import-outside-toplevel
  tok = tokenizers.Tokenizer(models.BPE.from_file(os.path.join(vocab_dir, "vocab.json"),
                                                  os.path.join(vocab_dir, "merges.txt")))
  tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
  tok.add_special_tokens([tokenizers.AddedToken(t, lstrip=(t == "<mask>"), special=True)
                          for t in ("<s>", "<pad>", "</s>", "<unk>", "<mask>")])
  return tok


def tf_passes(make_fn, lines, batch_size, parallel_calls, passes=2):
  """Builds a tokenize function, runs `passes` tf.data passes; returns (build s, [pass s], ids)."""
  start = time.perf_counter()
  fn = make_fn()
  build = time.perf_counter() - start
  ds = tf.data.Dataset.from_tensor_slices(lines).batch(batch_size).map(
      fn, num_parallel_calls=parallel_calls, deterministic=True).prefetch(4)
  times, ids = [], None
  for p in range(passes):
    start, cpu = time.perf_counter(), time.process_time()
    out = [batch for batch in ds]
    times.append((time.perf_counter() - start, time.process_time() - cpu))
    if p == 0:
      ids = out
  return build, times, ids


def hf_passes(vocab_dir, lines, batch_size, passes=2):
  start = time.perf_counter()
  hf = hf_tokenizer(vocab_dir)
  build = time.perf_counter() - start
  times, ids = [], None
  for p in range(passes):
    start, cpu = time.perf_counter(), time.process_time()
    out = []
    for i in range(0, len(lines), batch_size):
      out.extend(e.ids for e in hf.encode_batch(lines[i:i + batch_size],
                                                add_special_tokens=False))
    times.append((time.perf_counter() - start, time.process_time() - cpu))
    if p == 0:
      ids = out
  return build, times, ids, hf


def mismatches(batches, expected) -> int:
  got = [row for b in batches for row in b.to_list()]
  assert len(got) == len(expected)
  return sum(g != e for g, e in zip(got, expected, strict=True))


def table_bytes(tok: BytePairTokenizer) -> int:
  """Bytes of the tokenizer's tensors and table contents (keys + values)."""
  total = 0
  for t in (tok._class_table, tok._byte_ids, tok._merged_ids, tok._id_bytes,  # pylint: disable=protected-access
            tok._cache_ids, tok._cache_slots):  # pylint: disable=protected-access
    total += int(tf.size(t)) * (t.dtype.size if t.dtype != tf.string else 1)
  total += int(tf.reduce_sum(tf.strings.length(tok._id_bytes))) + 32 * int(tf.size(tok._id_bytes))  # pylint: disable=protected-access
  for table in (tok._pair_ranks, tok._cache_index):  # pylint: disable=protected-access
    keys, values = table.export()
    total += int(tf.size(values)) * values.dtype.size
    total += (int(tf.reduce_sum(tf.strings.length(keys))) + 32 * int(tf.size(keys))
              if keys.dtype == tf.string else int(tf.size(keys)) * keys.dtype.size)
  return total


def build_rss_mb(vocab_dir: str) -> float:
  """RSS growth (MB) of building a tokenizer for `vocab_dir`, in a fresh process where TF and
  a first tokenizer (the test vocabulary) are already loaded, so only the new tables count."""
  code = ("import gc, os, psutil, sys\n"
          "os.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'\n"
          "from roberta_tf.tokenization.tokenizer import BytePairTokenizer as B\n"
          "B.from_dir(sys.argv[1])\n"
          "gc.collect(); before = psutil.Process().memory_info().rss\n"
          "tok = B.from_dir(sys.argv[2])\n"
          "gc.collect(); print((psutil.Process().memory_info().rss - before) / 1e6)\n")
  out = subprocess.run([sys.executable, "-c", code, FLAGS.vocab_dir, vocab_dir], cwd=REPO,
                       capture_output=True, text=True, check=True)
  return float(out.stdout.strip().splitlines()[-1])


def report_throughput(name, mb, build, times):
  """Prints wall-clock MB/s and CPU seconds per MB (all threads; the latter does not depend on
  what else runs on the machine) of the cold and warm pass; returns the two MB/s."""
  (cold, cold_cpu), (warm, warm_cpu) = times
  print(f"  {name:<20} build {build:5.2f} s  cold {mb / cold:6.2f} MB/s ({cold_cpu / mb:5.2f} "
        f"CPU s/MB)  warm {mb / warm:6.2f} MB/s ({warm_cpu / mb:5.2f} CPU s/MB)", flush=True)
  return mb / cold, mb / warm


def long_line(kind: str, size: int, corpus_lines: list[str]) -> str:
  if kind == "text":  # real text with the whitespace removed: long letter runs and punctuation
    text = "".join("".join(corpus_lines).split())
    while len(text) < size:
      text += text
    return text[:size]
  rng = random.Random(0)
  return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(size))  # "letters"


def main(argv):
  del argv
  lines = read_lines(FLAGS.corpus, FLAGS.max_mb)
  mb = sum(len(s.encode("utf-8")) for s in lines) / 1e6
  print(f"corpus {FLAGS.corpus}: {len(lines)} lines, {mb:.2f} MB; vocab {FLAGS.vocab_dir}; "
        f"batch {FLAGS.batch_size} lines, tf.data parallel_calls={FLAGS.parallel_calls}, "
        f"{os.cpu_count()} CPUs", flush=True)

  print("throughput (MB/s of input text):")
  build, times, hf_ids, hf = hf_passes(FLAGS.vocab_dir, lines, FLAGS.batch_size)
  hf_cold, hf_warm = report_throughput("HF tokenizers", mb, build, times)
  build, times, ours = tf_passes(lambda: BytePairTokenizer.from_dir(FLAGS.vocab_dir), lines,
                                 FLAGS.batch_size, FLAGS.parallel_calls)
  ours_cold, ours_warm = report_throughput("roberta_tf", mb, build, times)
  ours_bad = mismatches(ours, hf_ids)
  if FLAGS.keras_hub:
    import keras_hub  # pylint: disable=import-outside-toplevel

    def make_keras_hub():
      kh = keras_hub.tokenizers.BytePairTokenizer(
          vocabulary=os.path.join(FLAGS.vocab_dir, "vocab.json"),
          merges=os.path.join(FLAGS.vocab_dir, "merges.txt"),
          unsplittable_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
      return kh.tokenize

    build, times, kh_ids = tf_passes(make_keras_hub, lines, FLAGS.batch_size,
                                     FLAGS.parallel_calls)
    kh_cold, kh_warm = report_throughput("keras-hub (TF path)", mb, build, times)
    kh_bad = mismatches(kh_ids, hf_ids)
  print("ratios:")
  print(f"  roberta_tf / HF tokenizers: cold {ours_cold / hf_cold:.2f}x  "
        f"warm {ours_warm / hf_warm:.2f}x")
  if FLAGS.keras_hub:
    print(f"  roberta_tf / keras-hub:     cold {ours_cold / kh_cold:.2f}x  "
          f"warm {ours_warm / kh_warm:.2f}x")
  print("parity with HF tokenizers (ids per line):")
  print(f"  roberta_tf: {len(lines) - ours_bad}/{len(lines)} lines identical, "
        f"{ours_bad} mismatches")
  if FLAGS.keras_hub:
    print(f"  keras-hub:  {len(lines) - kh_bad}/{len(lines)} lines identical, "
          f"{kh_bad} mismatches")

  tok = BytePairTokenizer.from_dir(FLAGS.vocab_dir)
  if FLAGS.keras_hub:
    pitfalls = ["trailing spaces   ", "tabs\t\t", "६ digits ६६", "x६y", "is <mask>.", "a <s> b",
                "it's  'sup", "new\n\nlines\n"]
    want = [e.ids for e in hf.encode_batch(pitfalls, add_special_tokens=False)]
    ours_p = tok(pitfalls).to_list()
    kh_p = tf.function(make_keras_hub())(tf.constant(pitfalls)).to_list()  # its TF path
    print(f"  on {len(pitfalls)} pitfall strings (trailing whitespace, '६', special tokens, "
          f"contractions): roberta_tf {sum(a != b for a, b in zip(ours_p, want, strict=True))} "
          f"mismatches, keras-hub {sum(a != b for a, b in zip(kh_p, want, strict=True))}")
  if FLAGS.long_mb:
    size = int(FLAGS.long_mb * 1e6)
    print(f"one line of {size} bytes without whitespace:")
    for kind in ("text", "letters"):
      text = long_line(kind, size, lines)
      start = time.perf_counter()
      got = tok([text]).flat_values.numpy()
      ours_s = time.perf_counter() - start
      start = time.perf_counter()
      want = hf.encode(text, add_special_tokens=False).ids
      hf_s = time.perf_counter() - start
      print(f"  {kind:<8} roberta_tf {ours_s:7.2f} s   HF {hf_s:6.2f} s   "
            f"{len(want)} ids, identical: {np.array_equal(got, want)}", flush=True)

  print("tables (RSS growth of building one more tokenizer; tensor + table contents):")
  print(f"  {tok.vocab_size:>6} vocab: {build_rss_mb(FLAGS.vocab_dir):7.1f} MB RSS  "
        f"{table_bytes(tok) / 1e6:6.1f} MB contents")
  if FLAGS.big_vocab_size:
    from data_prep import train_tokenizer  # pylint: disable=import-outside-toplevel
    with tempfile.TemporaryDirectory() as big_dir:
      start = time.perf_counter()
      # min_frequency=1: this 11 MB corpus has too few pairs seen twice for 50K merges.
      train_tokenizer.train(FLAGS.corpus, FLAGS.big_vocab_size, big_dir, min_frequency=1,
                            show_progress=False)
      trained = time.perf_counter() - start
      start = time.perf_counter()
      big = BytePairTokenizer.from_dir(big_dir)
      build = time.perf_counter() - start
      print(f"  {big.vocab_size:>6} vocab: {build_rss_mb(big_dir):7.1f} MB RSS  "
            f"{table_bytes(big) / 1e6:6.1f} MB contents  (trained in {trained:.0f} s on the "
            f"corpus, built in {build:.1f} s)")
      del big
      print(f"throughput with the {FLAGS.big_vocab_size} vocabulary:")
      build, times, big_hf_ids, _ = hf_passes(big_dir, lines, FLAGS.batch_size)
      big_hf = report_throughput("HF tokenizers", mb, build, times)
      build, times, big_ids = tf_passes(lambda: BytePairTokenizer.from_dir(big_dir), lines,
                                        FLAGS.batch_size, FLAGS.parallel_calls)
      big_ours = report_throughput("roberta_tf", mb, build, times)
      print(f"  roberta_tf / HF tokenizers: cold {big_ours[0] / big_hf[0]:.2f}x  warm "
            f"{big_ours[1] / big_hf[1]:.2f}x; parity: "
            f"{mismatches(big_ids, big_hf_ids)} mismatches in {len(lines)} lines")


if __name__ == "__main__":
  app.run(main)
