"""Our ModernBERT pretrainer as the ModernBERT benchmarks build it (training/modernbert_vs_hf.py,
serving/modernbert_fill_mask.py): through the model-family registry, as training builds it."""

from __future__ import annotations


def build_our_model(config: dict, precision: str):
  """The pretrainer of a ModernBertConfig dict (`to_dict()`'s), in `precision`'s dtype policy
  ("float32" | "mixed_bfloat16"). Imports TF: call it in a worker."""
  from roberta_tf.models import registry  # pylint: disable=import-outside-toplevel
  return registry.build_pretrainer(registry.config_from_dict(config), dtype=precision)
