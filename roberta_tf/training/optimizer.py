"""AdamW as RoBERTa trains with it (β1 0.9, β2 0.98, ε 1e-6, weight decay 0.01).

Weight decay skips LayerNorm parameters and biases (as in BERT/RoBERTa), chosen by what a
variable is -- a matrix (kernel, embedding table) decays, a vector (bias, LayerNorm gamma/beta)
does not -- never by its name, so a new layer cannot change the optimizer by what it is called.
Gradient clipping and the all-reduce across replicas happen once, in the train step (see
train_step.py), so the optimizer here applies the gradients it is given as they are.

Written on what Keras and TensorFlow document: a `keras.optimizers.Optimizer` subclass whose
`build` makes the slots with `add_variable_from_reference`, its own `apply`, and
`tf.distribute`'s replica context `merge_call` and `StrategyExtended.update`.
"""

from collections.abc import Sequence

import keras
import tensorflow as tf
from keras import ops

from roberta_tf.common.option_groups import OptimizerOptions


def decays(variable) -> bool:
  """True for the variables weight decay applies to: rank >= 2 (kernels, embedding tables).

  Rank-1 variables are biases and normalization scales/offsets, which BERT, fairseq and HF
  exempt (decaying a LayerNorm gamma toward 0 shrinks the whole residual stream).
  """
  return len(variable.shape) >= 2


class AdamW(keras.optimizers.Optimizer):
  """AdamW in the form of Kingma & Ba's Algorithm 1, applying the gradients it is given.

  The update is ``w -= lr * m_hat / (sqrt(v_hat) + eps)`` with the bias-corrected moments
  ``m_hat = m / (1 - b1^t)``, ``v_hat = v / (1 - b2^t)``: torch.optim.AdamW's (and so Hugging
  Face's and optax's) form. Keras' own Adam (like fairseq's) adds eps to the uncorrected
  ``sqrt(v)`` instead, ``w -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)``, which is
  this form with eps scaled by ``1 / sqrt(1 - b2^t)``: 7x at the first update, 2.3x at the 10th,
  1.2x at the 60th with b2 = 0.98. That is not negligible here: at init the query/key kernels'
  gradients are ~3e-6..7e-6 (attention is near uniform), on the scale of eps = 1e-6, so the
  Keras form slowed exactly the weights that take a post-LN model off the unigram plateau
  (measured: docs/learning_parity.md). Decoupled weight decay is Keras' AdamW's
  (``w -= lr * wd * w`` right before the variable's Adam step; torch's ``w *= 1 - lr * wd``),
  on the variables `decays` accepts.

  Keras' TF optimizer SUM-all-reduces the gradients inside its `apply` in a replica context.
  The train step needs the reduced gradients earlier (global-norm clipping and the finite check
  must agree across replicas), so it reduces them itself, and this class's `apply` never
  reduces. Its slots are created in Keras' Adam's order (m then v of each variable, in the
  variables' order), which is what a checkpoint's keys follow: checkpoints written with Keras'
  AdamW slots restore into these.
  """

  def __init__(self, learning_rate, weight_decay: float | None = 0.01, beta_1: float = 0.9,
               beta_2: float = 0.98, epsilon: float = 1e-6, fused: bool = False,
               name: str | None = None):
    """`learning_rate`: a float or a LearningRateSchedule of the update count (`iterations`).

    `fused`: XLA-compile each variable's update (`fused_adamw`): its ~15 element-wise ops, each
    a pass over the weight, m or v, become one loop. XLA contracts a*b + c into fused
    multiply-adds, which round once where the ops round twice: results move by an ulp, so the
    float32 path (the parity records) keeps the op-by-op form.
    """
    super().__init__(learning_rate=learning_rate, weight_decay=weight_decay, name=name)
    self.beta_1, self.beta_2, self.epsilon, self.fused = beta_1, beta_2, epsilon, fused
    self.slot_variables = []  # (m, v) of each built variable, in the built order
    self.slot_index = {}      # id(variable) -> its place in slot_variables
    self.slot_paths = []      # each built variable's path

  def build(self, variables):
    """Creates m and v (zeros) for each of `variables`, once."""
    if self.built:
      return
    super().build(variables)
    self.slot_index = {id(v): i for i, v in enumerate(variables)}
    self.slot_paths = [getattr(v, "path", v.name) for v in variables]
    self.slot_variables = [(self.add_variable_from_reference(v, "momentum"),
                            self.add_variable_from_reference(v, "velocity"))
                           for v in variables]

  def slots(self) -> dict[str, dict[str, keras.Variable]]:
    """{model variable path: {"momentum": m, "velocity": v}} of the variables it was built for.

    Raises:
      ValueError: two of them share a path (their slots could not be told apart by it).
    """
    shared = sorted({p for p in self.slot_paths if self.slot_paths.count(p) > 1})
    if shared:
      raise ValueError(f"optimizer {self.name}: variables share the paths {shared}")
    return {path: {"momentum": m, "velocity": v}
            for path, (m, v) in zip(self.slot_paths, self.slot_variables, strict=True)}

  def get_config(self):
    config = super().get_config()
    return {"name": config["name"], "learning_rate": config["learning_rate"],
            "weight_decay": self.weight_decay, "beta_1": self.beta_1, "beta_2": self.beta_2,
            "epsilon": self.epsilon, "fused": self.fused}

  def update_function(self):
    """The in-place update of one variable that `apply` runs (`fused_adamw`'s signature):
    AdamW's, XLA-compiled with `fused`. StableAdamW (stable_adamw.py) clips it per tensor."""
    return _fused_adamw_xla if self.fused else fused_adamw

  def apply(self, grads, trainable_variables=None):
    """One update of `trainable_variables` (built for on the first call) by `grads`, taken as
    they are (already all-reduced when distributed); a None gradient leaves its variable and
    its slots as they are. Then `iterations` += 1.

    Callable in a replica context (the update runs in the cross-replica context through
    `merge_call`) or in the cross-replica context (`grads` may be per-replica values there).
    Every variable must be float32 (mixed precision keeps float32 weights).
    """
    if trainable_variables is None:
      raise ValueError("AdamW.apply needs the variables: apply(grads, trainable_variables)")
    trainable_variables = list(trainable_variables)
    self.build(trainable_variables)
    updates = []
    for grad, var in zip(grads, trainable_variables, strict=True):
      if grad is None:
        continue
      if id(var) not in self.slot_index:
        raise ValueError(f"{var.name} is not among the variables the optimizer was built for")
      if var.dtype != "float32":
        raise ValueError(f"AdamW updates float32 variables; {var.name} is {var.dtype}")
      m, v = self.slot_variables[self.slot_index[id(var)]]
      updates.append((grad, _tf_variable(var), _tf_variable(m), _tf_variable(v), decays(var)))
    replica_context = tf.distribute.get_replica_context()
    if replica_context is None:  # the cross-replica context
      _update_all(tf.distribute.get_strategy(), self, updates)
    else:
      replica_context.merge_call(_update_all, args=(self, updates))
    self.iterations.assign_add(1)


def _tf_variable(variable):
  """The tf.Variable (a distributed one under a strategy) behind a keras.Variable."""
  return variable.value if isinstance(variable, keras.Variable) else variable


def _update_all(distribution, opt: AdamW, updates):
  """Decay + Adam step of every (grad, w, m, v, decays) of `updates` (`fused_adamw`), each on
  its variable's devices; the scalars (learning rate, bias corrections) computed once. Keras'
  AdamW re-reads the schedule for every variable's decay and recomputes b^t twice per variable
  (~10 scalar ops each); the element-wise ops here are its ops, in its order."""
  dtype = "float32"
  step = ops.cast(opt.iterations + 1, dtype)
  scalars = (ops.cast(opt.learning_rate, dtype), ops.cast(opt.weight_decay or 0.0, dtype),
             1 - ops.power(ops.cast(opt.beta_1, dtype), step),
             1 - ops.power(ops.cast(opt.beta_2, dtype), step))
  update = opt.update_function()
  hyper = {"beta_1": opt.beta_1, "beta_2": opt.beta_2, "epsilon": opt.epsilon}
  for grad, var, m, v, decay in updates:
    decay = decay and opt.weight_decay is not None

    def step_fn(w, g, m, v, lr, weight_decay, c1, c2, decay=decay):
      return update(w, m, v, tf.cast(g, tf.float32), lr, weight_decay, c1, c2, decay=decay,
                    **hyper)
    distribution.extended.update(  # mirrored args reach `step_fn` as this device's components
        var, step_fn, args=(grad, m, v, *scalars), group=False)


def fused_adamw(w, m, v, grad, lr, weight_decay, c1, c2, *, decay: bool, beta_1: float,
                beta_2: float, epsilon: float):
  """One variable's update in place: decoupled decay (``decay``: w -= w * wd * lr), then
  m += (g - m)(1 - b1), v += (g^2 - v)(1 - b2), w -= (m / c1) lr / (sqrt(v / c2) + eps), with
  c1 = 1 - b1^t, c2 = 1 - b2^t (scalars). Keras' AdamW with the eps of torch's, op for op."""
  if decay:
    w.assign_sub(w * weight_decay * lr)
  m.assign_add((grad - m) * (1 - beta_1))
  v.assign_add((tf.square(grad) - v) * (1 - beta_2))
  w.assign_sub((m / c1) * lr / (tf.sqrt(v / c2) + epsilon))


# Python floats stay static arguments: (1 - 0.9) rounds in float64 before becoming float32,
# exactly as in Keras' update_step.
_fused_adamw_xla = tf.function(fused_adamw, jit_compile=True, autograph=False)


def adamw(options: OptimizerOptions, schedule: keras.optimizers.schedules.LearningRateSchedule,
          variables: Sequence, fused: bool = False) -> AdamW:
  """AdamW (`options`: weight decay, betas, epsilon) following `schedule`, built for
  `variables` (the model's trainable variables); weight decay on the matrices only (`decays`).

  `schedule` is the task's, which keeps it: `WarmupLinearDecay(options.learning_rate, warmup,
  total)` by update count, or a `BudgetSchedule` (the loop sets its fraction) for a time
  budget. The options' clip_norm and grad_accum_steps are the train step's (StepConfig), not
  the optimizer's. `fused`: see `AdamW`."""
  opt = AdamW(learning_rate=schedule, weight_decay=options.weight_decay,
              beta_1=options.adam_beta1, beta_2=options.adam_beta2,
              epsilon=options.adam_epsilon, fused=fused)
  opt.build(list(variables))
  return opt
