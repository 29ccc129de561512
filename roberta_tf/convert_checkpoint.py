r"""Converts between Hugging Face RoBERTa checkpoints and roberta_tf model directories.

Import (HF RobertaForMaskedLM → model dir that train/evaluate/export/finetune accept):

  python -m roberta_tf.convert_checkpoint --hf_dir=roberta-base/ --model_dir=models/base

Export (model dir → config.json + model.safetensors that transformers loads):

  python -m roberta_tf.convert_checkpoint --to_hf --model_dir=models/base --hf_dir=out/

The HF side is read and written with safetensors' numpy API (no torch, no pickle). vocab.json
and merges.txt, when present, are copied along so the result carries its tokenizer.
"""

from __future__ import annotations

import os
import sys

from absl import app, flags

from roberta_tf.models import hf_weights, model_dir
from roberta_tf.models.config import ConfigError
from roberta_tf.tokenization import vocab_files

FLAGS = flags.FLAGS
flags.DEFINE_string("hf_dir", None, "Hugging Face model dir: config.json + model.safetensors "
                    "(read on import, written with --to_hf).")
flags.DEFINE_string("model_dir", None, "roberta_tf model dir: config.json + TF checkpoint "
                    "(written on import, read with --to_hf).")
flags.DEFINE_bool("to_hf", False, "Export --model_dir to --hf_dir instead of importing.")
flags.DEFINE_bool("overwrite", False, "Replace an existing output directory's model files.")


def import_hf(hf_dir: str, out_model_dir: str, overwrite: bool = False) -> str:
  """HF checkpoint dir → new model dir; returns the checkpoint prefix written."""
  pretrainer = hf_weights.load_hf(hf_dir)
  prefix = model_dir.save(out_model_dir, pretrainer, overwrite=overwrite)
  vocab_files.copy_vocab_files(hf_dir, out_model_dir)
  return prefix


def export_hf(in_model_dir: str, out_hf_dir: str, overwrite: bool = False) -> None:
  """Model dir (newest checkpoint) → HF config.json + model.safetensors in out_hf_dir."""
  weights = os.path.join(out_hf_dir, hf_weights.WEIGHTS_FILE)
  if os.path.exists(weights) and not overwrite:
    raise model_dir.ModelDirError(f"{weights} exists; pass --overwrite to replace it")
  pretrainer = model_dir.load(in_model_dir)
  hf_weights.save_hf(out_hf_dir, pretrainer)
  vocab_files.copy_vocab_files(in_model_dir, out_hf_dir)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  for name in ("hf_dir", "model_dir"):
    if not FLAGS[name].value:
      raise app.UsageError(f"--{name} is required")
  try:
    if FLAGS.to_hf:
      export_hf(FLAGS.model_dir, FLAGS.hf_dir, overwrite=FLAGS.overwrite)
      print(f"wrote {FLAGS.hf_dir}/{{config.json,{hf_weights.WEIGHTS_FILE}}}")
    else:
      prefix = import_hf(FLAGS.hf_dir, FLAGS.model_dir, overwrite=FLAGS.overwrite)
      print(f"wrote {FLAGS.model_dir}/config.json and checkpoint {prefix}")
  except (hf_weights.HFCheckpointError, model_dir.ModelDirError, ConfigError) as e:
    sys.exit(f"convert_checkpoint: error: {e}")


def run():
  """The console-script entry point (pyproject.toml)."""
  app.run(main)


if __name__ == "__main__":
  run()
