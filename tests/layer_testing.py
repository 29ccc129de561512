"""Layer tests in one call each, in the spirit of keras-hub's `TestCase.run_layer_test`.

`run_layer_test(cls, init_kwargs, inputs, ...)` checks what every model piece of this project
promises:

- build and call: the output shape, and float32 outputs (the project keeps activations that
  leave a layer in float32 under every policy);
- the weight count (trainable and not), so a sublayer that is dropped or doubled is caught;
- `get_config` → `from_config` (and Keras' serialize / deserialize) build a layer with the same
  config that, given the same weights, gives the same outputs;
- mixed precision: under `mixed_bfloat16` and `mixed_float16` the variables stay float32, the
  outputs stay float32 and close to the float32 layer's with the same weights.

`inputs` is a dict of keyword arguments to `call` (tensors), or a tuple of positional ones.
Outputs may be a tensor, a dict of tensors or a tuple of tensors (`expected_output_shape` then
has the same structure). `build_shapes`: build each instance with `layer.build(*build_shapes)`
before its first call, as the model builders do (build_mlm_head, FinetuneModel); by default the
first call builds it.
"""

from __future__ import annotations

import keras
import numpy as np

# Mixed-precision outputs against float32 outputs with the same weights (inputs of order 1).
_PRECISION_ATOL = {"mixed_bfloat16": 0.1, "mixed_float16": 0.02}


def _call(layer, inputs, **kwargs):
  if isinstance(inputs, dict):
    return layer(**inputs, **kwargs)
  return layer(*inputs, **kwargs)


def _numpy(outputs):
  if isinstance(outputs, dict):
    return {k: np.asarray(v) for k, v in outputs.items()}
  if isinstance(outputs, tuple | list):
    return tuple(np.asarray(v) for v in outputs)
  return np.asarray(outputs)


def _items(outputs):
  """(key, tensor) pairs of a dict, a tuple or a single tensor (key None)."""
  if isinstance(outputs, dict):
    return list(outputs.items())
  if isinstance(outputs, tuple | list):
    return list(enumerate(outputs))
  return [(None, outputs)]


def _shapes(outputs):
  if isinstance(outputs, dict):
    return {k: tuple(v.shape) for k, v in outputs.items()}
  if isinstance(outputs, tuple | list):
    return tuple(tuple(v.shape) for v in outputs)
  return tuple(outputs.shape)


def _assert_close(a, b, atol, what):
  a, b = dict(_items(a)), dict(_items(b))
  assert a.keys() == b.keys(), what
  for k in a:
    np.testing.assert_allclose(a[k], b[k], atol=atol, err_msg=what if k is None else f"{what}: {k}")


def _dtypes(outputs):
  return {keras.backend.standardize_dtype(v.dtype) for _, v in _items(outputs)}


def _new(layer_cls, kwargs, build_shapes):
  layer = layer_cls(**kwargs)
  if build_shapes is not None:
    layer.build(*build_shapes)
  return layer


def run_layer_test(layer_cls, init_kwargs: dict, inputs, *, expected_output_shape,
                   expected_num_trainable_weights: int,
                   expected_num_non_trainable_weights: int = 0,
                   run_precision_test: bool = True, seed: int = 0,
                   build_shapes: tuple | None = None):
  """Builds ``layer_cls(**init_kwargs)``, calls it on ``inputs`` and checks the list above.

  Returns the float32 layer and its (training=False) outputs, for further checks.
  """
  keras.utils.set_random_seed(seed)
  layer = _new(layer_cls, init_kwargs, build_shapes)
  out = _call(layer, inputs, training=False)
  shapes = _shapes(out)
  assert shapes == expected_output_shape, (shapes, expected_output_shape)
  assert _dtypes(out) == {"float32"}, _dtypes(out)
  assert len(layer.trainable_weights) == expected_num_trainable_weights, [
      w.path for w in layer.trainable_weights]
  assert len(layer.non_trainable_weights) == expected_num_non_trainable_weights, [
      w.path for w in layer.non_trainable_weights]
  want = _numpy(out)

  config = layer.get_config()
  for clone in (layer_cls.from_config(config),
                keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))):
    assert clone.get_config() == config
    if build_shapes is not None and not clone.built:
      clone.build(*build_shapes)
    _call(clone, inputs, training=False)  # builds it (if not built yet)
    clone.set_weights(layer.get_weights())
    _assert_close(_numpy(_call(clone, inputs, training=False)), want, 1e-6, "config round trip")

  if run_precision_test:
    for policy, atol in _PRECISION_ATOL.items():
      mixed = _new(layer_cls, {**init_kwargs, "dtype": policy}, build_shapes)
      _call(mixed, inputs, training=False)
      mixed.set_weights(layer.get_weights())
      assert {keras.backend.standardize_dtype(w.dtype) for w in mixed.weights} == {"float32"}
      got = _call(mixed, inputs, training=False)
      assert _dtypes(got) == {"float32"}, (policy, _dtypes(got))
      _assert_close(_numpy(got), want, atol, policy)
  return layer, want
