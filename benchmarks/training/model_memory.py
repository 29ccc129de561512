r"""Peak host memory (RSS) of one RoBERTa training step on CPU.

  python -m benchmarks.training.model_memory                    # base, B=8, S=512, float32
  python -m benchmarks.training.model_memory --preset=tiny --batch_size=2 --seq_len=64

The step runs in a child process (a fresh interpreter: nothing else's memory counts) that
builds the pretrainer, then does one compiled forward + backward + plain SGD update on a random
batch with 15% of the positions masked (P = ceil(0.15 * S)). The parent samples the child's RSS
with psutil every few milliseconds and reports the peak, next to the child's own
getrusage(RUSAGE_SELF).ru_maxrss and its RSS after building the model (weights, before the step).
"""

from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import sys
import time

from absl import app, flags

from benchmarks.common import commands

FLAGS = flags.FLAGS
flags.DEFINE_string("preset", "base", "Model preset (roberta_tf.models.roberta.config).")
flags.DEFINE_integer("batch_size", 8, "Sequences per step.")
flags.DEFINE_integer("seq_len", 512, "Tokens per sequence (<= the preset's max_seq_len).")
flags.DEFINE_string("dtype", "float32", "Dtype policy: float32, mixed_bfloat16, mixed_float16.")
flags.DEFINE_bool("child", False, "Internal: run the step in this process and print JSON.")


def run_step(preset: str, batch_size: int, seq_len: int, dtype: str) -> dict:
  """Builds the model and runs one train step here; returns RSS figures in MiB."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  import keras
  import numpy as np
  import psutil
  import tensorflow as tf

  from roberta_tf.models import build_pretrainer
  from roberta_tf.models import preset as make_preset

  config = make_preset(preset)
  model = build_pretrainer(config, dtype=dtype)
  optimizer = keras.optimizers.SGD(learning_rate=1e-4)
  optimizer.build(model.trainable_variables)
  rss_model = psutil.Process().memory_info().rss

  rng = np.random.default_rng(0)
  num_masked = math.ceil(0.15 * seq_len)
  batch = {
      "input_ids": rng.integers(5, config.vocab_size, (batch_size, seq_len)).astype(np.int32),
      "padding_mask": np.ones((batch_size, seq_len), np.int32),
      "mask_positions": np.sort(rng.choice(seq_len, (batch_size, num_masked)), axis=1).astype(
          np.int32),
  }
  labels = rng.integers(5, config.vocab_size, (batch_size, num_masked)).astype(np.int32)

  @tf.function
  def train_step(batch, labels):
    with tf.GradientTape() as tape:
      logits = model(batch, training=True)
      loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply(grads, model.trainable_variables)
    return loss

  start = time.time()
  loss = float(train_step(batch, labels))
  mib = 1024 * 1024
  return {"loss": loss, "step_seconds": time.time() - start, "params": model.count_params(),
          "rss_after_build_mib": rss_model / mib,
          "ru_maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / mib}


def measure(preset: str, batch_size: int, seq_len: int, dtype: str) -> dict:
  """Runs `run_step` in a child process, sampling its RSS; returns the child's figures + peak."""
  import psutil

  cmd = [sys.executable, "-m", "benchmarks.training.model_memory", "--child", f"--preset={preset}",
         f"--batch_size={batch_size}", f"--seq_len={seq_len}", f"--dtype={dtype}"]
  child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           cwd=commands.REPO)
  proc = psutil.Process(child.pid)
  peak = 0
  while child.poll() is None:
    try:
      peak = max(peak, proc.memory_info().rss)
    except psutil.NoSuchProcess:
      break
    time.sleep(0.005)
  out, err = child.communicate()
  if child.returncode != 0:
    raise RuntimeError(f"child failed ({child.returncode}):\n{err[-3000:]}")
  result = json.loads(out.strip().splitlines()[-1])
  result["peak_rss_sampled_mib"] = peak / (1024 * 1024)
  return result


def main(argv):
  del argv
  if FLAGS.child:
    print(json.dumps(run_step(FLAGS.preset, FLAGS.batch_size, FLAGS.seq_len, FLAGS.dtype)))
    return
  r = measure(FLAGS.preset, FLAGS.batch_size, FLAGS.seq_len, FLAGS.dtype)
  print(f"{FLAGS.preset} ({r['params'] / 1e6:.1f}M params), B={FLAGS.batch_size}, "
        f"S={FLAGS.seq_len}, {FLAGS.dtype}, one train step (fwd+bwd+SGD) on CPU:")
  print(f"  peak RSS: {r['peak_rss_sampled_mib'] / 1024:.2f} GiB sampled by psutil, "
        f"{r['ru_maxrss_mib'] / 1024:.2f} GiB ru_maxrss; after building the model "
        f"{r['rss_after_build_mib'] / 1024:.2f} GiB; step took {r['step_seconds']:.1f} s "
        f"(incl. tracing); loss {r['loss']:.3f}")


if __name__ == "__main__":
  app.run(main)
