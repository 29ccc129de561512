"""Loads an export for the serving binaries (fill_mask, tag, embed): one place that checks the
path, loads it, and names what is missing in one line.

TF-free at import (the binaries' --help starts instantly); TensorFlow is imported on load.
"""

from __future__ import annotations

from collections.abc import Sequence

from roberta_tf.common import files


def load(saved_model: str, signatures: Sequence[str], expected: str):
  """The SavedModel at `saved_model` (a path or a URL), which must have `signatures`.

  Changes nothing process-wide: a serving binary declares its process inference-only itself
  (frozen_weights.serve_only, in its `main`), so a program that loads an export and then
  trains computes with its own weights.

  Args:
    expected: what such an export is, for the messages ("the directory roberta_tf.export
      wrote", "the export of a --task=embedding model (finetune --export_dir)").
  Raises:
    ValueError: one line naming the path: not found, not a directory, not loadable, or without
      one of `signatures`.
  """
  files.check(saved_model, "--saved_model")
  if not files.isdir(saved_model):
    raise ValueError(f"--saved_model={saved_model}: "
                     f"{'not a directory' if files.exists(saved_model) else 'not found'} "
                     f"(expected {expected})")
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  try:
    loaded = tf.saved_model.load(saved_model)
  except (OSError, ValueError, tf.errors.OpError) as e:
    raise ValueError(f"cannot load SavedModel {saved_model!r}: {e}") from e
  missing = [name for name in signatures if name not in loaded.signatures]
  if missing:
    raise ValueError(f"{saved_model} has no {missing[0]} signature (it has "
                     f"{sorted(loaded.signatures)}; expected {expected})")
  return loaded
