r"""Tokenizer speed, parity and hostile input: roberta_tf vs HF `tokenizers` vs keras-hub.

    python -m benchmarks.data.tokenizer                  # four corpora + hostile cases (~10 min)
    python -m benchmarks.data.tokenizer --mb=0.5 --hostile_mb=0.2 --keras_hub=false   # quick

Corpora (each --mb MB of lines, in order), the vocabulary, and what they exercise:
  (a) own-vocab       python-docs with the 8K vocab trained on it (tests/testdata/hf_roberta_tiny)
  (b) foreign-vocab   python-docs with an 8K vocab trained on --other_corpus
  (c) 50k-vocab       --other_corpus text with a 50,265 vocab trained on python-docs
  (d) multilingual    the fixture's tokenizer cases (CJK, accents, emoji, RTL, ...) repeated,
                      with the python-docs 8K vocab
--other_corpus defaults to the running Python's documentation (module, class and function
docstrings: data_prep's embedded `stdlib` corpus, on every machine with Python); give a .txt or
.jsonl(.gz) to use your own text.

Cold, as a user meets it: construction (tables, word cache), tracing, and one pass of the text
through `tf.data` (batch --batch_size lines, map with AUTOTUNE); HF: construction +
`encode_batch` over the same batches (Rust threads on all cores). Warm: a second pass. Every
line's ids are compared with HF's.

Hostile inputs (one string each, --hostile_mb and half of it, to show linearity): a word of
random letters, one repeated character, random digits, emoji ZWJ sequences, many tiny words.
Ours is timed eagerly, in a `tf.function` and through a SavedModel reloaded from disk (each the
best of 2 calls, as HF's).
"""

from __future__ import annotations

import gzip
import json
import os
import random
import tempfile
import time
from collections.abc import Iterable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import app, flags  # noqa: E402

from benchmarks.common import commands  # noqa: E402
from data_prep import corpus  # noqa: E402
from data_prep.vocab_settings import VocabSettings
from roberta_tf.tokenization.tokenizer import SPECIAL_TOKENS, BytePairTokenizer  # noqa: E402

REPO = commands.REPO
FIXTURE = commands.FIXTURE_VOCAB

FLAGS = flags.FLAGS
flags.DEFINE_string("corpus", commands.DOCS_CORPUS,
                    "The main corpus, .jsonl(.gz) with a 'text' field or .txt.")
flags.DEFINE_string("vocab_dir", FIXTURE, "Vocabulary trained on --corpus (arms a and d).")
flags.DEFINE_string("other_corpus", "stdlib-docstrings",
                    "Text for arms b and c: a .txt/.jsonl(.gz) file, or 'stdlib-docstrings'.")
flags.DEFINE_float("mb", 2.0, "MB of text per corpus (0: only the hostile inputs).")
flags.DEFINE_integer("batch_size", 256, "Lines per tf.data batch / encode_batch call.")
flags.DEFINE_integer("small_vocab_size", 8000, "Size of the vocab trained on --other_corpus.")
flags.DEFINE_integer("big_vocab_size", 50265, "Size of the vocab trained on --corpus (arm c).")
flags.DEFINE_bool("keras_hub", True, "Include keras-hub's BytePairTokenizer (slow).")
flags.DEFINE_float("hostile_mb", 1.0, "Size of each hostile string (0: skip).")


def first_mb(lines: Iterable[str], mb: float) -> list[str]:
  """The first lines whose UTF-8 bytes reach `mb` MB (all of them if fewer)."""
  out, size = [], 0
  for line in lines:
    out.append(line)
    size += len(line.encode("utf-8"))
    if size >= mb * 1e6:
      break
  return out


def read_lines(path: str, mb: float) -> list[str]:
  """Lines of a .txt or .jsonl(.gz) ('text' field split on newlines), up to `mb` MB."""
  opener = gzip.open if path.endswith(".gz") else open

  def lines():
    with opener(path, "rt", encoding="utf-8") as f:
      for record in f:
        yield from (json.loads(record)["text"] if ".jsonl" in path else record.rstrip("\n")
                    ).split("\n")

  return first_mb(lines(), mb)


def stdlib_docstrings(mb: float) -> list[str]:
  """Lines of the running Python's documentation (data_prep's embedded `stdlib` corpus)."""
  return first_mb((line for doc in corpus.stdlib_documents() for line in doc), mb)


def multilingual(mb: float) -> list[str]:
  """The fixture's tokenizer cases, shuffled and repeated to `mb` MB."""
  with open(os.path.join(FIXTURE, "tokenizer_cases.jsonl"), encoding="utf-8") as f:
    cases = [json.loads(line)["text"] for line in f]
  rng = random.Random(0)
  return first_mb(iter(lambda: rng.choice(cases), None), mb)


def hf_tokenizer(vocab_dir: str):
  import tokenizers  # pylint: disable=import-outside-toplevel
  from tokenizers import models, pre_tokenizers  # pylint: disable=import-outside-toplevel
  tok = tokenizers.Tokenizer(models.BPE.from_file(os.path.join(vocab_dir, "vocab.json"),
                                                  os.path.join(vocab_dir, "merges.txt")))
  tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
  tok.add_special_tokens([tokenizers.AddedToken(t, lstrip=(t == "<mask>"), special=True)
                          for t in SPECIAL_TOKENS])
  return tok


def tf_passes(make_fn, lines, batch_size):
  """(cold s incl. construction, warm s, ids per line) of a TF tokenize function in tf.data."""
  start = time.perf_counter()
  owner, fn = make_fn()  # keep the owner alive: a tf.function method holds it weakly
  ds = tf.data.Dataset.from_tensor_slices(lines).batch(batch_size).map(
      fn, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).prefetch(4)
  out = [batch for batch in ds]
  cold = time.perf_counter() - start
  start = time.perf_counter()
  for _ in ds:
    pass
  warm = time.perf_counter() - start
  del owner
  return cold, warm, [row for b in out for row in b.to_list()]


def hf_passes(vocab_dir, lines, batch_size):
  start = time.perf_counter()
  hf = hf_tokenizer(vocab_dir)
  out = []
  for i in range(0, len(lines), batch_size):
    out.extend(e.ids for e in hf.encode_batch(lines[i:i + batch_size], add_special_tokens=False))
  cold = time.perf_counter() - start
  start = time.perf_counter()
  for i in range(0, len(lines), batch_size):
    hf.encode_batch(lines[i:i + batch_size], add_special_tokens=False)
  return cold, time.perf_counter() - start, out


def keras_hub_fn(vocab_dir):
  import keras_hub  # pylint: disable=import-outside-toplevel
  kh = keras_hub.tokenizers.BytePairTokenizer(
      vocabulary=os.path.join(vocab_dir, "vocab.json"),
      merges=os.path.join(vocab_dir, "merges.txt"), unsplittable_tokens=list(SPECIAL_TOKENS))
  return kh, kh.tokenize


def run_arm(name, lines, vocab_dir, rows):
  mb = sum(len(s.encode("utf-8")) for s in lines) / 1e6
  hf_cold, hf_warm, want = hf_passes(vocab_dir, lines, FLAGS.batch_size)

  def ours():
    tok = BytePairTokenizer.from_dir(vocab_dir)
    return tok, tok.tokenize

  cold, warm, got = tf_passes(ours, lines, FLAGS.batch_size)
  bad = sum(g != w for g, w in zip(got, want, strict=True))
  kh = ""
  if FLAGS.keras_hub:
    kh_cold, kh_warm, _ = tf_passes(lambda: keras_hub_fn(vocab_dir), lines, FLAGS.batch_size)
    kh = f" | {mb / kh_cold:.2f} / {mb / kh_warm:.2f} | {kh_cold / cold:.1f}x"
  row = (f"| {name} | {mb:.2f} | {mb / cold:.2f} / {mb / warm:.2f} | {mb / hf_cold:.2f} / "
         f"{mb / hf_warm:.2f} | {hf_cold / cold:.2f}x / {hf_warm / warm:.2f}x{kh} | "
         f"{len(lines) - bad}/{len(lines)} |")
  rows.append(row)
  print(row, flush=True)


def hostile_strings(size: int) -> dict[str, str]:
  rng = random.Random(0)
  zwj = "\U0001F469\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466\U0001F3F3\uFE0F\u200D\U0001F308"
  return {
      "random letters, one word": "".join(rng.choice("abcdefghijklmnopqrstuvwxyz")
                                          for _ in range(size)),
      "one repeated character": "a" * size,
      "random digits": "".join(rng.choice("0123456789") for _ in range(size)),
      "emoji ZWJ sequences": (zwj * (size // len(zwj.encode("utf-8")) + 1))[:size // 4],
      "tiny words ('a b c ...')": " ".join(rng.choice("abcdefghijklmnopqrstuvwxyz")
                                           for _ in range(size // 2)),
  }


class _Exported(tf.Module):
  def __init__(self, tok):
    super().__init__()
    self.tok = tok

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
  def __call__(self, texts):
    ids = self.tok.tokenize(texts)
    return {"ids": ids.flat_values, "row_splits": ids.row_splits}


def timed(fn, *args, repeats=2):
  """(best seconds of `repeats` calls, the output): the best is the steadier figure on a
  shared machine."""
  best, out = float("inf"), None
  for _ in range(repeats):
    start = time.perf_counter()
    out = fn(*args)
    best = min(best, time.perf_counter() - start)
  return best, out


def run_hostile(vocab_dir, size):
  tok = BytePairTokenizer.from_dir(vocab_dir)
  hf = hf_tokenizer(vocab_dir)
  graph_fn = tf.function(lambda x: tok.tokenize(x).flat_values, autograph=False)
  with tempfile.TemporaryDirectory() as export_dir:
    tf.saved_model.save(_Exported(tok), export_dir)
    served = tf.saved_model.load(export_dir)
  # Warm up every path, the long-word one included (its function is instantiated on first use).
  warm = tf.constant(["warm up", "x" * 5000])
  tok(warm)
  graph_fn(warm)
  served(warm)
  print(f"\nhostile input, vocab {vocab_dir} (seconds; ratio = ours / HF; x2 = time at "
        f"{size / 1e6:g} MB / time at half):")
  print("| input | bytes | HF s | eager s | tf.function s | SavedModel s | worst / HF | x2 (ours, "
        "HF) | same ids |")
  print("|---|---|---|---|---|---|---|---|---|")
  halves = hostile_strings(size // 2)
  for name, text in hostile_strings(size).items():
    times = {}
    for label, s in (("half", halves[name]), ("full", text)):
      hf_s, want = timed(lambda s: hf.encode(s, add_special_tokens=False).ids, s)
      eager_s, got = timed(lambda s: tok([s]).flat_values.numpy(), s)
      graph_s, _ = timed(lambda s: graph_fn(tf.constant([s])).numpy(), s)
      saved_s, out = timed(lambda s: served(tf.constant([s]))["ids"].numpy(), s)
      times[label] = (hf_s, eager_s, graph_s, saved_s)
    same = np.array_equal(got, want) and np.array_equal(out, want)
    hf_s, eager_s, graph_s, saved_s = times["full"]
    worst = max(eager_s, graph_s, saved_s)
    ours_x2 = worst / max(times["half"][1:])
    print(f"| {name} | {len(text.encode('utf-8')):,} | {hf_s:.2f} | {eager_s:.2f} | "
          f"{graph_s:.2f} | {saved_s:.2f} | {worst / hf_s:.2f}x | {ours_x2:.1f}, "
          f"{hf_s / times['half'][0]:.1f} | {same} |", flush=True)


def main(argv):
  del argv
  from data_prep import train_tokenizer  # pylint: disable=import-outside-toplevel
  if not FLAGS.mb:
    run_hostile(FLAGS.vocab_dir, int(FLAGS.hostile_mb * 1e6))
    return
  main_lines = read_lines(FLAGS.corpus, FLAGS.mb)
  other_lines = (stdlib_docstrings(FLAGS.mb) if FLAGS.other_corpus == "stdlib-docstrings"
                 else read_lines(FLAGS.other_corpus, FLAGS.mb))
  with tempfile.TemporaryDirectory() as work:
    other_txt = os.path.join(work, "other.txt")
    with open(other_txt, "w", encoding="utf-8") as f:
      f.write("\n".join(stdlib_docstrings(4 * FLAGS.mb) if FLAGS.other_corpus ==
                        "stdlib-docstrings" else read_lines(FLAGS.other_corpus, 4 * FLAGS.mb)))
    small_dir, big_dir = os.path.join(work, "small"), os.path.join(work, "big")
    print(f"training an {FLAGS.small_vocab_size} vocab on {FLAGS.other_corpus} and a "
          f"{FLAGS.big_vocab_size} vocab on {FLAGS.corpus} ...", flush=True)
    train_tokenizer.train(VocabSettings(input=other_txt, output_dir=small_dir,
                                        vocab_size=FLAGS.small_vocab_size, progress=False))
    # min_frequency=1: a corpus of a few MB has too few pairs seen twice for 50K merges.
    train_tokenizer.train(VocabSettings(input=FLAGS.corpus, output_dir=big_dir,
                                        vocab_size=FLAGS.big_vocab_size, min_frequency=1,
                                        progress=False))
    print(f"\ncold / warm MB/s, batch {FLAGS.batch_size} lines, tf.data AUTOTUNE, "
          f"{os.cpu_count()} CPUs:")
    header = "| corpus, vocab | MB | roberta_tf | HF tokenizers | ours / HF"
    header += " | keras-hub | ours / keras-hub cold" if FLAGS.keras_hub else ""
    print(header + " | lines = HF |")
    print("|---" * (header.count("|") + 1) + "|")
    rows = []
    run_arm(f"(a) {os.path.basename(FLAGS.corpus)}, own vocab", main_lines, FLAGS.vocab_dir, rows)
    run_arm(f"(b) same text, {FLAGS.small_vocab_size} vocab of {FLAGS.other_corpus}", main_lines,
            small_dir, rows)
    run_arm(f"(c) {FLAGS.other_corpus}, {FLAGS.big_vocab_size} vocab of "
            f"{os.path.basename(FLAGS.corpus)}", other_lines, big_dir, rows)
    run_arm("(d) multilingual cases, own vocab", multilingual(FLAGS.mb), FLAGS.vocab_dir, rows)
    if FLAGS.hostile_mb:
      run_hostile(FLAGS.vocab_dir, int(FLAGS.hostile_mb * 1e6))


if __name__ == "__main__":
  app.run(main)
