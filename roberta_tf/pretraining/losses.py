"""Masked-LM and next-sentence losses and accuracy as sums, so any batch split normalizes the
same way."""

import tensorflow as tf


def xent_and_correct(logits, labels):
  """Each prediction's cross-entropy and whether its argmax is the label: float32 [...] each,
  of logits [..., C] (cast to float32 here) and int32 labels [...]."""
  logits = tf.cast(logits, tf.float32)
  xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
  correct = tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), labels),
                    tf.float32)
  return xent, correct


def _weighted_xent_sums(logits, labels, weights):
  """(sum of weighted cross-entropy, sum of weights, sum of weighted correct argmaxes) over
  logits [..., C], int32 labels [...] and weights [...]; float32 scalars."""
  xent, correct = xent_and_correct(logits, labels)
  weights = tf.cast(weights, tf.float32)
  return (tf.reduce_sum(xent * weights), tf.reduce_sum(weights),
          tf.reduce_sum(correct * weights))


def mlm_sums(logits, mask_ids, mask_weights):
  """Sums of the MLM cross-entropy, of the weights and of the correct predictions.

  Args:
    logits: float [B, P, V] at the masked positions (cast to float32 here).
    mask_ids: int32 [B, P] the original ids.
    mask_weights: float32 [B, P], 1 for a real prediction, 0 for an empty slot.
  Returns:
    (loss_sum, weight_sum, correct_sum), float32 scalars. The mean loss over a global batch is
    the sum over all replicas and micro-batches of loss_sum divided by the sum of weight_sum:
    that is what makes 1 replica x 4 accumulation steps equal 4 replicas x 1.
  """
  return _weighted_xent_sums(logits, mask_ids, mask_weights)


def nsp_sums(logits, labels, weights):
  """Sums of the next-sentence cross-entropy, of the weights and of the correct predictions.

  Args:
    logits: float [B, 2]; labels: int32 [B] (0 next, 1 random); weights: float32 [B] (0 for
      padded rows).
  Returns:
    (loss_sum, weight_sum, correct_sum), float32 scalars.
  """
  return _weighted_xent_sums(logits, labels, weights)
