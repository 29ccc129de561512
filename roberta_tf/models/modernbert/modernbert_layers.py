"""ModernBERT's layers: `ModernBertEmbeddings` and the pre-norm `ModernBertLayer`.

Precision as in the RoBERTa layers: the residual stream, the LayerNorms and their outputs are
float32 under every policy; the Dense matmuls run in the policy's compute dtype; rotary and
softmax run in float32 (rotary_embedding.py, windowed_attention.py).
"""

from __future__ import annotations

import keras
import keras_hub
import tensorflow as tf

from roberta_tf.models import fused_ops
from roberta_tf.models.modernbert import rotary_embedding
from roberta_tf.models.modernbert.modernbert_init import TruncatedNormalCutoff
from roberta_tf.models.modernbert.windowed_attention import attend


def layer_norm(eps: float, bias: bool, name: str) -> keras.layers.LayerNormalization:
  """HF's `nn.LayerNorm(H, eps, bias=norm_bias)`: float32, a beta only with `bias`."""
  return keras.layers.LayerNormalization(epsilon=eps, center=bias, dtype="float32", name=name)


@keras.saving.register_keras_serializable(package="roberta_tf")
class ModernBertEmbeddings(keras.layers.Layer):
  """input_ids int [B, L] -> Dropout(LayerNorm(token_embedding[ids])) float32 [B, L, H].

  No position or token-type table (positions are rotary, inside attention). As HF's
  `nn.Embedding(padding_idx=pad_id)`, lookups of `pad_id` pass no gradient to its row (the tied
  decoder still does); the forward pass is unchanged. Sublayers:
  `token_embedding` (a keras-hub ReversibleEmbedding [V, H], the MLM head's tied decoder),
  `norm`, `dropout`. The table is float32 (bfloat16 under a bfloat16-variable policy, as
  RobertaEmbeddings'); the decoder's matmul runs in the compute dtype.
  """

  def __init__(self, vocab_size, hidden_size, pad_id=None, norm_eps=1e-5, norm_bias=False,
               dropout=0.0, initializer_std=0.02, initializer_cutoff=2.0, **kwargs):
    super().__init__(**kwargs)
    self.vocab_size = vocab_size
    self.pad_id = pad_id
    self.hidden_size = hidden_size
    self.norm_eps = norm_eps
    self.norm_bias = norm_bias
    self.dropout_rate = dropout
    self.initializer_std = initializer_std
    self.initializer_cutoff = initializer_cutoff
    table_dtype = "bfloat16" if self.dtype_policy.variable_dtype == "bfloat16" else "float32"
    self.token_embedding = keras_hub.layers.ReversibleEmbedding(
        vocab_size, hidden_size, tie_weights=True,
        embeddings_initializer=TruncatedNormalCutoff(initializer_std, initializer_cutoff),
        reverse_dtype=self.dtype_policy.compute_dtype, dtype=table_dtype,
        name="token_embedding")
    self.norm = layer_norm(norm_eps, norm_bias, "norm")
    self.dropout = keras.layers.Dropout(dropout, dtype="float32", name="dropout")

  def build(self, input_ids_shape):
    self.token_embedding.build(input_ids_shape)
    self.norm.build(tuple(input_ids_shape) + (self.hidden_size,))
    self.built = True

  def call(self, input_ids, training=None):
    x = tf.cast(self.token_embedding(input_ids), tf.float32)
    if self.pad_id is not None:
      x = tf.where(tf.equal(input_ids, self.pad_id)[..., None], tf.stop_gradient(x), x)
    x = fused_ops.layer_norm(self.norm, x, fused=bool(training) and self.compute_dtype != "float32")
    return self.dropout(x, training=training)

  def compute_output_shape(self, input_ids_shape):
    return tuple(input_ids_shape) + (self.hidden_size,)

  def compute_output_spec(self, input_ids, training=None):
    return keras.KerasTensor(tuple(input_ids.shape) + (self.hidden_size,), dtype="float32")

  def get_config(self):
    config = super().get_config()
    config.update(vocab_size=self.vocab_size, hidden_size=self.hidden_size, pad_id=self.pad_id,
                  norm_eps=self.norm_eps, norm_bias=self.norm_bias, dropout=self.dropout_rate,
                  initializer_std=self.initializer_std,
                  initializer_cutoff=self.initializer_cutoff)
    return config


@keras.saving.register_keras_serializable(package="roberta_tf")
class ModernBertLayer(keras.layers.Layer):
  """x float32 [B, L, H], padding_mask int [B, L] -> float32 [B, L, H] (HF ModernBertEncoderLayer).

  With document_ids int [B, L] (rows packing documents: rotary_embedding.document_positions)
  rotary positions restart at each document and attention stays inside it.

  ```
  h = x if first else attn_norm(x)            # layer 0 has no attn_norm (HF: nn.Identity)
  q, k, v = split(attn_wqkv(h))               # fused [H, 3H]: Q | K | V, heads [A][D] inside
  q, k = rotary(q, k; rope_theta)             # float32, positions 0..L-1 (per document)
  x = x + drop(attn_wo(attend(q, k, v, padding_mask, radius)))
  u, g = split(mlp_wi(mlp_norm(x)))           # [H, 2I]: u = first I columns, g = last I
  x = x + mlp_wo(drop(gelu(u) * g))           # exact (erf) GELU
  ```
  `radius` None: a global layer; else a local one (|i - j| <= radius). Sublayers (checkpoint
  keys): attn_norm (not in layer 0), attn_wqkv, attn_wo, mlp_norm, mlp_wi, mlp_wo.
  """

  def __init__(self, num_heads, intermediate_size, rope_theta, radius=None, first=False,
               norm_eps=1e-5, norm_bias=False, attention_bias=False, mlp_bias=False,
               attention_dropout=0.0, mlp_dropout=0.0, in_std=0.02, out_std=0.02,
               initializer_cutoff=2.0, **kwargs):
    # autocast=False: the float32 residual stream reaches the LayerNorms unrounded; the Dense
    # sublayers cast their own inputs to the compute dtype.
    super().__init__(autocast=False, **kwargs)
    self.num_heads = num_heads
    self.intermediate_size = intermediate_size
    self.rope_theta = float(rope_theta)
    self.radius = radius
    self.first = bool(first)
    self.norm_eps = norm_eps
    self.norm_bias = bool(norm_bias)
    self.attention_bias = bool(attention_bias)
    self.mlp_bias = bool(mlp_bias)
    self.attention_dropout = attention_dropout
    self.mlp_dropout = mlp_dropout
    self.in_std = in_std
    self.out_std = out_std
    self.initializer_cutoff = initializer_cutoff

  def _dense(self, units, bias, std, name):
    return keras.layers.Dense(
        units, use_bias=bias, kernel_initializer=TruncatedNormalCutoff(
            std, self.initializer_cutoff), dtype=self.dtype_policy, name=name)

  def build(self, x_shape, padding_mask_shape=None):
    hidden = x_shape[-1]
    self.head_size = hidden // self.num_heads
    self.attn_norm = None if self.first else layer_norm(self.norm_eps, self.norm_bias,
                                                        "attn_norm")
    self.attn_wqkv = self._dense(3 * hidden, self.attention_bias, self.in_std, "attn_wqkv")
    self.attn_wo = self._dense(hidden, self.attention_bias, self.out_std, "attn_wo")
    self.mlp_norm = layer_norm(self.norm_eps, self.norm_bias, "mlp_norm")
    self.mlp_wi = self._dense(2 * self.intermediate_size, self.mlp_bias, self.in_std, "mlp_wi")
    self.mlp_wo = self._dense(hidden, self.mlp_bias, self.out_std, "mlp_wo")
    for sublayer in (self.attn_norm, self.attn_wqkv, self.attn_wo, self.mlp_norm, self.mlp_wi):
      if sublayer is not None:
        sublayer.build(x_shape)
    self.mlp_wo.build(tuple(x_shape[:-1]) + (self.intermediate_size,))
    self.probs_dropout = keras.layers.Dropout(self.attention_dropout, dtype=self.dtype_policy,
                                              name="probs_dropout")
    self.attn_out_dropout = keras.layers.Dropout(self.attention_dropout,
                                                 dtype=self.dtype_policy, name="attn_out_dropout")
    self.mlp_drop = keras.layers.Dropout(self.mlp_dropout, dtype=self.dtype_policy,
                                         name="mlp_dropout")
    self.built = True

  def _attention(self, h, padding_mask, training, document_ids=None):
    """h float32 [B, L, H] (normed) -> [B, L, H] compute dtype, before attn_wo."""
    batch, seq = tf.shape(h)[0], tf.shape(h)[1]
    qkv = tf.reshape(self.attn_wqkv(h), [batch, seq, 3, self.num_heads, self.head_size])
    q, k, v = tf.unstack(tf.transpose(qkv, [2, 0, 3, 1, 4]))  # each [B, A, L, D]
    if document_ids is None:
      cos, sin = rotary_embedding.cos_sin(seq, self.rope_theta, self.head_size)
    else:
      cos, sin = rotary_embedding.cos_sin_at(
          rotary_embedding.document_positions(document_ids), self.rope_theta, self.head_size)
    q, k = rotary_embedding.rotate(q, cos, sin), rotary_embedding.rotate(k, cos, sin)
    out = attend(q, k, v, padding_mask, self.radius, self.probs_dropout, training,
                 document_ids=document_ids)
    return tf.reshape(tf.transpose(out, [0, 2, 1, 3]), [batch, seq, self.num_heads *
                                                         self.head_size])

  def call(self, x, padding_mask, training=None, document_ids=None):
    x = tf.cast(x, tf.float32)
    fused = bool(training) and self.compute_dtype != "float32"
    h = x if self.first else fused_ops.layer_norm(self.attn_norm, x, fused)
    a = self.attn_wo(self._attention(h, padding_mask, training, document_ids))
    x = x + tf.cast(self.attn_out_dropout(a, training=training), tf.float32)
    u, g = tf.split(self.mlp_wi(fused_ops.layer_norm(self.mlp_norm, x, fused)), 2, axis=-1)
    inner = self.mlp_drop(fused_ops.gelu(u, fused) * g, training=training)
    return x + tf.cast(self.mlp_wo(inner), tf.float32)

  def compute_output_shape(self, x_shape, padding_mask_shape=None):
    return tuple(x_shape)

  def compute_output_spec(self, x, padding_mask, training=None, document_ids=None):
    return keras.KerasTensor(tuple(x.shape), dtype="float32")

  def get_config(self):
    config = super().get_config()
    config.update(num_heads=self.num_heads, intermediate_size=self.intermediate_size,
                  rope_theta=self.rope_theta, radius=self.radius, first=self.first,
                  norm_eps=self.norm_eps, norm_bias=self.norm_bias,
                  attention_bias=self.attention_bias, mlp_bias=self.mlp_bias,
                  attention_dropout=self.attention_dropout, mlp_dropout=self.mlp_dropout,
                  in_std=self.in_std, out_std=self.out_std,
                  initializer_cutoff=self.initializer_cutoff)
    return config
