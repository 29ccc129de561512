"""`attend`: ModernBERT's scaled dot-product attention, global or within a window.

The one attention function of the family: training, evaluation and serving all call it, so a
faster implementation (a blocked O(L x window) local attention) replaces this function alone.
"""

from __future__ import annotations

import math

import tensorflow as tf

# Added where a key is not allowed: exp() of it underflows to exactly 0 in float32, so allowed
# keys get HF's probabilities (HF adds finfo.min; both give 0). A query with no allowed key (a
# pad query far from every real token in a local layer) gets finite values of no meaning, as
# in HF (whose values there depend on the backend): only real positions are compared.
_MASKED = -1e9


def attend(q, k, v, padding_mask, radius=None, dropout=None, training=None):
  """softmax(q k^T / sqrt(D) + mask) v over the allowed keys.

  Args:
    q, k, v: [B, A, L, D] in the compute dtype (q and k already rotated).
    padding_mask: int [B, L], 1 real, 0 pad. Pads are masked as keys only: pad queries still
      produce (meaningless) outputs.
    radius: None for global attention (every real key); an int r for local attention: query i
      sees key j iff |i - j| <= r (ModernBERT's local_attention // 2, inclusive).
    dropout: an optional keras Dropout applied to the probabilities.
    training: passed to `dropout`.

  Returns:
    [B, A, L, D] in v's dtype. Scores, mask and softmax are float32; the probabilities are
    cast to v's dtype before the product with v (HF M:165-173).
  """
  scale = 1.0 / math.sqrt(q.shape[-1])
  scores = tf.cast(tf.matmul(q, k, transpose_b=True), tf.float32) * scale
  allowed = tf.cast(padding_mask, tf.bool)[:, None, None, :]  # [B, 1, 1, L]
  if radius is not None:
    positions = tf.range(tf.shape(q)[2])
    band = tf.abs(positions[:, None] - positions[None, :]) <= radius  # [L, L]
    allowed = tf.logical_and(allowed, band[None, None])
  scores = scores + tf.where(allowed, 0.0, _MASKED)
  probs = tf.cast(tf.nn.softmax(scores, axis=-1), v.dtype)
  if dropout is not None:
    probs = dropout(probs, training=training)
  return tf.matmul(probs, v)
