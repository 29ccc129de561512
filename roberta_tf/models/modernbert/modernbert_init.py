"""ModernBERT's initializer: a normal truncated at +-cutoff x std (HF `trunc_normal_`).

HF draws every matrix with `trunc_normal_(std=s, a=-c s, b=c s)`, c = initializer_cutoff_factor
(2.0), with s depending on the weight (`ModernBertConfig.init_std`). Keras' TruncatedNormal cuts
at 2 std only, so this one samples by the inverse CDF (as torch does) for any cutoff.
"""

from __future__ import annotations

import math

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="roberta_tf")
class TruncatedNormalCutoff(keras.initializers.RandomNormal):
  """N(0, stddev) restricted to [-cutoff*stddev, cutoff*stddev]. Seeded as Keras' random
  initializers are (an unseeded one draws its seed from Keras' global seeding when made, so
  use one instance per weight)."""

  def __init__(self, stddev: float, cutoff: float = 2.0, seed=None):
    super().__init__(mean=0.0, stddev=float(stddev), seed=seed)
    self.cutoff = float(cutoff)

  def __call__(self, shape, dtype=None):
    # u uniform in (-erf(c / sqrt 2), erf(c / sqrt 2)); x = sqrt(2) erfinv(u) is N(0, 1)
    # restricted to [-c, c].
    bound = math.erf(self.cutoff / math.sqrt(2.0))
    u = keras.random.uniform(shape, minval=-bound, maxval=bound, dtype="float32",
                             seed=self.seed)
    values = ops.erfinv(u) * (math.sqrt(2.0) * self.stddev)
    values = ops.clip(values, -self.cutoff * self.stddev, self.cutoff * self.stddev)
    return ops.cast(values, dtype or "float32")

  def get_config(self):
    config = {**super().get_config(), "cutoff": self.cutoff}
    del config["mean"]  # always 0
    return config


def truncated(config, kind: str) -> TruncatedNormalCutoff:
  """A fresh initializer for a weight of `kind` ("in", "out", "final_out"; see
  ModernBertConfig.init_std)."""
  return TruncatedNormalCutoff(config.init_std(kind), config.initializer_cutoff_factor)
