"""Prints a SavedModel's top predictions for each <mask> in each text.

  python -m roberta_tf.fill_mask --saved_model=DIR "The capital of France is <mask>."

Needs only tensorflow and tensorflow_text (the tokenizer is inside the SavedModel).
"""

import sys

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("saved_model", None, "Directory written by roberta_tf.export.")
flags.mark_flags_as_required(["saved_model"])


def format_predictions(texts, out) -> str:
  """Human-readable lines for fill_mask's outputs (numpy arrays)."""
  lines = []
  for i, text in enumerate(texts):
    lines.append(text)
    if out["num_masks"][i] == 0:
      lines.append("  (no <mask> in this text)")
    for m in range(int(out["num_masks"][i])):
      preds = ", ".join(
          f"{out['top_tokens'][i, m, j].decode('utf-8', 'replace')!r} "
          f"{out['top_probs'][i, m, j]:.3f}" for j in range(out["top_ids"].shape[-1]))
      lines.append(f"  <mask> #{m + 1}: {preds}")
  return "\n".join(lines)


def main(argv):
  texts = argv[1:]
  if not texts:
    raise app.UsageError('give one or more texts, e.g. "The capital of France is <mask>."')
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  import tensorflow_text  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  try:
    loaded = tf.saved_model.load(FLAGS.saved_model)
  except (OSError, tf.errors.OpError) as e:
    print(f"error: cannot load SavedModel {FLAGS.saved_model!r}: {e}", file=sys.stderr)
    return 1
  out = loaded.signatures["fill_mask"](text=tf.constant(texts))
  print(format_predictions(texts, {k: v.numpy() for k, v in out.items()}))
  return 0


def run():
  app.run(main)


if __name__ == "__main__":
  run()
