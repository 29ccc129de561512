"""Exports a model dir's checkpoint as a SavedModel that takes raw strings.

  python -m roberta_tf.export --model_dir=DIR --export_dir=DIR [--checkpoint=PATH] [--top_k=5]

Signatures: fill_mask, encode, mlm_logits, tokenize, score (see roberta_tf/serving/mlm_export.py
and README).
--precision: float32 (default), bfloat16 (weights stored and matmuls run in bfloat16; LayerNorm,
softmax and outputs float32) or auto (the faster here, measured once per machine): see
roberta_tf/serving/serving_precision.py. Every path may be a URL
(gs://, ram://, ...: any scheme tf.io.gfile has registered).
"""

from absl import app, flags

from roberta_tf.common import cli, files

FLAGS = cli.binary_flags()  # this binary's flags (common/cli.py)
flags.DEFINE_string("model_dir", None, "Model dir: config.json + checkpoints (+ vocab files).",
                    flag_values=FLAGS)
flags.DEFINE_string("export_dir", None, "SavedModel directory to write.", flag_values=FLAGS)
flags.DEFINE_string("checkpoint", None, "Checkpoint prefix to export instead of the latest.",
                    flag_values=FLAGS)
flags.DEFINE_string("vocab_dir", None, "vocab.json/merges.txt directory if not in --model_dir.",
                    flag_values=FLAGS)
flags.DEFINE_integer("top_k", 5, "Predictions per <mask> returned by fill_mask.", flag_values=FLAGS)
flags.DEFINE_integer("max_seq_len", None, "Truncation length (default: the model's maximum).",
                     flag_values=FLAGS)
flags.DEFINE_enum("precision", "float32", ["float32", "bfloat16", "auto"],
                  "Serving precision: bfloat16 stores the weights and runs the matmuls in bfloat16 "
                  "(outputs float32); auto: the faster here, measured once per machine.",
                  flag_values=FLAGS)
flags.DEFINE_bool("overwrite", False, "Replace an existing --export_dir.", flag_values=FLAGS)
flags.mark_flags_as_required(["model_dir", "export_dir"], flag_values=FLAGS)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  for flag in ("model_dir", "export_dir", "checkpoint", "vocab_dir"):
    if getattr(FLAGS, flag):
      files.check(getattr(FLAGS, flag), f"--{flag}")
  from roberta_tf.serving import mlm_export  # pylint: disable=import-outside-toplevel
  path = mlm_export.export_saved_model(
      FLAGS.model_dir, FLAGS.export_dir, checkpoint=FLAGS.checkpoint, vocab_dir=FLAGS.vocab_dir,
      top_k=FLAGS.top_k, max_seq_len=FLAGS.max_seq_len, overwrite=FLAGS.overwrite,
      precision=FLAGS.precision)
  print(f"exported SavedModel to {path} (signatures: fill_mask, encode, mlm_logits, tokenize, "
        "score)")
  return 0


def console_main():
  cli.run(main, FLAGS)


if __name__ == "__main__":
  console_main()
