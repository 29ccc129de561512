"""`RobertaEmbeddings`: token + RoBERTa-offset position embeddings, LayerNorm, dropout."""

from __future__ import annotations

import keras
import keras_hub
import tensorflow as tf

from roberta_tf.models import fused_ops
from roberta_tf.models.initializers import NormalWithZeroRow


def roberta_position_ids(padding_mask: tf.Tensor, pad_id: int) -> tf.Tensor:
  """RoBERTa's position ids (fairseq `make_positions`, HF `create_position_ids_from_input_ids`).

  Real tokens count up from `pad_id + 1` in order; pads get `pad_id`. Counting along the mask
  (not 0..S-1) makes the ids independent of left padding.

  Args:
    padding_mask: int or bool [B, S], 1 for real tokens, 0 for pads.
    pad_id: the padding token id (1 in RoBERTa).

  Returns:
    int32 [B, S].
  """
  mask = tf.cast(padding_mask, tf.int32)
  return tf.cumsum(mask, axis=1) * mask + pad_id


@keras.saving.register_keras_serializable(package="roberta_tf")
class RobertaEmbeddings(keras.layers.Layer):
  """(input_ids, padding_mask) [B, S] -> LayerNorm(token + position [+ type]) [B, S, H] float32.

  RoBERTa has a single segment, so its token-type table is one row added to every token:
  - ``type_vocab_size=1`` (the default presets; HF's `RobertaModel` shape): a learned vector
    `token_type_embedding` [1, H], drawn from N(0, initializer_range) like HF's, added to every
    token. It gives all tokens one shared component at init (cosine ≈ 0.35 between any two
    token vectors after the LayerNorm at H 256), which measurably decides whether a small
    post-LN model leaves the unigram plateau (docs/learning_parity.md).
  - ``type_vocab_size=0``: fairseq's exact shape, token + position only.
  - ``type_vocab_size >= 2`` (BERT's segments, the NSP input-format ablation): a table [T, H]
    looked up by token_type_ids, which `call` then takes.

  Sublayers (their names are checkpoint keys): `token_embedding` (a keras-hub
  ReversibleEmbedding, [V, H], which the MLM head calls in reverse as its tied decoder),
  `position_embedding` ([max_positions, H]), `token_type_embedding` ([T, H], only with
  type_vocab_size >= 1), `layer_norm`, `dropout`.

  Precision: the tables and their sum stay float32 whatever the policy (as under PyTorch
  autocast), because the LayerNorm right after them runs in float32; only the tied decoder's
  matmul runs in the policy's compute dtype (`reverse_dtype`). The one exception is the token
  table under a bfloat16-variable policy (`_token_table_dtype`).
  """

  def __init__(self, vocab_size, hidden_size, max_positions, pad_id, dropout=0.0,
               layer_norm_eps=1e-5, initializer_range=0.02, type_vocab_size=0, **kwargs):
    super().__init__(**kwargs)
    self.vocab_size = vocab_size
    self.hidden_size = hidden_size
    self.max_positions = max_positions
    self.pad_id = pad_id
    self.dropout_rate = dropout
    self.layer_norm_eps = layer_norm_eps
    self.initializer_range = initializer_range
    self.type_vocab_size = type_vocab_size
    # The type table's initializer is made first (Keras draws an unseeded initializer's seed
    # when it is constructed), so a seed gives every table the same values as the release
    # that introduced the row; the layer itself is created last (weight order below).
    type_init = NormalWithZeroRow(initializer_range) if type_vocab_size else None
    self.token_embedding = keras_hub.layers.ReversibleEmbedding(
        vocab_size, hidden_size, tie_weights=True,
        embeddings_initializer=NormalWithZeroRow(initializer_range, zero_row=pad_id),
        reverse_dtype=self.dtype_policy.compute_dtype, dtype=self._token_table_dtype(),
        name="token_embedding")
    self.position_embedding = keras.layers.Embedding(
        max_positions, hidden_size,
        embeddings_initializer=NormalWithZeroRow(initializer_range, zero_row=pad_id),
        dtype="float32", name="position_embedding")
    self.layer_norm = keras.layers.LayerNormalization(
        epsilon=layer_norm_eps, dtype="float32", name="layer_norm")
    self.dropout = keras.layers.Dropout(dropout, dtype="float32", name="dropout")
    # Created last so that the other weights keep their order (checkpoint listings, tests).
    self.token_type_embedding = None
    if type_vocab_size:
      self.token_type_embedding = keras.layers.Embedding(
          type_vocab_size, hidden_size, embeddings_initializer=type_init,
          dtype="float32", name="token_type_embedding")

  def _token_table_dtype(self) -> str:
    """float32, except under a bfloat16-*variable* policy (a bfloat16 serving export,
    serving/serving_precision.py): there the [V, H] table is stored in bfloat16 too, because
    the tied decoder reads all of it on every call and a float32 table would be cast whole each
    time. Its rows are cast to float32 before the sum either way."""
    return "bfloat16" if self.dtype_policy.variable_dtype == "bfloat16" else "float32"

  def build(self, input_ids_shape, padding_mask_shape=None):
    self.token_embedding.build(input_ids_shape)
    self.position_embedding.build(input_ids_shape)
    if self.token_type_embedding is not None:
      self.token_type_embedding.build(input_ids_shape)
    self.layer_norm.build(tuple(input_ids_shape) + (self.hidden_size,))
    self.built = True

  def call(self, input_ids, padding_mask, token_type_ids=None, training=None):
    """input_ids, padding_mask (and token_type_ids, with a table of >= 2 types; None: all 0):
    int [B, S]. Returns float32 [B, S, H].

    Raises:
      ValueError: S (when static) exceeds max_positions - pad_id - 1. A dynamic S is not
        checked here (an assert would break XLA): on CPU the lookup then fails, on GPU it
        would read zeros, so the input pipeline must respect config.max_seq_len.
    """
    seq_len = input_ids.shape[1]
    if seq_len is not None and seq_len > self.max_positions - self.pad_id - 1:
      raise ValueError(f"sequence length {seq_len} exceeds max_seq_len = "
                       f"{self.max_positions - self.pad_id - 1} (max_positions="
                       f"{self.max_positions}, positions start at pad_id + 1)")
    positions = roberta_position_ids(padding_mask, self.pad_id)
    x = tf.cast(self.token_embedding(input_ids), tf.float32) + self.position_embedding(positions)
    if self.type_vocab_size == 1:
      # One segment: every token adds row 0 (HF's lookup of all-zero token_type_ids), looked up
      # through the float32 sublayer (a direct variable read would be autocast under mixed
      # precision) for one position and broadcast over the others.
      x = x + self.token_type_embedding(tf.zeros_like(input_ids[:, :1]))
    elif self.token_type_embedding is not None:
      if token_type_ids is None:
        token_type_ids = tf.zeros_like(input_ids)
      x = x + self.token_type_embedding(token_type_ids)
    # Training under a mixed policy fuses the LayerNorm with XLA (models/fused_ops.py).
    x = fused_ops.layer_norm(self.layer_norm, x,
                             fused=bool(training) and self.compute_dtype != "float32")
    return self.dropout(x, training=training)

  def compute_output_shape(self, input_ids_shape, padding_mask_shape=None,
                           token_type_ids_shape=None):
    return tuple(input_ids_shape) + (self.hidden_size,)

  def compute_output_spec(self, input_ids, padding_mask, token_type_ids=None, training=None):
    return keras.KerasTensor(tuple(input_ids.shape) + (self.hidden_size,), dtype="float32")

  def get_config(self):
    config = super().get_config()
    config.update(vocab_size=self.vocab_size, hidden_size=self.hidden_size,
                  max_positions=self.max_positions, pad_id=self.pad_id,
                  dropout=self.dropout_rate, layer_norm_eps=self.layer_norm_eps,
                  initializer_range=self.initializer_range, type_vocab_size=self.type_vocab_size)
    return config
