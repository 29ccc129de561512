"""XLA-fused element-wise pieces of the mixed-precision training step.

TF runs a LayerNorm or an exact GELU op by op: its forward and backward passes are ~10 and
~15 element-wise kernels each, each one pass over a [B, S, H] (or [B, S, F]) tensor, and
under mixed_bfloat16 on CPU they took more of the step than the bf16 matmuls saved
(docs/performance_training.md). Compiled as small XLA clusters (forward and backward each one
loop), while the matmuls stay on oneDNN, they cost a fraction of that. XLA contracts a*b + c
into fused multiply-adds, which round once where the ops round twice, so these paths are taken
only when training under a mixed policy: float32 training and every inference keep the op-by-op
numerics (and SavedModels hold no XLA functions).
"""

from __future__ import annotations

import keras
import tensorflow as tf


@tf.function(jit_compile=True, autograph=False)
def _layer_norm(x, gamma, beta, epsilon):
  mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
  return (x - mean) * tf.math.rsqrt(variance + epsilon) * gamma + beta


@tf.function(jit_compile=True, autograph=False)
def _gelu(h):
  return tf.cast(tf.nn.gelu(tf.cast(h, tf.float32), approximate=False), h.dtype)


def layer_norm(layer: keras.layers.LayerNormalization, x, fused: bool):
  """`layer(x)` (a float32 LayerNormalization over the last axis) for x float32 [..., H];
  `fused`: the same math as one XLA cluster, on the layer's own gamma and beta (zeros when the
  layer has none: center=False, ModernBERT's LayerNorms)."""
  if not fused:
    return layer(x)
  gamma = tf.convert_to_tensor(layer.gamma)
  beta = tf.zeros_like(gamma) if layer.beta is None else tf.convert_to_tensor(layer.beta)
  return _layer_norm(tf.cast(x, tf.float32), gamma, beta, tf.constant(layer.epsilon, tf.float32))


def gelu(h, fused: bool):
  """Exact (erf) GELU of h, in h's dtype; `fused`: computed in float32 in one XLA cluster and
  rounded once to h's dtype. Op by op, a float32 h takes tf.nn.gelu (the numerics float32 always
  had); a bfloat16 h (inference of a bfloat16 export, evaluation under a mixed policy) is
  computed in float32 as 0.5 x (1 + erf(x / sqrt 2)) and rounded once: TF's bfloat16 Erfc kernel
  (tf.nn.gelu's form) is not vectorized, and this was 3.5x faster on a [3840, 3072] tensor here
  (docs/serving_performance.md)."""
  if fused:
    return _gelu(h)
  if h.dtype == tf.float32:
    return tf.nn.gelu(h, approximate=False)
  x = tf.cast(h, tf.float32)
  return tf.cast(0.5 * x * (1.0 + tf.math.erf(x * 0.7071067811865476)), h.dtype)
