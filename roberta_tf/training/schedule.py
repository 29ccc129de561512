"""RoBERTa's learning-rate schedule: linear warmup to the peak, then linear decay to zero; by
update count (`WarmupLinearDecay`) or by the elapsed share of a time budget (`BudgetSchedule`,
`train --train_minutes`)."""

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


class BudgetSchedule(keras.optimizers.schedules.LearningRateSchedule):
  """The same warmup + linear decay over the elapsed fraction of a time budget.

  lr = peak * f / w while f < w, then peak * (1 - f) / (1 - w), where f in [0, 1] is the share of
  the budget spent (the training loop sets `fraction` before every update) and w the warmup's
  share (a flagfile's warmup_steps / train_steps). The optimizer's step count is ignored.
  Create it under the distribution strategy's scope (it holds the `fraction` variable).
  """

  def __init__(self, peak_learning_rate: float, warmup_fraction: float):
    if not 0 <= warmup_fraction < 1:
      raise ValueError(f"warmup_fraction must be in [0, 1), got {warmup_fraction}")
    self.peak_learning_rate = float(peak_learning_rate)
    self.warmup_fraction = float(warmup_fraction)
    self.fraction = tf.Variable(0.0, dtype=tf.float32, trainable=False, name="budget_fraction",
                                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)

  def __call__(self, step):
    del step
    f = tf.clip_by_value(self.fraction, 0.0, 1.0)
    peak, w = self.peak_learning_rate, self.warmup_fraction
    warm = peak * f / max(w, 1e-12)
    decay = peak * (1.0 - f) / (1.0 - w)
    return tf.where(f < w, warm, decay)

  def get_config(self):
    return {"peak_learning_rate": self.peak_learning_rate,
            "warmup_fraction": self.warmup_fraction}
