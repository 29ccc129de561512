"""The precision an export computes in: `export --precision=float32|bfloat16|auto`.

Every precision serves the encoder in its inference-only layout
(models/roberta/transformer_layer.py's `serving`: Q, K and V one matmul with the query's 1/√d
folded into its weights, every Dense a 2-D matmul + bias add that oneDNN runs as one call with
its weights kept packed between calls).

- ``float32``: every weight and op in float32 (the reference numerics).
- ``bfloat16``: the model rebuilt under Keras' "bfloat16" policy and given the float32 weights
  rounded once: every Dense kernel and bias is *stored* in bfloat16 (read by the matmuls as is:
  no cast of the weights per call, which at batch 1 would cost more than the matmuls), and so is
  the token table the tied decoder reads whole; what the model pins to float32 stays float32
  (the position table and the embedding sum, every LayerNorm, the attention softmax, the
  residual stream, the logits: models/roberta/transformer_layer.py and embeddings.py). So the
  numerics are mixed_bfloat16 training's, outputs float32. What it costs in accuracy is measured in
  docs/bf16_accuracy.md.
- ``auto``: whichever of the two serves this model faster on this machine, timed once on a
  synthetic batch of the export's shape and cached per machine (serving_precision_probe.py).

The signatures, their inputs and their output dtypes are the same in every precision.
"""

from __future__ import annotations

from collections.abc import Callable

import keras
import tensorflow as tf

from roberta_tf.models.roberta.transformer_layer import TransformerLayer

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
  """`model` (float32, its weights restored) as the export serves it, in `precision`.

  Args:
    model: the float32 model.
    build: dtype policy name -> the same architecture with its encoder in the serving layout
      (models.build_encoder's `serving`: Q, K and V one `query_key_value` Dense), built
      (variables created), e.g. `lambda dtype: models.build_pretrainer(config, dtype=dtype,
      serving=True)`.
    precision: "float32" or "bfloat16".
  Returns:
    A new model whose every variable holds `model`'s value of the same path, cast to the
    variable's dtype (bfloat16 for the policy's variables, float32 for the layers pinned to
    float32), and each layer's `query_key_value` the fusion of `model`'s query, key and value
    (TransformerLayer.fuse_query_key_value), rounded once.
  Raises:
    PrecisionError: the rebuilt model's variables do not match `model`'s.
  """
  if precision not in COMPUTED:
    raise PrecisionError(f"cannot rebuild a model in {precision!r}")
  copy = build(precision)
  source = {w.path: w for w in model.weights}
  used = set()
  fused = {layer.query_key_value.kernel.path: layer for layer in _serving_layers(copy)}
  for variable in copy.weights:
    if variable.path in source:
      variable.assign(tf.cast(source[variable.path], variable.dtype))
      used.add(variable.path)
    elif variable.path in fused:
      prefix = variable.path[:-len("query_key_value/kernel")]
      parts = [(prefix + f"{name}/kernel", prefix + f"{name}/bias")
               for name in ("query", "key", "value")]
      missing = [k for k, _ in parts if k not in source]
      if missing:
        raise PrecisionError(f"the serving model's {variable.path} has no {missing[0]} to fuse")
      fused[variable.path].fuse_query_key_value(
          *[(source[k], source.get(b)) for k, b in parts])
      used.update(path for pair in parts for path in pair if path in source)
    elif not variable.path.endswith("query_key_value/bias"):  # set with its kernel
      raise PrecisionError(f"the serving model's variable {variable.path} is not in the "
                           "float32 model")
  if source.keys() - used:
    raise PrecisionError("the float32 model's variables are not all in the serving model: "
                         f"{sorted(source.keys() - used)[:5]}")
  return copy


def _serving_layers(model: keras.Model):
  """Every TransformerLayer in the serving layout inside `model` (through nested models)."""
  stack = [model]
  while stack:
    layer = stack.pop()
    if isinstance(layer, TransformerLayer) and layer.serving:
      yield layer
    stack.extend(getattr(layer, "layers", ()))
