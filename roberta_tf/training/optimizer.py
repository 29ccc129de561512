"""AdamW as RoBERTa trains with it (β1 0.9, β2 0.98, ε 1e-6, weight decay 0.01).

Weight decay skips LayerNorm parameters and biases (as in BERT/RoBERTa), chosen by what a
variable is -- a matrix (kernel, embedding table) decays, a vector (bias, LayerNorm gamma/beta)
does not -- never by its name, so a new layer cannot change the optimizer by what it is called.
Gradient clipping and the all-reduce across replicas happen once, in the train step (see
train_step.py), so the optimizer here must not all-reduce again.
"""

from collections.abc import Sequence

import keras
import tensorflow as tf
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
    """One variable's Adam step (Keras' per-variable entry point; the train step's `apply`
    goes through `_backend_update_step`, which does the same per variable, fused)."""
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

  def _apply_weight_decay(self, variables):
    """Folded into `_backend_update_step` (each variable decays right before its Adam step,
    which reads nothing of any other variable: the same values as decaying all first)."""

  # XLA-compile each variable's update (`fused_adamw`): its ~15 element-wise ops, each a pass
  # over the weight, m or v, become one loop. XLA contracts a*b + c into fused multiply-adds,
  # which rounds once where the ops round twice: results move by an ulp, so the float32 path
  # (the parity records) keeps the op-by-op form; `adamw(fused=True)` turns it on. Measured no
  # faster on CPU (medium bf16 train step, in-process A/B: median 1.00x, one window 0.61x), so
  # no task turns it on.
  fused = False

  def _backend_update_step(self, grads, trainable_variables, learning_rate):
    """Decay + Adam step of every variable (`fused_adamw`), the scalars (learning rate, bias
    corrections) computed once. Keras' form re-reads the schedule for every variable's decay
    and recomputes b^t twice per variable (~10 scalar ops each); the element-wise ops are
    Keras' in the same order, so without `fused` the results are bit-identical."""
    dtype = "float32"
    step = ops.cast(self.iterations + 1, dtype)
    scalars = (ops.cast(learning_rate, dtype), ops.cast(self.weight_decay or 0.0, dtype),
               1 - ops.power(ops.cast(self.beta_1, dtype), step),
               1 - ops.power(ops.cast(self.beta_2, dtype), step))
    variables = [v.value if isinstance(v, keras.Variable) else v for v in trainable_variables]

    def update_all(distribution, grads_and_vars):
      for grad, var in grads_and_vars:
        if var.dtype != tf.float32:
          raise ValueError(f"PreReducedAdamW updates float32 variables; {var.name} is {var.dtype}")
        index = self._get_variable_index(var)
        slots = (self._momentums[index].value, self._velocities[index].value)
        decay = self.weight_decay is not None and self._use_weight_decay(var)
        distribution.extended.update(  # mirrored args reach `fn` as this device's components
            var, lambda w, g, m, v, *s, d=decay: self._fused(w, m, v, g, *s, decay=d),
            args=(grad, *slots, *scalars), group=False)

    tf.__internal__.distribute.interim.maybe_merge_call(
        update_all, self._distribution_strategy, list(zip(grads, variables, strict=True)))

  def _fused(self, w, m, v, grad, lr, weight_decay, c1, c2, decay):
    update = _fused_adamw_xla if self.fused else fused_adamw
    return update(w, m, v, tf.cast(grad, tf.float32), lr, weight_decay, c1, c2, decay=decay,
                  beta_1=self.beta_1, beta_2=self.beta_2, epsilon=self.epsilon)


def fused_adamw(w, m, v, grad, lr, weight_decay, c1, c2, *, decay: bool, beta_1: float,
                beta_2: float, epsilon: float):
  """One variable's update in place: decoupled decay (``decay``: w -= w * wd * lr), then
  m += (g - m)(1 - b1), v += (g^2 - v)(1 - b2), w -= (m / c1) lr / (sqrt(v / c2) + eps), with
  c1 = 1 - b1^t, c2 = 1 - b2^t (scalars). Keras' AdamW + `update_step` op for op."""
  if decay:
    w.assign_sub(w * weight_decay * lr)
  m.assign_add((grad - m) * (1 - beta_1))
  v.assign_add((tf.square(grad) - v) * (1 - beta_2))
  w.assign_sub((m / c1) * lr / (tf.sqrt(v / c2) + epsilon))


# Python floats stay static arguments: (1 - 0.9) rounds in float64 before becoming float32,
# exactly as in Keras' update_step.
_fused_adamw_xla = tf.function(fused_adamw, jit_compile=True, autograph=False)


def adamw(options: OptimizerOptions, schedule: keras.optimizers.schedules.LearningRateSchedule,
          variables: Sequence, fused: bool = False) -> keras.optimizers.Optimizer:
  """AdamW (`options`: weight decay, betas, epsilon) following `schedule` for `variables` (the
  model's trainable variables); weight decay excluded from LayerNorm parameters and biases
  (`decays`).

  `schedule` is the task's: `WarmupLinearDecay(options.learning_rate, warmup, total)` by update
  count, or a `BudgetSchedule` (the loop sets its fraction) for a time budget. The options'
  clip_norm and grad_accum_steps are the train step's (StepConfig), not the optimizer's.
  `fused`: each variable's update one XLA cluster (`PreReducedAdamW.fused`: faster, float32
  results an ulp off the op-by-op form's)."""
  opt = PreReducedAdamW(learning_rate=schedule, weight_decay=options.weight_decay,
                        beta_1=options.adam_beta1, beta_2=options.adam_beta2,
                        epsilon=options.adam_epsilon)
  opt.fused = fused
  exclude_from_decay(opt, variables)
  return opt


def budget_schedule(opt) -> BudgetSchedule | None:
  """The optimizer's BudgetSchedule (a time budget's), else None."""
  schedule = getattr(opt, "_learning_rate", None)
  return schedule if isinstance(schedule, BudgetSchedule) else None
