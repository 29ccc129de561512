r"""Benchmark: the exported SavedModel's fill_mask at `base` size, batch 1 and 32.

    python -m benchmarks.serving.fill_mask_speed [--vocab_dir=tests/testdata/hf_roberta_tiny] \
        [--repeats=20]

Builds a `base` model (L12 H768 A12 F3072; random weights: speed does not depend on them) with
the given vocabulary, exports it with `roberta_tf.serving.mlm_export.export_saved_model`,
reloads it the way a server would (`tf.saved_model.load`, TF + tf-text only) and times
`fill_mask` on raw strings: latency (p50/p90 ms per call) and throughput (texts/s), for
short (~12 tokens) and long (~120 tokens) texts, and a batch of 31 short texts plus one hostile
request (a 1 MB "word" of random letters, then " <mask>."; the model sees its first 512 tokens,
but the tokenizer reads all of it). As a peer, the same batch through the
in-memory Keras model (tokenizer + `RobertaPretrainer`, no SavedModel) is timed in the same run.
"""

import os
import random
import shutil
import statistics
import tempfile
import time

import tensorflow as tf
import tensorflow_text  # noqa: F401  (the SavedModel's tokenizer ops)
from absl import app, flags

from benchmarks.common import commands
from roberta_tf import models
from roberta_tf.serving import mlm_export
from roberta_tf.tokenization.tokenizer import BytePairTokenizer
from roberta_tf.tokenization.vocab_files import copy_vocab_files

SHORT = "The capital of France is <mask>, and it is a large city."
LONG = ("Dynamic masking samples a new <mask> every time a sequence is fed to the model, so the "
        "model never sees the same masked positions twice. ") * 5

FLAGS = flags.FLAGS
flags.DEFINE_string("vocab_dir", commands.FIXTURE_VOCAB, "vocab.json + merges.txt of the model.")
flags.DEFINE_integer("repeats", 20, "Timed calls at batch 1 (a quarter, at least 3, at 32).")
flags.DEFINE_string("preset", "base", "Model size preset.")


def _time(fn, repeats: int) -> list[float]:
  fn()  # warm-up (tracing, first allocation)
  out = []
  for _ in range(repeats):
    t = time.perf_counter()
    fn()
    out.append(time.perf_counter() - t)
  return out


def main(argv):
  del argv
  args = FLAGS

  tokenizer = BytePairTokenizer.from_dir(args.vocab_dir)
  config = models.preset(args.preset, vocab_size=tokenizer.vocab_size, max_seq_len=512)
  work = tempfile.mkdtemp(prefix="roberta_serving_bench_")
  try:
    model_dir = os.path.join(work, "model")
    pretrainer = models.build_pretrainer(config)
    models.save(model_dir, pretrainer)
    copy_vocab_files(args.vocab_dir, model_dir)
    export_dir = os.path.join(work, "export")
    t = time.perf_counter()
    mlm_export.export_saved_model(model_dir, export_dir)
    export_s = time.perf_counter() - t
    loaded = tf.saved_model.load(export_dir)
    fill = loaded.signatures["fill_mask"]
    module = mlm_export.ServingModule(pretrainer, tokenizer, max_seq_len=config.max_seq_len)
    print(f"{args.preset}: L{config.num_layers} H{config.hidden_size} V{config.vocab_size}, "
          f"export {export_s:.1f} s, {os.cpu_count()} CPUs")
    print(f"{'texts':>6} {'batch':>5} {'path':<22} {'p50 ms':>8} {'p90 ms':>8} {'texts/s':>8}")
    rng = random.Random(0)
    hostile = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(10**6)) + " <mask>."
    for name, text, batch in (("short", SHORT, 1), ("short", SHORT, 32), ("long", LONG, 1),
                              ("long", LONG, 32), ("31+1MB", hostile, 32)):
      texts = tf.constant([SHORT] * 31 + [hostile] if text is hostile else [text] * batch)
      for path, fn in (("SavedModel fill_mask", lambda t=texts: fill(text=t)),
                       ("in-memory Keras", lambda t=texts: module.fill_mask(t))):
        times = _time(fn, args.repeats if batch == 1 else max(args.repeats // 4, 3))
        p50 = statistics.median(times)
        p90 = sorted(times)[int(0.9 * (len(times) - 1))]
        print(f"{name:>6} {batch:>5} {path:<22} {p50 * 1e3:8.1f} {p90 * 1e3:8.1f} "
              f"{batch / p50:8.1f}")
  finally:
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
  app.run(main)
