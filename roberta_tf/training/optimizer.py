"""AdamW as RoBERTa trains with it (β1 0.9, β2 0.98, ε 1e-6, weight decay 0.01).

Weight decay skips LayerNorm parameters and biases (as in BERT/RoBERTa), chosen by what a
variable is -- a matrix (kernel, embedding table) decays, a vector (bias, LayerNorm gamma/beta)
does not -- never by its name, so a new layer cannot change the optimizer by what it is called.
Gradient clipping and the all-reduce across replicas happen once, in the train step (see
trainer.py), so the optimizer here must not all-reduce again.
"""

from collections.abc import Sequence

import keras

from roberta_tf.training.schedule import WarmupLinearDecay


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
  """keras AdamW for gradients that the caller already summed across replicas.

  Keras' TF optimizer SUM-all-reduces gradients inside ``apply`` when called in a replica
  context. The train step needs the reduced gradients earlier (global-norm clipping and the
  finite check must agree across replicas), so it reduces them itself and this class skips the
  second, redundant all-reduce.
  """

  def _all_reduce_sum_gradients(self, grads_and_vars):
    return list(grads_and_vars)


def build_optimizer(*, variables: Sequence, learning_rate: float, warmup_steps: int,
                    train_steps: int, weight_decay: float = 0.01, beta_1: float = 0.9,
                    beta_2: float = 0.98, epsilon: float = 1e-6) -> keras.optimizers.Optimizer:
  """AdamW with the warmup + linear-decay schedule for `variables` (the model's trainable
  variables); weight decay excluded from LayerNorm parameters and biases (`decays`)."""
  schedule = WarmupLinearDecay(learning_rate, warmup_steps, train_steps)
  opt = PreReducedAdamW(learning_rate=schedule, weight_decay=weight_decay, beta_1=beta_1,
                        beta_2=beta_2, epsilon=epsilon)
  exclude_from_decay(opt, variables)
  return opt
