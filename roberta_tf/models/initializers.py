"""Weight initializers: the reference's scheme (HF `_init_weights`, fairseq `init_bert_params`).

Every kernel and embedding table is drawn from N(0, initializer_range) — a plain normal, not a
truncated one: Keras' `TruncatedNormal(stddev=0.02)` cuts at 2σ and has an actual std of
≈ 0.0176, and with that narrower init a small post-LN model at peak LR 1e-3 stayed on the
unigram plateau where the reference leaves it (measured: benchmarks/quality/pretraining_vs_hf.py,
docs/learning_parity.md).
The embedding tables' padding row (`pad_id`) starts at zero, as `nn.Embedding(padding_idx=...)`
leaves it. Biases and LayerNorm betas start at 0, LayerNorm gammas at 1 (the Keras defaults).
"""

from __future__ import annotations

import keras
from keras import ops


def normal(stddev: float) -> keras.initializers.Initializer:
  """N(0, stddev) for a kernel. A fresh instance per weight: one shared instance reuses its seed."""
  return keras.initializers.RandomNormal(mean=0.0, stddev=stddev)


@keras.saving.register_keras_serializable(package="roberta_tf")
class NormalWithZeroRow(keras.initializers.Initializer):
  """N(0, stddev) for an embedding table [rows, H], with row `zero_row` (the pad id) all zeros.

  Args:
    stddev: the normal's standard deviation (config.initializer_range).
    zero_row: the row to zero (config.pad_id); None zeroes nothing.
    seed: optional int seed (None: a fresh one from Keras' global seeding).
  """

  def __init__(self, stddev: float, zero_row: int | None = None, seed=None):
    self.stddev = stddev
    self.zero_row = zero_row
    self.seed = seed
    self._normal = keras.initializers.RandomNormal(mean=0.0, stddev=stddev, seed=seed)

  def __call__(self, shape, dtype=None):
    values = self._normal(shape, dtype=dtype)
    if self.zero_row is None:
      return values
    keep = ops.cast(ops.not_equal(ops.arange(shape[0]), self.zero_row), values.dtype)
    return values * ops.expand_dims(keep, -1)

  def get_config(self):
    return {"stddev": self.stddev, "zero_row": self.zero_row, "seed": self.seed}
