"""Exports a model dir's checkpoint as a SavedModel that takes raw strings.

  python -m roberta_tf.export --model_dir=DIR --export_dir=DIR [--checkpoint=PATH] [--top_k=5]

Signatures: fill_mask, encode, mlm_logits, tokenize, score (see roberta_tf/serving/mlm_export.py
and README).
--precision: float32 (default), bfloat16 (weights stored and matmuls run in bfloat16; LayerNorm,
softmax and outputs float32) or auto (the faster here, measured once per machine): see
roberta_tf/serving/serving_precision.py. Every path may be a URL
(gs://, ram://, ...: any scheme tf.io.gfile has registered).
"""

from __future__ import annotations

import dataclasses

from absl import app

from roberta_tf.common import cli, options
from roberta_tf.common.options import option


@dataclasses.dataclass(frozen=True)
class ExportSettings:
  """export's flags."""
  model_dir: str = option(help="Model dir: config.json + checkpoints (+ vocab files).", path=True)
  export_dir: str = option(help="SavedModel directory to write.", path=True)
  checkpoint: str | None = option(
      None, "Checkpoint prefix to export instead of the latest; best: train --keep_best's "
      "(--model_dir/best/).", path=True)
  vocab_dir: str | None = option(
      None, "vocab.json/merges.txt (or tokenizer.json) directory if not in --model_dir.",
      path=True)
  top_k: int = option(5, "Predictions per <mask> returned by fill_mask.")
  max_seq_len: int | None = option(None, "Truncation length (default: the model's maximum).")
  precision: str = option(
      "float32", "Serving precision: bfloat16 stores the weights and runs the matmuls in "
      "bfloat16 (outputs float32); auto: the faster here, measured once per machine.",
      choices=("float32", "bfloat16", "auto"))
  overwrite: bool = option(False, "Replace an existing --export_dir.")


FLAGS = cli.binary_flags()  # this binary's flags (common/cli.py)
options.define_flags(ExportSettings, FLAGS)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  s = options.from_flags(ExportSettings, FLAGS)
  from roberta_tf.serving import mlm_export  # pylint: disable=import-outside-toplevel
  path = mlm_export.export_saved_model(
      s.model_dir, s.export_dir, checkpoint=s.checkpoint, vocab_dir=s.vocab_dir, top_k=s.top_k,
      max_seq_len=s.max_seq_len, overwrite=s.overwrite, precision=s.precision)
  print(f"exported SavedModel to {path} (signatures: fill_mask, encode, mlm_logits, tokenize, "
        "score)")
  return 0


def console_main():
  cli.run(main, FLAGS)


if __name__ == "__main__":
  console_main()
