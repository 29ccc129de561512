"""StableAdamW (`train --optimizer=stable_adamw`): AdamW with per-tensor update clipping, the
optimizer ModernBERT trained with (Wortsman et al. 2023; ModernBERT's `decoupled_stableadamw`).

Each variable's learning rate at update t is divided by max(1, RMS_t), with

    RMS_t = sqrt(mean(g_t^2 / max(v_hat_t, eps^2)))     (over the tensor's elements)

the root mean square of the gradient in units of the second moment, v_hat_t = v_t / (1 - b2^t)
the bias-corrected second moment after this step's update: Adafactor's update clipping, which
damps a tensor whose gradient suddenly outgrows its history (the loss spikes of large-batch or
low-precision training) and leaves every other step AdamW's. The reference keeps debiased
moments (its betas rescaled each step, so its v IS v_hat); we keep Adam's moments and correct
them at the update, as AdamW here does: the same numbers in exact arithmetic, and the moments
a checkpoint holds stay AdamW's (a run may switch optimizers on resume).

The clipped rate also scales the decoupled weight decay (w *= 1 - lr_t * wd), which skips
biases and normalization vectors as AdamW's does (optimizer.py `decays`). The reference's
"fully decoupled" decay (w *= 1 - lr_t / peak * wd') is this with --weight_decay = wd' / peak
(ModernBERT's 1e-5 at peak 8e-4: 0.0125).
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
import tensorflow as tf

from roberta_tf.common.option_groups import OptimizerOptions
from roberta_tf.training.optimizer import AdamW


def stable_adamw_update(w, m, v, grad, lr, weight_decay, c1, c2, *, decay: bool, beta_1: float,
                        beta_2: float, epsilon: float):
  """One variable's update in place (optimizer.py `fused_adamw`'s arguments): m and v as AdamW
  updates them, then lr_t = lr / max(1, RMS) (the module docstring), then decoupled decay
  (``decay``: w -= w * wd * lr_t) and w -= (m / c1) lr_t / (sqrt(v / c2) + eps)."""
  m.assign_add((grad - m) * (1 - beta_1))
  v.assign_add((tf.square(grad) - v) * (1 - beta_2))
  v_hat = v / c2
  rms = tf.sqrt(tf.reduce_mean(tf.square(grad) / tf.maximum(v_hat, epsilon * epsilon)))
  lr = lr / tf.maximum(rms, 1.0)
  if decay:
    w.assign_sub(w * weight_decay * lr)
  w.assign_sub((m / c1) * lr / (tf.sqrt(v_hat) + epsilon))


_stable_adamw_xla = tf.function(stable_adamw_update, jit_compile=True, autograph=False)


class StableAdamW(AdamW):
  """AdamW (optimizer.py: its slots, checkpoint keys, `apply` in any distribution context,
  gradients taken as the train step reduced them) whose per-variable update is
  `stable_adamw_update`."""

  def update_function(self):
    return _stable_adamw_xla if self.fused else stable_adamw_update


def stable_adamw(options: OptimizerOptions,
                 schedule: keras.optimizers.schedules.LearningRateSchedule,
                 variables: Sequence, fused: bool = False) -> StableAdamW:
  """StableAdamW with `options`' weight decay, betas and epsilon following `schedule`, built for
  `variables` (as optimizer.py's `adamw`)."""
  opt = StableAdamW(learning_rate=schedule, weight_decay=options.weight_decay,
                    beta_1=options.adam_beta1, beta_2=options.adam_beta2,
                    epsilon=options.adam_epsilon, fused=fused)
  opt.build(list(variables))
  return opt
