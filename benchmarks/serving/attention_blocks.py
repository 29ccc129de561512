r"""Benchmark: ModernBERT's `attend` alone at base dimensions, by block / chunk size.

    python -m benchmarks.serving.attention_blocks [--kind=local|global] [--sizes=0,64,128,256] \
        [--length=8192] [--repeats=6]

One attention call of one layer (batch 1, 12 heads, head size 64, float32, radius 64 when
--kind=local), a tf.function, each size in a fresh process (its peak RSS is the size's memory):
size 0 is `attend_reference` (the full L x L matrix); otherwise windowed_attention.LOCAL_BLOCK
(local) or GLOBAL_CHUNK (global) set to it. Prints the best of --repeats calls (wall and CPU
seconds) and the peak RSS per size; the chosen defaults are the fastest within the memory bound
(windowed_attention.py cites the figures).
"""

import json
import resource
import subprocess
import sys
import time

from absl import app, flags

from benchmarks.common import commands

FLAGS = flags.FLAGS
flags.DEFINE_enum("kind", "local", ["local", "global"], "Which layer kind to time.")
flags.DEFINE_list("sizes", ["0", "64", "128", "256"], "Block (local) / chunk (global) sizes; "
                  "0 is the full-matrix reference.")
flags.DEFINE_integer("length", 8192, "Sequence length.")
flags.DEFINE_integer("repeats", 6, "Timed calls per size (the best counts).")
flags.DEFINE_integer("one", -1, "Internal: measure this size in this process.")


def _measure(size: int) -> dict:
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  from roberta_tf.models.modernbert import (  # pylint: disable=import-outside-toplevel
    windowed_attention,
  )
  tf.config.threading.set_intra_op_parallelism_threads(2)
  rng = np.random.default_rng(0)
  q, k, v = (tf.constant(rng.normal(size=(1, 12, FLAGS.length, 64)).astype(np.float32))
             for _ in range(3))
  mask = tf.ones((1, FLAGS.length), tf.int32)
  setattr(windowed_attention, "LOCAL_BLOCK" if FLAGS.kind == "local" else "GLOBAL_CHUNK",
          size or 1)
  radius = 64 if FLAGS.kind == "local" else None
  attend = windowed_attention.attend_reference if size == 0 else windowed_attention.attend
  fn = tf.function(lambda q, k, v, m: attend(q, k, v, m, radius))
  fn(q, k, v, mask).numpy()
  wall, cpu = [], []
  for _ in range(FLAGS.repeats):
    usage = resource.getrusage(resource.RUSAGE_SELF)
    start, cpu_start = time.perf_counter(), usage.ru_utime + usage.ru_stime
    fn(q, k, v, mask).numpy()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    wall.append(time.perf_counter() - start)
    cpu.append(usage.ru_utime + usage.ru_stime - cpu_start)
  return {"kind": FLAGS.kind, "size": size, "length": FLAGS.length, "wall_s": min(wall),
          "cpu_s": min(cpu),
          "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


def main(argv):
  del argv
  if FLAGS.one >= 0:
    print(json.dumps(_measure(FLAGS.one)), flush=True)
    return
  for size in FLAGS.sizes:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.serving.attention_blocks", f"--kind={FLAGS.kind}",
         f"--length={FLAGS.length}", f"--repeats={FLAGS.repeats}", f"--one={int(size)}"],
        cwd=commands.REPO, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    print(lines[-1] if lines else f"size {size}: failed: {done.stderr[-300:]}", flush=True)


if __name__ == "__main__":
  app.run(main)
