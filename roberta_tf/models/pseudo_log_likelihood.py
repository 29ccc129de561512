"""Pseudo-log-likelihood (PLL) of texts under a masked LM (Salazar et al. 2020).

PLL(text) = sum over its tokens t_i (not <s>, </s> or pads) of log P(t_i | the text with t_i
replaced by <mask>): one forward pass per token, each with exactly one position masked. Used by
`evaluate --minimal_pairs` (BLiMP) and the SavedModel's `score` signature, so both give the same
numbers.
"""

from __future__ import annotations

import tensorflow as tf


def pll_scores(pretrainer, input_ids: tf.Tensor, padding_mask: tf.Tensor, mask_id: int,
               rows_per_pass: int = 256) -> tuple[tf.Tensor, tf.Tensor]:
  """Per-text PLL and the number of tokens it sums over.

  Args:
    pretrainer: a RobertaPretrainer (its call takes input_ids, padding_mask, mask_positions).
    input_ids: int32 [B, S], each row `<s> tokens </s>` right-padded (the tokenizer's layout).
    padding_mask: int32 [B, S], 1 for real tokens.
    mask_id: the <mask> id.
    rows_per_pass: masked copies per forward pass (bounds memory: rows_per_pass x S tokens).

  Returns:
    (pll float32 [B], num_tokens int32 [B]); a text without tokens has PLL 0.
  """
  input_ids = tf.cast(input_ids, tf.int32)
  padding_mask = tf.cast(padding_mask, tf.int32)
  lengths = tf.reduce_sum(padding_mask, axis=1)                                  # [B]
  positions = tf.range(tf.shape(input_ids)[1])[None, :]                          # [1, S]
  scored = tf.logical_and(positions >= 1, positions < lengths[:, None] - 1)      # [B, S]
  where = tf.cast(tf.where(scored), tf.int32)                                    # [N, 2]
  rows, cols = where[:, 0], where[:, 1]
  n = tf.shape(where)[0]
  copies = tf.gather(input_ids, rows)                                            # [N, S]
  masks = tf.gather(padding_mask, rows)
  targets = tf.gather_nd(input_ids, where)                                       # [N]
  copies = tf.tensor_scatter_nd_update(
      copies, tf.stack([tf.range(n), cols], axis=1), tf.fill([n], tf.cast(mask_id, tf.int32)))

  def pass_logp(start):
    end = tf.minimum(start + rows_per_pass, n)
    logits = pretrainer({"input_ids": copies[start:end], "padding_mask": masks[start:end],
                         "mask_positions": cols[start:end, None]}, training=False)   # [n,1,V]
    logp = tf.nn.log_softmax(tf.cast(logits[:, 0, :], tf.float32), axis=-1)
    return tf.gather(logp, targets[start:end], batch_dims=1)                       # [n]

  parts = tf.TensorArray(tf.float32, size=0, dynamic_size=True, infer_shape=False,
                         element_shape=tf.TensorShape([None]))
  count = (n + rows_per_pass - 1) // rows_per_pass
  for i in tf.range(count):
    parts = parts.write(i, pass_logp(i * rows_per_pass))
  token_logp = tf.cond(n > 0, parts.concat, lambda: tf.zeros([0], tf.float32))
  batch = tf.shape(input_ids)[0]
  pll = tf.math.unsorted_segment_sum(token_logp, rows, batch)
  return pll, tf.maximum(lengths - 2, 0)
