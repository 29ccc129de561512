r"""Is the input pipeline ever the bottleneck? Its batches/s vs. the train step's consumption.

    python -m benchmarks.data.input_pipeline [--data=SHARDS] [--batch_size=32] [--max_seq_len=128] \
        [--config=small] [--num_batches=400] [--train_steps=20] [--whole_word] [--min_ratio=10]

Without --data, shards are built first from the python-docs corpus (../shared/corpora, or the
test slice) with the fixture vocabulary, at --max_seq_len. The pipeline is timed alone (no model),
after a warm-up, in training mode (shuffle, repeat, dynamic masking). The train step is a
tf.function forward + backward + Keras AdamW update of RobertaPretrainer(--config) on one batch
from the pipeline, on whatever device TF picks. Prints both rates and their ratio; exits 1 if the
ratio is below --min_ratio.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time

import keras
import tensorflow as tf
from absl import app, flags

from benchmarks.common import cached_data, commands
from roberta_tf.data.masking import MaskingConfig
from roberta_tf.data.pipeline import InputConfig, build_pretraining_dataset
from roberta_tf.data.vocab_info import VocabInfo

FLAGS = flags.FLAGS
flags.DEFINE_string("data", None, "Shard directory; default: build one from the corpus.")
flags.DEFINE_string("vocab_dir", commands.FIXTURE_VOCAB, "vocab.json + merges.txt of the shards.")
commands.define_batch_flags(batch_size=32, max_seq_len=128, batch_help="Per-replica batch.",
                            seq_help="Padded sequence length S.")
flags.DEFINE_string("config", "small", "Model preset for the train step.")
flags.DEFINE_integer("num_batches", 400, "Pipeline batches to time (after 20 warm-up).")
flags.DEFINE_integer("train_steps", 20, "Train steps to time (after 3 warm-up).")
flags.DEFINE_bool("whole_word", False, "Time whole-word masking.")
flags.DEFINE_float("min_ratio", 10.0, "Fail below this pipeline/train-step ratio.")


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
  model = models.build_pretrainer(config)
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


def built_shards(work: str) -> str:
  """work/shards: the docs corpus (or its test slice) at --max_seq_len, 16 train shards."""
  corpus = commands.docs_corpus()
  start = time.perf_counter()
  data_dir = cached_data.shards(os.path.join(work, "shards"), corpus, FLAGS.vocab_dir,
                                max_seq_len=FLAGS.max_seq_len, num_shards=16,
                                validation_fraction=0.0, extra=["--encoder=hf"])
  with open(os.path.join(data_dir, "dataset_info.json"), encoding="utf-8") as f:
    sequences = json.load(f)["splits"]["train"]["num_sequences"]
  print(f"built {sequences} sequences from {corpus} in {time.perf_counter() - start:.1f}s")
  return data_dir


def main(argv):
  del argv
  work = None if FLAGS.data else tempfile.mkdtemp(prefix="bench_shards_")
  try:
    data_dir = FLAGS.data or built_shards(work)
    vocab = VocabInfo.from_dir(FLAGS.vocab_dir)
    config = InputConfig(per_replica_batch_size=FLAGS.batch_size, max_seq_len=FLAGS.max_seq_len,
                         seed=0)
    masking = MaskingConfig(whole_word=FLAGS.whole_word)
    rate, batch = pipeline_rate(data_dir, vocab, config, masking, FLAGS.num_batches)
  finally:
    if work:
      shutil.rmtree(work)
  print(f"pipeline: {rate:.1f} batches/s ({rate * FLAGS.batch_size:.0f} sequences/s) at "
        f"B={FLAGS.batch_size} S={FLAGS.max_seq_len}, whole_word={FLAGS.whole_word}, "
        f"{os.cpu_count()} CPUs")
  device = "GPU" if tf.config.list_physical_devices("GPU") else "CPU"
  steps = train_step_rate(batch, vocab, FLAGS.config, FLAGS.max_seq_len, FLAGS.train_steps)
  print(f"train step ({FLAGS.config}, {device}): {steps:.2f} steps/s")
  ratio = rate / steps
  print(f"ratio pipeline/train step: {ratio:.1f}x (need >= {FLAGS.min_ratio:g}x): "
        f"{'OK' if ratio >= FLAGS.min_ratio else 'FAIL'}")
  if ratio < FLAGS.min_ratio:
    sys.exit(1)


if __name__ == "__main__":
  app.run(main)
