"""Our ModernBERT pretrainer as the ModernBERT benchmarks build it (training/modernbert_vs_hf.py,
serving/modernbert_fill_mask.py): the one place, so that pointing them at the model-family
registry is a change here alone."""

from __future__ import annotations


def build_our_model(config: dict, precision: str):
  """ModernBertPretrainer of a ModernBertConfig dict (`to_dict()`'s), in `precision`'s dtype
  policy ("float32" | "mixed_bfloat16"). Imports TF: call it in a worker."""
  from roberta_tf.models.modernbert.modernbert_config import ModernBertConfig  # pylint: disable=import-outside-toplevel
  from roberta_tf.models.modernbert.modernbert_pretrainer import ModernBertPretrainer  # pylint: disable=import-outside-toplevel
  return ModernBertPretrainer(ModernBertConfig.from_dict(config), dtype=precision)
