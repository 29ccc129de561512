"""AdamW as RoBERTa trains with it (β1 0.9, β2 0.98, ε 1e-6, weight decay 0.01).

Weight decay skips LayerNorm parameters and biases (as in BERT/RoBERTa), chosen by what a
variable is -- a matrix (kernel, embedding table) decays, a vector (bias, LayerNorm gamma/beta)
does not -- never by its name, so a new layer cannot change the optimizer by what it is called.
Gradient clipping and the all-reduce across replicas happen once, in the train step (see
train_step.py), so the optimizer here must not all-reduce again.
"""

from collections.abc import Sequence

import keras
from keras import ops

from roberta_tf.common.option_groups import OptimizerOptions
from roberta_tf.training.schedule import BudgetSchedule


def decays(variable) -> bool:
  """True for the variables weight decay applies to: rank >= 2 (kernels, embedding tables).

  Rank-1 variables are biases and normalization scales/offsets, which BERT, fairseq and HF
  exempt (decaying a LayerNorm gamma toward 0 shrinks the whole residual stream).
  """
  return len(variable.shape) >= 2


def exclude_from_decay(opt: keras.optimizers.Optimizer, variables: Sequence) -> None:
  """Exempts every variable of `variables` that `decays` rejects (before `opt` is built)."""
  exempt = [v for v in variables if not decays(v)]
  if exempt:
    opt.exclude_from_weight_decay(var_list=exempt)


class PreReducedAdamW(keras.optimizers.AdamW):
  """AdamW in the form of Kingma & Ba's Algorithm 1, for gradients already summed across replicas.

  The update is ``w -= lr * m_hat / (sqrt(v_hat) + eps)`` with the bias-corrected moments
  ``m_hat = m / (1 - b1^t)``, ``v_hat = v / (1 - b2^t)``: torch.optim.AdamW's (and so Hugging
  Face's and optax's) form. Keras' own Adam (like fairseq's) adds eps to the uncorrected
  ``sqrt(v)`` instead, ``w -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)``, which is
  this form with eps scaled by ``1 / sqrt(1 - b2^t)``: 7x at the first update, 2.3x at the 10th,
  1.2x at the 60th with b2 = 0.98. That is not negligible here: at init the query/key kernels'
  gradients are ~3e-6..7e-6 (attention is near uniform), on the scale of eps = 1e-6, so the
  Keras form slowed exactly the weights that take a post-LN model off the unigram plateau
  (measured: docs/learning_parity.md). Decoupled weight decay is Keras'
  (``w -= lr * wd * w`` before the Adam step), the same as torch's ``w *= 1 - lr * wd``.

  Keras' TF optimizer also SUM-all-reduces gradients inside ``apply`` in a replica context.
  The train step needs the reduced gradients earlier (global-norm clipping and the finite check
  must agree across replicas), so it reduces them itself and this class skips that second,
  redundant all-reduce. The slots (m, v) are Keras' own, so checkpoints are unchanged.
  """

  def _all_reduce_sum_gradients(self, grads_and_vars):
    return list(grads_and_vars)

  def update_step(self, gradient, variable, learning_rate):
    if self.amsgrad:
      raise NotImplementedError("PreReducedAdamW does not implement amsgrad")
    dtype = variable.dtype
    lr = ops.cast(learning_rate, dtype)
    gradient = ops.cast(gradient, dtype)
    step = ops.cast(self.iterations + 1, dtype)
    m = self._momentums[self._get_variable_index(variable)]
    v = self._velocities[self._get_variable_index(variable)]
    self.assign_add(m, ops.multiply(ops.subtract(gradient, m), 1 - self.beta_1))
    self.assign_add(v, ops.multiply(ops.subtract(ops.square(gradient), v), 1 - self.beta_2))
    m_hat = ops.divide(m, 1 - ops.power(ops.cast(self.beta_1, dtype), step))
    v_hat = ops.divide(v, 1 - ops.power(ops.cast(self.beta_2, dtype), step))
    self.assign_sub(variable, ops.divide(ops.multiply(m_hat, lr),
                                         ops.add(ops.sqrt(v_hat), self.epsilon)))


def adamw(options: OptimizerOptions, schedule: keras.optimizers.schedules.LearningRateSchedule,
          variables: Sequence) -> keras.optimizers.Optimizer:
  """AdamW (`options`: weight decay, betas, epsilon) following `schedule` for `variables` (the
  model's trainable variables); weight decay excluded from LayerNorm parameters and biases
  (`decays`).

  `schedule` is the task's: `WarmupLinearDecay(options.learning_rate, warmup, total)` by update
  count, or a `BudgetSchedule` (the loop sets its fraction) for a time budget. The options'
  clip_norm and grad_accum_steps are the train step's (StepConfig), not the optimizer's."""
  opt = PreReducedAdamW(learning_rate=schedule, weight_decay=options.weight_decay,
                        beta_1=options.adam_beta1, beta_2=options.adam_beta2,
                        epsilon=options.adam_epsilon)
  exclude_from_decay(opt, variables)
  return opt


def budget_schedule(opt) -> BudgetSchedule | None:
  """The optimizer's BudgetSchedule (a time budget's), else None."""
  schedule = getattr(opt, "_learning_rate", None)
  return schedule if isinstance(schedule, BudgetSchedule) else None
