r"""Where a served request's time goes: a per-op-type table of a SavedModel's fill_mask.

    python -m benchmarks.serving.op_profile --export_dir=E [--batch_size=32] [--text=long] \
        [--calls=4] [--warmup_calls=2] [--top_ops=25]

Reloads the export as a server does (`tf.saved_model.load`), calls `fill_mask` --warmup_calls
times untraced, then traces --calls calls with `tf.profiler.experimental` and sums the trace's
op events by type into step_profile.py's groups (matmul, cast, layer norm, ...), per
call. Op time is summed over threads (see step_profile.py); the wall time per call is
printed beside it. Texts: "short" (~14 tokens) or "long" (~120 tokens), each with one <mask>.
"""

from __future__ import annotations

import tempfile
import time

from absl import app, flags

from benchmarks.training import step_profile
from benchmarks.training.throughput import cpu_model

SHORT = "The capital of France is <mask>, and it is a large city."
LONG = ("Dynamic masking samples a new <mask> every time a sequence is fed to the model, so the "
        "model never sees the same masked positions twice. ") * 4

FLAGS = flags.FLAGS
flags.DEFINE_string("export_dir", None, "The SavedModel (roberta_tf.export's) to profile.")
flags.DEFINE_integer("batch_size", 32, "Texts per call.")
flags.DEFINE_enum("text", "long", ["short", "long"], "Which text, repeated batch_size times.")
flags.DEFINE_integer("calls", 4, "Traced calls.")
flags.DEFINE_integer("warmup_calls", 2, "Untraced calls first.")
flags.DEFINE_integer("top_ops", 25, "Op types listed.")
flags.mark_flag_as_required("export_dir")


def main(argv):
  del argv
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  import tensorflow_text  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import

  fill_mask = tf.saved_model.load(FLAGS.export_dir).signatures["fill_mask"]
  text = tf.constant([SHORT if FLAGS.text == "short" else LONG] * FLAGS.batch_size)
  for _ in range(FLAGS.warmup_calls):
    fill_mask(text=text)["top_ids"].numpy()
  logdir = tempfile.mkdtemp(prefix="serving_profile_")
  tf.profiler.experimental.start(logdir)
  start = time.perf_counter()
  for _ in range(FLAGS.calls):
    fill_mask(text=text)["top_ids"].numpy()
  seconds = (time.perf_counter() - start) / FLAGS.calls
  tf.profiler.experimental.stop()
  print(f"CPU: {cpu_model()}")
  print(f"{FLAGS.export_dir}: fill_mask, {FLAGS.batch_size} x {FLAGS.text} text, "
        f"{FLAGS.calls} traced calls")
  result = step_profile.table(step_profile.op_events(logdir), FLAGS.calls, seconds,
                              FLAGS.top_ops)
  step_profile.print_table(result)


if __name__ == "__main__":
  app.run(main)
