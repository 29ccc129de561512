"""`NextSentenceHead`: BERT's next-sentence-prediction head, for the input-format ablation only.

RoBERTa dropped NSP (paper section 4.2); the SEGMENT-PAIR / SENTENCE-PAIR arms of its Table 2
train with it. The head is BERT's: the `<s>` vector → dense + tanh ("pooler") → 2 logits
(0: B follows A, 1: B is random; data_prep/pair_packing.py).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from roberta_tf.models.initializers import normal
from roberta_tf.models.roberta.config import RobertaConfig

NSP_HEAD_NAME = "next_sentence_head"


@keras.saving.register_keras_serializable(package="roberta_tf")
class NextSentenceHead(keras.layers.Layer):
  """pooled [B, H] (the `<s>` vector) → float32 logits [B, 2]."""

  def __init__(self, hidden_size, initializer_range=0.02, **kwargs):
    super().__init__(**kwargs)
    self.hidden_size = hidden_size
    self.initializer_range = initializer_range
    self.pooler = keras.layers.Dense(hidden_size, activation="tanh",
                                     kernel_initializer=normal(initializer_range),
                                     dtype=self.dtype_policy, name="pooler")
    self.classifier = keras.layers.Dense(2, kernel_initializer=normal(initializer_range),
                                         dtype=self.dtype_policy, name="classifier")

  def build(self, pooled_shape=None):
    self.pooler.build((None, self.hidden_size))
    self.classifier.build((None, self.hidden_size))
    self.built = True

  def call(self, pooled):
    return tf.cast(self.classifier(self.pooler(pooled)), tf.float32)

  def compute_output_shape(self, pooled_shape):
    return (pooled_shape[0], 2)

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, initializer_range=self.initializer_range)
    return config


def build_nsp_head(config: RobertaConfig, dtype=None) -> NextSentenceHead:
  """A built `NextSentenceHead` for `config` (dtype: see `build_encoder`)."""
  head = NextSentenceHead(config.hidden_size, config.initializer_range, dtype=dtype,
                          name=NSP_HEAD_NAME)
  head.build()
  return head
