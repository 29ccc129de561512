"""ModernBERT's MLM head: HF `ModernBertPredictionHead` (dense, GELU, LayerNorm) + tied decoder."""

from __future__ import annotations

import keras
import tensorflow as tf

from roberta_tf.models import fused_ops
from roberta_tf.models.modernbert.modernbert_config import ModernBertConfig
from roberta_tf.models.modernbert.modernbert_init import TruncatedNormalCutoff
from roberta_tf.models.modernbert.modernbert_layers import layer_norm

MLM_HEAD_NAME = "mlm_head"


@keras.saving.register_keras_serializable(package="roberta_tf")
class PredictionHead(keras.layers.Layer):
  """x float32 [..., H] -> norm(gelu(dense(x))) float32 [..., H] (HF ModernBertPredictionHead,
  shared by the MLM and the task heads). `dense` has a bias iff `bias` (classifier_bias);
  GELU is the exact (erf) form; `norm` has a beta iff `norm_bias`."""

  def __init__(self, hidden_size, bias=False, norm_eps=1e-5, norm_bias=False, std=0.02,
               cutoff=2.0, **kwargs):
    super().__init__(autocast=False, **kwargs)
    self.hidden_size = hidden_size
    self.bias = bool(bias)
    self.norm_eps = norm_eps
    self.norm_bias = bool(norm_bias)
    self.std = std
    self.cutoff = cutoff
    self.dense = keras.layers.Dense(
        hidden_size, use_bias=self.bias,
        kernel_initializer=TruncatedNormalCutoff(std, cutoff), dtype=self.dtype_policy,
        name="dense")
    self.norm = layer_norm(norm_eps, norm_bias, "norm")

  def build(self, x_shape):
    self.dense.build(x_shape)
    self.norm.build(tuple(x_shape[:-1]) + (self.hidden_size,))
    self.built = True

  def call(self, x, training=None):
    fused = bool(training) and self.compute_dtype != "float32"
    h = fused_ops.gelu(self.dense(tf.cast(x, tf.float32)), fused)
    return fused_ops.layer_norm(self.norm, tf.cast(h, tf.float32), fused)

  def compute_output_shape(self, x_shape):
    return tuple(x_shape[:-1]) + (self.hidden_size,)

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, bias=self.bias, norm_eps=self.norm_eps,
                  norm_bias=self.norm_bias, std=self.std, cutoff=self.cutoff)
    return config


@keras.saving.register_keras_serializable(package="roberta_tf")
class ModernBertMLMHead(keras.layers.Layer):
  """Gather -> PredictionHead -> tied decoder (+ bias iff decoder_bias): the interface of
  RoBERTa's `MaskedLMHead` (call(inputs [B, S, H], mask_positions [B, P]) -> float32
  [B, P, V]). The decoder matrix is the token embedding's (a tracked reference, held once);
  logits are cast to float32 before the float32 bias. Sublayers: `head` (dense, norm),
  `decoder_bias` (a weight, only with decoder_bias)."""

  def __init__(self, token_embedding, decoder_bias=True, head_bias=False, norm_eps=1e-5,
               norm_bias=False, std=0.02, cutoff=2.0, **kwargs):
    super().__init__(autocast=False, **kwargs)
    self.token_embedding = token_embedding
    self.use_decoder_bias = bool(decoder_bias)
    self.head_bias = bool(head_bias)
    self.norm_eps = norm_eps
    self.norm_bias = bool(norm_bias)
    self.std = std
    self.cutoff = cutoff
    self.head = PredictionHead(token_embedding.output_dim, bias=head_bias, norm_eps=norm_eps,
                               norm_bias=norm_bias, std=std, cutoff=cutoff,
                               dtype=self.dtype_policy, name="head")

  def build(self, inputs_shape, mask_positions_shape=None):
    self.head.build((None, None, self.token_embedding.output_dim))
    self.decoder_bias = None
    if self.use_decoder_bias:
      self.decoder_bias = self.add_weight(
          name="decoder_bias", shape=(self.token_embedding.input_dim,), initializer="zeros",
          dtype="float32", autocast=False)
    self.built = True

  def call(self, inputs, mask_positions, training=None):
    x = tf.gather(inputs, tf.cast(mask_positions, tf.int32), batch_dims=1)  # [B, P, H]
    logits = tf.cast(self.token_embedding(self.head(x, training=training), reverse=True),
                     tf.float32)
    return logits if self.decoder_bias is None else logits + self.decoder_bias

  def compute_output_shape(self, inputs_shape, mask_positions_shape):
    return tuple(mask_positions_shape) + (self.token_embedding.input_dim,)

  def get_config(self):
    config = super().get_config()
    config.update(token_embedding=keras.layers.serialize(self.token_embedding),
                  decoder_bias=self.use_decoder_bias, head_bias=self.head_bias,
                  norm_eps=self.norm_eps, norm_bias=self.norm_bias, std=self.std,
                  cutoff=self.cutoff)
    return config

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    config["token_embedding"] = keras.layers.deserialize(config["token_embedding"])
    return cls(**config)


def build_modernbert_mlm_head(config: ModernBertConfig, token_embedding,
                              dtype=None) -> ModernBertMLMHead:
  """A built MLM head for `config`, tied to the encoder's `token_embedding`."""
  head = ModernBertMLMHead(
      token_embedding, decoder_bias=config.decoder_bias, head_bias=config.classifier_bias,
      norm_eps=config.norm_eps, norm_bias=config.norm_bias, std=config.init_std("out"),
      cutoff=config.initializer_cutoff_factor, dtype=dtype, name=MLM_HEAD_NAME)
  head.build((None, None, config.hidden_size))
  return head
