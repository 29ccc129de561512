"""The pretrainers' input for MLM logits at every position (what `full_logits` feeds `call`)."""

from __future__ import annotations

import tensorflow as tf


def every_position_inputs(input_ids, padding_mask) -> dict[str, tf.Tensor]:
  """A pretrainer's `call` inputs that predict every position.

  Args:
    input_ids, padding_mask: int [B, S].

  Returns:
    {"input_ids", "padding_mask": int32 [B, S], "mask_positions": int32 [B, S] = 0..S-1 per row}.
  """
  input_ids = tf.convert_to_tensor(input_ids, tf.int32)
  batch, seq = tf.shape(input_ids)[0], tf.shape(input_ids)[1]
  return {"input_ids": input_ids, "padding_mask": tf.convert_to_tensor(padding_mask, tf.int32),
          "mask_positions": tf.broadcast_to(tf.range(seq)[None, :], [batch, seq])}
