"""The learning-rate schedules: RoBERTa's linear warmup to the peak, then linear decay to zero
(`WarmupLinearDecay`), and warmup-stable-decay (`WarmupStableDecay`: warmup, the peak held, then
a decay of a set length, linear or 1 - sqrt, to a floor); by update count, or by the elapsed
share of a time budget (`BudgetSchedule`, `train --train_minutes`; either shape)."""

import keras
import tensorflow as tf

# The decay's shapes: the share d in [0, 1] of the decay done becomes the share of the way from
# the peak down to the floor: linear d; 1 - sqrt: sqrt(d), which falls fast first (ModernBERT's
# decay phase; Hägele et al. 2024 found it beat a linear cooldown of equal length).
DECAY_SHAPES = ("linear", "1-sqrt")


def decayed(peak, floor, done, shape: str):
  """floor + (peak - floor) * (1 - drop(done)), `done` the decay's share done (clipped to
  [0, 1]); drop = done (linear) or sqrt(done) (1-sqrt). float32 tensors. (In this order the
  end is the floor exactly: peak - (peak - floor) cancels to ~1e-5 of the floor.)"""
  if shape not in DECAY_SHAPES:
    raise ValueError(f"decay shape {shape!r}: expected one of {', '.join(DECAY_SHAPES)}")
  done = tf.clip_by_value(done, 0.0, 1.0)
  drop = done if shape == "linear" else tf.sqrt(done)
  return floor + (peak - floor) * (1.0 - drop)


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
  """The same schedules over the elapsed fraction of a time budget.

  lr = peak * f / w while f < w, then peak * (1 - f) / (1 - w), where f in [0, 1] is the share of
  the budget spent (the training loop sets `fraction` before every update) and w the warmup's
  share (a flagfile's warmup_steps / train_steps). With `decay_fraction` d (warmup-stable-decay)
  the peak holds after the warmup until f = 1 - d, then `decayed(peak, floor, (f - 1 + d) / d,
  shape)`: the decay takes the budget's last share d. The optimizer's step count is ignored.
  Create it under the distribution strategy's scope (it holds the `fraction` variable).
  """

  def __init__(self, peak_learning_rate: float, warmup_fraction: float,
               decay_fraction: float | None = None, shape: str = "linear",
               decay_floor: float = 0.0):
    if not 0 <= warmup_fraction < 1:
      raise ValueError(f"warmup_fraction must be in [0, 1), got {warmup_fraction}")
    if decay_fraction is not None and not 0 <= decay_fraction <= 1 - warmup_fraction:
      raise ValueError(f"decay_fraction must be in [0, 1 - warmup_fraction], got "
                       f"{decay_fraction}")
    self.peak_learning_rate = float(peak_learning_rate)
    self.warmup_fraction = float(warmup_fraction)
    self.decay_fraction = None if decay_fraction is None else float(decay_fraction)
    self.shape, self.decay_floor = shape, float(decay_floor)
    self.fraction = tf.Variable(0.0, dtype=tf.float32, trainable=False, name="budget_fraction",
                                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)

  def __call__(self, step):
    del step
    f = tf.clip_by_value(self.fraction, 0.0, 1.0)
    peak, w = self.peak_learning_rate, self.warmup_fraction
    warm = peak * f / max(w, 1e-12)
    if self.decay_fraction is None:  # linear decay over all after the warmup
      decay = peak * (1.0 - f) / (1.0 - w)
    else:  # warmup-stable-decay: the decay takes the budget's last decay_fraction
      start, d = 1.0 - self.decay_fraction, self.decay_fraction
      decay = tf.where(f < start, tf.constant(peak, tf.float32), decayed(
          tf.constant(peak, tf.float32), peak * self.decay_floor, (f - start) / max(d, 1e-12),
          self.shape))
    return tf.where(f < w, warm, decay)

  def get_config(self):
    return {"peak_learning_rate": self.peak_learning_rate,
            "warmup_fraction": self.warmup_fraction, "decay_fraction": self.decay_fraction,
            "shape": self.shape, "decay_floor": self.decay_floor}


@keras.saving.register_keras_serializable(package="roberta_tf")
class WarmupStableDecay(keras.optimizers.schedules.LearningRateSchedule):
  """Warmup-stable-decay ("trapezoidal"): lr(step) = peak * step / warmup below warmup, peak up
  to decay_start = total - decay_steps, then `decayed(peak, floor, (step - decay_start) /
  decay_steps, shape)`, reaching `floor` (= decay_floor * peak) at ``total_steps``.

  decay_steps 0: no decay, the peak holds to the end (a stable phase to branch decays from:
  docs/schedules.md). The rate at a step depends on total_steps only through decay_start, so
  a run of total T whose stable phase reached step k < T - D and a run of total k + D agree on
  every step up to k: a decay branch from step k is the planned run of total k + D.
  """

  def __init__(self, peak_learning_rate: float, warmup_steps: int, total_steps: int,
               decay_steps: int, shape: str = "linear", decay_floor: float = 0.0):
    if total_steps <= 0:
      raise ValueError(f"total_steps must be > 0, got {total_steps}")
    if not 0 <= decay_steps <= total_steps - warmup_steps or warmup_steps < 0:
      raise ValueError(f"warmup_steps {warmup_steps} + decay_steps {decay_steps} must be in "
                       f"[0, total_steps={total_steps}]")
    if shape not in DECAY_SHAPES or not 0 <= decay_floor <= 1:
      raise ValueError(f"shape {shape!r} (one of {DECAY_SHAPES}), decay_floor {decay_floor} "
                       "(in [0, 1])")
    self.peak_learning_rate = float(peak_learning_rate)
    self.warmup_steps, self.total_steps = int(warmup_steps), int(total_steps)
    self.decay_steps, self.shape, self.decay_floor = int(decay_steps), shape, float(decay_floor)

  @property
  def decay_start(self) -> int:
    """The first update of the decay (total_steps when there is none)."""
    return self.total_steps - self.decay_steps

  def __call__(self, step):
    step = tf.cast(step, tf.float32)
    peak = tf.constant(self.peak_learning_rate, tf.float32)
    warm = peak * step / max(self.warmup_steps, 1)
    done = (step - self.decay_start) / max(self.decay_steps, 1)
    rest = tf.where(step < self.decay_start, peak,
                    decayed(peak, peak * self.decay_floor, done, self.shape))
    return tf.where(step < self.warmup_steps, warm, rest)

  def get_config(self):
    return {"peak_learning_rate": self.peak_learning_rate, "warmup_steps": self.warmup_steps,
            "total_steps": self.total_steps, "decay_steps": self.decay_steps,
            "shape": self.shape, "decay_floor": self.decay_floor}
