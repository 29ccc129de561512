"""The precision an export computes in: `export --precision=float32|bfloat16|auto`.

- ``float32``: every weight and op in float32 (the reference numerics).
- ``bfloat16``: the model rebuilt under Keras' "bfloat16" policy and given the float32 weights
  rounded once: every Dense kernel and bias is *stored* in bfloat16 (read by the matmuls as is:
  no cast of the weights per call, which at batch 1 would cost more than the matmuls), and so is
  the token table the tied decoder reads whole; what the model pins to float32 stays float32
  (the position table and the embedding sum, every LayerNorm, the attention softmax, the
  residual stream, the logits: models/transformer_layer.py and embeddings.py). So the numerics
  are mixed_bfloat16 training's, outputs float32. What it costs in accuracy is measured in
  docs/bf16_accuracy.md.
- ``auto``: whichever of the two serves this model faster on this machine, timed once on a
  synthetic batch of the export's shape and cached per machine (serving_precision_probe.py).

The signatures, their inputs and their output dtypes are the same in every precision.
"""

from __future__ import annotations

from collections.abc import Callable

import keras
import tensorflow as tf

PRECISIONS = ("float32", "bfloat16", "auto")
COMPUTED = ("float32", "bfloat16")  # what `auto` resolves to


class PrecisionError(ValueError):
  """An unknown --precision, or a model whose bfloat16 rebuild does not match its weights."""


def check(precision: str) -> str:
  if precision not in PRECISIONS:
    raise PrecisionError(f"--precision={precision!r}: choose one of {list(PRECISIONS)}")
  return precision


def rebuilt(model: keras.Model, build: Callable[[str], keras.Model],
            precision: str) -> keras.Model:
  """`model` (float32, its weights restored) in `precision`.

  Args:
    model: the float32 model.
    build: dtype policy name -> the same architecture, built (variables created), e.g.
      `lambda dtype: models.RobertaPretrainer(config, dtype=dtype)`.
    precision: "float32" (returns `model` itself) or "bfloat16".
  Returns:
    A model whose every variable holds `model`'s value of the same path, cast to the variable's
    dtype (bfloat16 for the policy's variables, float32 for the layers pinned to float32).
  Raises:
    PrecisionError: the rebuilt model's variable paths differ from `model`'s.
  """
  if precision == "float32":
    return model
  if precision != "bfloat16":
    raise PrecisionError(f"cannot rebuild a model in {precision!r}")
  copy = build("bfloat16")
  source = {w.path: w for w in model.weights}
  target = {w.path: w for w in copy.weights}
  if source.keys() != target.keys():
    raise PrecisionError("the bfloat16 model's variables differ from the float32 model's: "
                         f"{sorted(source.keys() ^ target.keys())[:5]}")
  for path, variable in target.items():
    variable.assign(tf.cast(source[path], variable.dtype))
  return copy

