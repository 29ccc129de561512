"""RoBERTa's learning-rate schedule: linear warmup to the peak, then linear decay to zero."""

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="roberta_tf")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
  """lr(step) = peak * step / warmup below warmup, then peak * (total - step) / (total - warmup).

  Reaches exactly 0 at ``total_steps`` and stays there (the paper's schedule; fairseq's
  ``polynomial_decay`` with power 1 and end_learning_rate 0).
  """

  def __init__(self, peak_learning_rate: float, warmup_steps: int, total_steps: int):
    if total_steps <= 0:
      raise ValueError(f"total_steps must be > 0, got {total_steps}")
    if not 0 <= warmup_steps <= total_steps:
      raise ValueError(f"warmup_steps must be in [0, total_steps={total_steps}], "
                       f"got {warmup_steps}")
    self.peak_learning_rate = float(peak_learning_rate)
    self.warmup_steps = int(warmup_steps)
    self.total_steps = int(total_steps)

  def __call__(self, step):
    step = tf.cast(step, tf.float32)
    peak = tf.constant(self.peak_learning_rate, tf.float32)
    warmup = tf.constant(max(self.warmup_steps, 1), tf.float32)
    decay_len = tf.constant(max(self.total_steps - self.warmup_steps, 1), tf.float32)
    warm = peak * step / warmup
    decay = peak * tf.maximum(0.0, (self.total_steps - step) / decay_len)
    return tf.where(step < self.warmup_steps, warm, decay)

  def get_config(self):
    return {"peak_learning_rate": self.peak_learning_rate, "warmup_steps": self.warmup_steps,
            "total_steps": self.total_steps}
