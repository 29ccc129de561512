r"""Is the input pipeline ever the bottleneck? Its batches/s vs. the train step's consumption.

    python benchmarks/input_pipeline.py [--data=SHARDS] [--batch_size=32] [--max_seq_len=128] \
        [--config=small] [--num_batches=400] [--train_steps=20] [--whole_word] [--min_ratio=10]

Without --data, shards are built first from the python-docs corpus (../shared/corpora, or the
test slice) with the fixture vocabulary, at --max_seq_len. The pipeline is timed alone (no model),
after a warm-up, in training mode (shuffle, repeat, dynamic masking). The train step is a
tf.function forward + backward + Keras AdamW update of RobertaPretrainer(--config) on one batch
from the pipeline, on whatever device TF picks. Prints both rates and their ratio; exits 1 if the
ratio is below --min_ratio.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import argparse  # noqa: E402

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from roberta_tf.data.masking import MaskingConfig  # noqa: E402
from roberta_tf.data.pipeline import InputConfig, build_pretraining_dataset  # noqa: E402
from roberta_tf.data.vocab_info import VocabInfo  # noqa: E402

HF_TINY = os.path.join(REPO, "tests", "testdata", "hf_roberta_tiny")
CORPORA = [os.path.join(REPO, "..", "shared", "corpora", "python-docs.jsonl.gz"),
           os.path.join(REPO, "tests", "testdata", "python_docs_small.jsonl.gz")]


def parse_args(argv=None):
  # argparse, not absl flags: this script imports data_prep.build_shards, whose absl flags
  # (--vocab_dir, --seed, ...) would clash.
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--data", help="Shard directory; default: build one from the corpus.")
  p.add_argument("--vocab_dir", default=HF_TINY, help="vocab.json + merges.txt of the shards.")
  p.add_argument("--batch_size", type=int, default=32, help="Per-replica batch.")
  p.add_argument("--max_seq_len", type=int, default=128, help="Padded sequence length S.")
  p.add_argument("--config", default="small", help="Model preset for the train step.")
  p.add_argument("--num_batches", type=int, default=400,
                 help="Pipeline batches to time (after 20 warm-up).")
  p.add_argument("--train_steps", type=int, default=20,
                 help="Train steps to time (after 3 warm-up).")
  p.add_argument("--whole_word", action="store_true", help="Time whole-word masking.")
  p.add_argument("--min_ratio", type=float, default=10.0,
                 help="Fail below this pipeline/train-step ratio.")
  return p.parse_args(argv)


def pipeline_rate(data_dir, vocab, config, masking, num_batches):
  """Batches/s of the pipeline alone."""
  it = iter(build_pretraining_dataset(data_dir, "train", vocab, config, masking))
  for _ in range(20):
    next(it)
  start = time.perf_counter()
  for _ in range(num_batches):
    batch = next(it)
  batch["input_ids"].numpy()
  return num_batches / (time.perf_counter() - start), batch


def train_step_rate(batch, vocab, preset_name, max_seq_len, steps):
  """Steps/s of forward + backward + AdamW on RobertaPretrainer(preset) for one batch."""
  from roberta_tf import models  # pylint: disable=import-outside-toplevel
  config = models.preset(preset_name, vocab_size=vocab.vocab_size,
                         max_positions=max_seq_len + 2)
  model = models.RobertaPretrainer(config)
  opt = keras.optimizers.AdamW(learning_rate=1e-4, beta_1=0.9, beta_2=0.98, epsilon=1e-6,
                               weight_decay=0.01)

  @tf.function
  def step(b):
    with tf.GradientTape() as tape:
      logits = model(b, training=True)
      loss = tf.keras.losses.sparse_categorical_crossentropy(b["mask_ids"], logits,
                                                             from_logits=True)
      loss = tf.reduce_sum(loss * b["mask_weights"]) / tf.reduce_sum(b["mask_weights"])
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss

  for _ in range(3):
    step(batch).numpy()
  start = time.perf_counter()
  for _ in range(steps):
    loss = step(batch)
  loss.numpy()
  return steps / (time.perf_counter() - start)


def main():
  args = parse_args()
  data_dir, built = args.data, None
  if not data_dir:
    from data_prep.build_shards import build_shards  # pylint: disable=import-outside-toplevel
    corpus = next(c for c in CORPORA if os.path.isfile(c))
    data_dir = built = tempfile.mkdtemp(prefix="bench_shards_")
    start = time.perf_counter()
    info = build_shards(corpus, args.vocab_dir, data_dir, max_seq_len=args.max_seq_len,
                        num_shards=16, validation_fraction=0.0, encoder="hf", overwrite=True)
    print(f"built {info['splits']['train']['num_sequences']} sequences from {corpus} in "
          f"{time.perf_counter() - start:.1f}s")
  try:
    vocab = VocabInfo.from_dir(args.vocab_dir)
    config = InputConfig(per_replica_batch_size=args.batch_size, max_seq_len=args.max_seq_len,
                         seed=0)
    masking = MaskingConfig(whole_word=args.whole_word)
    rate, batch = pipeline_rate(data_dir, vocab, config, masking, args.num_batches)
  finally:
    if built:
      shutil.rmtree(built)
  print(f"pipeline: {rate:.1f} batches/s ({rate * args.batch_size:.0f} sequences/s) at "
        f"B={args.batch_size} S={args.max_seq_len}, whole_word={args.whole_word}, "
        f"{os.cpu_count()} CPUs")
  device = "GPU" if tf.config.list_physical_devices("GPU") else "CPU"
  steps = train_step_rate(batch, vocab, args.config, args.max_seq_len, args.train_steps)
  print(f"train step ({args.config}, {device}): {steps:.2f} steps/s")
  ratio = rate / steps
  print(f"ratio pipeline/train step: {ratio:.1f}x (need >= {args.min_ratio:g}x): "
        f"{'OK' if ratio >= args.min_ratio else 'FAIL'}")
  if ratio < args.min_ratio:
    sys.exit(1)


if __name__ == "__main__":
  main()
