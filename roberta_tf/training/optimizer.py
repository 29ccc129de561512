"""AdamW as RoBERTa trains with it (β1 0.9, β2 0.98, ε 1e-6, weight decay 0.01).

Weight decay skips LayerNorm parameters and biases (as in BERT/RoBERTa). Gradient clipping and
the all-reduce across replicas happen once, in the train step (see trainer.py), so the optimizer
here must not all-reduce again.
"""

import keras

from roberta_tf.training.schedule import WarmupLinearDecay

# Variable-name fragments excluded from weight decay: LayerNorm gammas/betas and every bias.
NO_DECAY_NAMES = ("layer_norm", "layernorm", "LayerNorm", "bias", "beta", "gamma")


class PreReducedAdamW(keras.optimizers.AdamW):
  """keras AdamW for gradients that the caller already summed across replicas.

  Keras' TF optimizer SUM-all-reduces gradients inside ``apply`` when called in a replica
  context. The train step needs the reduced gradients earlier (global-norm clipping and the
  finite check must agree across replicas), so it reduces them itself and this class skips the
  second, redundant all-reduce.
  """

  def _all_reduce_sum_gradients(self, grads_and_vars):
    return list(grads_and_vars)


def build_optimizer(*, learning_rate: float, warmup_steps: int, train_steps: int,
                    weight_decay: float = 0.01, beta_1: float = 0.9, beta_2: float = 0.98,
                    epsilon: float = 1e-6) -> keras.optimizers.Optimizer:
  """AdamW with the warmup + linear-decay schedule; decay excluded from LayerNorm and biases."""
  schedule = WarmupLinearDecay(learning_rate, warmup_steps, train_steps)
  opt = PreReducedAdamW(learning_rate=schedule, weight_decay=weight_decay, beta_1=beta_1,
                        beta_2=beta_2, epsilon=epsilon)
  opt.exclude_from_weight_decay(var_names=list(NO_DECAY_NAMES))
  return opt
