"""Rotary position embeddings as ModernBERT (GPT-NeoX style, HF `rotate_half`) computes them.

Every head dimension is rotated, in float32 whatever the compute dtype: angles
pos * inv_freq with pos = 0..L-1 (the same for every row, whatever the padding) and
inv_freq = 1 / theta ** (arange(0, d, 2) / d), duplicated over the two halves (cat(f, f)).
In rows that pack several documents (`document_positions`) pos restarts at 0 at each
document's first token, so each document is rotated as it would be alone.
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


def document_positions(document_ids):
  """int32 [B, L]: each token's position in its own document, for document_ids int [B, L]
  (each row's ids 0, 1, ... in order, non-decreasing: data/example_spec.document_ids).

  A document's first position is the count of its row's tokens in earlier documents (a
  segment sum and an exclusive cumsum: O(B L), no search; XLA-compilable)."""
  document_ids = tf.cast(document_ids, tf.int32)
  batch, length = tf.shape(document_ids)[0], tf.shape(document_ids)[1]
  rows = tf.range(batch)[:, None] * length
  counts = tf.math.unsorted_segment_sum(
      tf.ones([batch * length], tf.int32), tf.reshape(document_ids + rows, [-1]),
      batch * length)  # tokens per (row, document)
  starts = tf.cumsum(tf.reshape(counts, [batch, length]), axis=1, exclusive=True)
  return tf.range(length)[None, :] - tf.gather(starts, document_ids, batch_dims=1)


def cos_sin_at(positions, theta: float, head_size: int):
  """(cos, sin), each float32 [B, 1, L, head_size], for positions int [B, L] (a row's own
  positions; the 1 broadcasts over heads)."""
  inv_freq = tf.constant(inverse_frequencies(theta, head_size))
  angles = tf.cast(positions, tf.float32)[:, None, :, None] * inv_freq
  angles = tf.concat([angles, angles], axis=-1)
  return tf.cos(angles), tf.sin(angles)


def rotate(x, cos, sin):
  """x [..., L, D] (any float dtype) rotated by (cos, sin) [L, D] (or [B, 1, L, D] of
  `cos_sin_at` for x [B, A, L, D]), in float32; x's dtype out.

  rotate_half(x) = cat(-x[..., D/2:], x[..., :D/2]); out = x cos + rotate_half(x) sin.
  """
  xf = tf.cast(x, tf.float32)
  first, second = tf.split(xf, 2, axis=-1)
  return tf.cast(xf * cos + tf.concat([-second, first], axis=-1) * sin, x.dtype)
