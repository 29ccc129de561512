"""`TransformerLayer`: one post-LayerNorm BERT/RoBERTa encoder layer with float32 softmax and LN.

Why not `keras_hub.layers.TransformerEncoder`: it has the same math and eps, but (1) it ties the
attention-probability dropout to the hidden dropout (RoBERTa configs carry both), and (2) under a
mixed policy its softmax, LayerNorm outputs and residual sums run in bfloat16/float16, while this
project keeps the residual stream, LayerNorm and softmax in float32 (as PyTorch autocast does for
the reference), so that mixed-precision training matches float32 closely. Weights map one to one
(see keras_hub_weights.py).
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf

from roberta_tf.models import fused_ops
from roberta_tf.models.initializers import normal


@keras.saving.register_keras_serializable(package="roberta_tf")
class TransformerLayer(keras.layers.Layer):
  """x [B, S, H] float32, padding_mask [B, S] → [B, S, H] float32.

  Post-LN (RoBERTa's, the default):
  ```
  a = LayerNorm(x + Dropout(attention_output(SelfAttention(x))))
  y = LayerNorm(a + Dropout(output_dense(FFN(a))))
  ```
  Pre-LN (`pre_layer_norm=True`, HF's roberta-prelayernorm; the encoder then adds a final
  LayerNorm after the last layer):
  ```
  a = x + Dropout(attention_output(SelfAttention(LayerNorm(x))))
  y = a + Dropout(output_dense(FFN(LayerNorm(a))))
  ```
  FFN(h) = gelu(intermediate_dense(h)), or with `gated_ffn` (GEGLU, Shazeer 2020)
  gelu(intermediate_gate(h)) * intermediate_dense(h). GELU is the exact (erf) form, HF's
  "gelu". `use_bias=False` drops the biases of every Dense (Cramming's "no linear biases"; the
  LayerNorms keep theirs). Pads are masked as keys only, so outputs at real positions do not
  depend on what sits at pad positions.

  Sublayers (checkpoint keys): `query`, `key`, `value`, `attention_output` (Dense H→H, kernels
  [H, H] with heads laid out as [H, A, H/A] blocks), `attention_layer_norm` (post-LN: after
  the attention's residual; pre-LN: before the attention), `intermediate_dense` (Dense H→F),
  `intermediate_gate` (Dense H→F, gated only), `output_dense` (Dense F→H),
  `output_layer_norm` (post-LN: after the FFN's residual; pre-LN: before the FFN).

  `serving=True` is the inference-only layout of exports (serving/serving_precision.py): one
  `query_key_value` Dense H→3H in place of `query`, `key` and `value`, holding
  [Wq/√d | Wk | Wv] (and the biases alike; `fuse_query_key_value` makes it), and every Dense
  run as a 2-D matmul + bias add. TF's remapper fuses such a pair into one oneDNN call, whose
  weights oneDNN can keep in its own layout between calls (TF_ONEDNN_ASSUME_FROZEN_WEIGHTS,
  serving/frozen_weights.py): at batch 1 the matmuls otherwise re-pack every weight on every
  call (docs/serving_performance.md). Such a layer cannot train.
  """

  def __init__(self, num_heads, intermediate_size, dropout=0.0, attention_dropout=0.0,
               layer_norm_eps=1e-5, initializer_range=0.02, pre_layer_norm=False,
               use_bias=True, gated_ffn=False, serving=False, **kwargs):
    # autocast=False: the float32 residual stream must reach the LayerNorms unrounded; the Dense
    # sublayers cast their own inputs to the compute dtype.
    super().__init__(autocast=False, **kwargs)
    self.num_heads = num_heads
    self.intermediate_size = intermediate_size
    self.dropout_rate = dropout
    self.attention_dropout_rate = attention_dropout
    self.layer_norm_eps = layer_norm_eps
    self.initializer_range = initializer_range
    self.pre_layer_norm = bool(pre_layer_norm)
    self.use_bias = bool(use_bias)
    self.gated_ffn = bool(gated_ffn)
    self.serving = bool(serving)
    self.supports_masking = False

  def _dense(self, units, name, activation=None):
    return keras.layers.Dense(units, activation=activation, use_bias=self.use_bias,
                              kernel_initializer=normal(self.initializer_range),
                              dtype=self.dtype_policy, name=name)

  def build(self, x_shape, padding_mask_shape=None):
    hidden = x_shape[-1]
    if hidden % self.num_heads:
      raise ValueError(f"hidden size {hidden} is not divisible by num_heads={self.num_heads}")
    self.head_size = hidden // self.num_heads
    inner_shape = tuple(x_shape[:-1]) + (self.intermediate_size,)
    if self.serving:
      self.query_key_value = self._dense(3 * hidden, "query_key_value")
      projections = (self.query_key_value,)
    else:
      self.query = self._dense(hidden, "query")
      self.key = self._dense(hidden, "key")
      self.value = self._dense(hidden, "value")
      projections = (self.query, self.key, self.value)
    self.attention_output = self._dense(hidden, "attention_output")
    # GELU is applied in `_ffn` (the exact erf form, HF's "gelu"; Keras' "gelu" is the same op).
    self.intermediate_dense = self._dense(self.intermediate_size, "intermediate_dense")
    self.output_dense = self._dense(hidden, "output_dense")
    self.intermediate_gate = (self._dense(self.intermediate_size, "intermediate_gate")
                              if self.gated_ffn else None)
    for dense in (*projections, self.attention_output, self.intermediate_dense,
                  self.intermediate_gate):
      if dense is not None:
        dense.build(x_shape)
    self.output_dense.build(inner_shape)
    self.attention_layer_norm = keras.layers.LayerNormalization(
        epsilon=self.layer_norm_eps, dtype="float32", name="attention_layer_norm")
    self.output_layer_norm = keras.layers.LayerNormalization(
        epsilon=self.layer_norm_eps, dtype="float32", name="output_layer_norm")
    self.attention_layer_norm.build(x_shape)
    self.output_layer_norm.build(x_shape)
    self.attention_probs_dropout = keras.layers.Dropout(
        self.attention_dropout_rate, dtype=self.dtype_policy, name="attention_probs_dropout")
    self.attention_output_dropout = keras.layers.Dropout(
        self.dropout_rate, dtype=self.dtype_policy, name="attention_output_dropout")
    self.output_dropout = keras.layers.Dropout(
        self.dropout_rate, dtype=self.dtype_policy, name="output_dropout")
    self.built = True

  def _self_attention(self, x, padding_mask, training):
    """x float32 [B, S, H] → [B, S, H] in the compute dtype (before the output projection)."""
    batch, seq = tf.shape(x)[0], tf.shape(x)[1]

    def split_heads(t):  # [B, S, H] → [B, A, S, H/A]
      t = tf.reshape(t, [batch, seq, self.num_heads, self.head_size])
      return tf.transpose(t, [0, 2, 1, 3])

    # Scaling q before the matmul (not the scores after) keeps float16 scores in range.
    q = split_heads(self.query(x) * tf.cast(1.0 / math.sqrt(self.head_size),
                                            self.compute_dtype))
    k = split_heads(self.key(x))
    v = split_heads(self.value(x))
    probs = self.attention_probs_dropout(_probabilities(q, k, padding_mask, self.compute_dtype),
                                         training=training)
    context = tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3])  # [B, S, A, H/A]
    return tf.reshape(context, [batch, seq, self.num_heads * self.head_size])

  def call(self, x, padding_mask, training=None):
    """x: float32 [B, S, H]; padding_mask: int [B, S] (1 real, 0 pad). Returns float32 [B, S, H]."""
    if self.serving:
      if training:
        raise ValueError(f"{self.name} is in the serving layout, which does not train")
      return serving_call(self, x, padding_mask)
    x = tf.cast(x, tf.float32)
    # Training under a mixed policy fuses LayerNorm and GELU with XLA (models/fused_ops.py).
    fused = bool(training) and self.compute_dtype != "float32"
    norm = lambda layer, t: fused_ops.layer_norm(layer, t, fused)
    if self.pre_layer_norm:
      h = self.attention_output(self._self_attention(norm(self.attention_layer_norm, x),
                                                     padding_mask, training))
      x = x + tf.cast(self.attention_output_dropout(h, training=training), tf.float32)
      h = self.output_dense(self._ffn(norm(self.output_layer_norm, x), fused))
      return x + tf.cast(self.output_dropout(h, training=training), tf.float32)
    h = self.attention_output(self._self_attention(x, padding_mask, training))
    h = self.attention_output_dropout(h, training=training)
    x = norm(self.attention_layer_norm, x + tf.cast(h, tf.float32))
    h = self.output_dense(self._ffn(x, fused))
    h = self.output_dropout(h, training=training)
    return norm(self.output_layer_norm, x + tf.cast(h, tf.float32))

  def _ffn(self, x, fused=False):
    """The feed-forward's inner activations [B, S, F] (compute dtype)."""
    if self.gated_ffn:
      return fused_ops.gelu(self.intermediate_gate(x), fused) * self.intermediate_dense(x)
    return fused_ops.gelu(self.intermediate_dense(x), fused)

  def compute_output_shape(self, x_shape, padding_mask_shape=None):
    return tuple(x_shape)

  def compute_output_spec(self, x, padding_mask, training=None):
    return keras.KerasTensor(tuple(x.shape), dtype="float32")

  def get_config(self):
    config = super().get_config()
    config.update(num_heads=self.num_heads, intermediate_size=self.intermediate_size,
                  dropout=self.dropout_rate, attention_dropout=self.attention_dropout_rate,
                  layer_norm_eps=self.layer_norm_eps, initializer_range=self.initializer_range,
                  pre_layer_norm=self.pre_layer_norm, use_bias=self.use_bias,
                  gated_ffn=self.gated_ffn, serving=self.serving)
    return config

  def fuse_query_key_value(self, query, key, value):
    """Sets `query_key_value` (serving layout) from the three (kernel, bias-or-None) pairs of
    an unfused layer's query, key and value: [Wq/√d | Wk | Wv], each kernel [H, H], bias [H];
    computed in float32 and rounded once to the variables' dtype."""
    scale = 1.0 / math.sqrt(self.head_size)
    parts = [(tf.cast(w, tf.float32), None if b is None else tf.cast(b, tf.float32))
             for w, b in (query, key, value)]
    parts[0] = (parts[0][0] * scale, None if parts[0][1] is None else parts[0][1] * scale)
    fused = self.query_key_value
    fused.kernel.assign(tf.cast(tf.concat([w for w, _ in parts], -1), fused.kernel.dtype))
    if self.use_bias:
      fused.bias.assign(tf.cast(tf.concat([b for _, b in parts], -1), fused.bias.dtype))


def _probabilities(q, k, padding_mask, dtype):
  """Attention probabilities [B, A, S, S] in `dtype` of q, k [B, A, S, H/A] (q already scaled),
  softmax in float32 over the keys, pads masked as keys."""
  scores = tf.cast(tf.matmul(q, k, transpose_b=True), tf.float32)
  # Additive mask on keys: -1e9 underflows exp() to exactly 0 in float32.
  key_is_pad = 1.0 - tf.cast(padding_mask, tf.float32)[:, None, None, :]
  return tf.cast(tf.nn.softmax(scores - 1e9 * key_is_pad, axis=-1), dtype)


def _dense_2d(layer, dense, t):
  """dense(t) for t [N, in] as one matmul + bias add (what TF's remapper fuses), in the layer's
  compute dtype."""
  dtype = layer.compute_dtype
  y = tf.matmul(tf.cast(t, dtype), tf.cast(dense.kernel, dtype))
  return tf.nn.bias_add(y, tf.cast(dense.bias, dtype)) if layer.use_bias else y


def serving_call(layer: TransformerLayer, x, padding_mask):
  """`layer` (serving layout) on x float32 [B, S, H] → float32 [B, S, H], inference only:
  the same math as `TransformerLayer.call`, on [B*S, H] rows."""
  batch, seq = tf.shape(x)[0], tf.shape(x)[1]
  heads, size = layer.num_heads, layer.head_size
  rows = tf.reshape(tf.cast(x, tf.float32), [-1, heads * size])

  def attention(h):  # [B*S, H] → [B*S, H] (compute dtype), through the output projection
    qkv = tf.reshape(_dense_2d(layer, layer.query_key_value, h), [batch, seq, 3, heads, size])
    q, k, v = tf.unstack(tf.transpose(qkv, [2, 0, 3, 1, 4]))  # each [B, A, S, H/A]
    probs = _probabilities(q, k, padding_mask, layer.compute_dtype)
    context = tf.reshape(tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3]), [-1, heads * size])
    return _dense_2d(layer, layer.attention_output, context)

  def ffn(h):  # [B*S, H] → [B*S, H] (compute dtype)
    # tf.nn.gelu right on the matmul + bias add: TF's remapper folds the three into one oneDNN
    # call that computes the exact GELU in float32 on the accumulator (2.01 -> 1.67 ms a layer
    # at 120 tokens, bf16); fused_ops.gelu's float32 detour is for unfused bfloat16 tensors.
    inner = tf.nn.gelu(_dense_2d(
        layer, layer.intermediate_gate if layer.gated_ffn else layer.intermediate_dense, h),
        approximate=False)
    if layer.gated_ffn:
      inner = inner * _dense_2d(layer, layer.intermediate_dense, h)
    return _dense_2d(layer, layer.output_dense, inner)

  if layer.pre_layer_norm:
    rows = rows + tf.cast(attention(layer.attention_layer_norm(rows)), tf.float32)
    rows = rows + tf.cast(ffn(layer.output_layer_norm(rows)), tf.float32)
  else:
    rows = layer.attention_layer_norm(rows + tf.cast(attention(rows), tf.float32))
    rows = layer.output_layer_norm(rows + tf.cast(ffn(rows), tf.float32))
  return tf.reshape(rows, [batch, seq, heads * size])
