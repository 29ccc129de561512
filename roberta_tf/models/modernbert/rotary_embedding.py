"""Rotary position embeddings as ModernBERT (GPT-NeoX style, HF `rotate_half`) computes them.

Every head dimension is rotated, in float32 whatever the compute dtype: angles
pos * inv_freq with pos = 0..L-1 (the same for every row, whatever the padding) and
inv_freq = 1 / theta ** (arange(0, d, 2) / d), duplicated over the two halves (cat(f, f)).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf


def inverse_frequencies(theta: float, head_size: int) -> np.ndarray:
  """float32 [head_size / 2], as HF computes it: each step rounded to float32. The power is
  taken in float64 and rounded once (torch's float32 pow is correctly rounded; numpy's float32
  pow is not always: 1 ulp apart at theta 160k)."""
  exponents = np.arange(0, head_size, 2).astype(np.float32) / np.float32(head_size)
  powers = np.power(np.float64(theta), exponents.astype(np.float64)).astype(np.float32)
  return (np.float32(1.0) / powers).astype(np.float32)


def cos_sin(seq_len, theta: float, head_size: int):
  """(cos, sin), each float32 [L, head_size], for positions 0..seq_len-1."""
  inv_freq = tf.constant(inverse_frequencies(theta, head_size))
  angles = tf.cast(tf.range(seq_len), tf.float32)[:, None] * inv_freq[None, :]
  angles = tf.concat([angles, angles], axis=-1)
  return tf.cos(angles), tf.sin(angles)


def rotate(x, cos, sin):
  """x [..., L, D] (any float dtype) rotated by (cos, sin) [L, D], in float32; x's dtype out.

  rotate_half(x) = cat(-x[..., D/2:], x[..., :D/2]); out = x cos + rotate_half(x) sin.
  """
  xf = tf.cast(x, tf.float32)
  first, second = tf.split(xf, 2, axis=-1)
  return tf.cast(xf * cos + tf.concat([-second, first], axis=-1) * sin, x.dtype)
