"""`MaskedLMHead`: RoBERTa's masked-LM head, its decoder tied to the token embedding."""

from __future__ import annotations

import keras
import tensorflow as tf

from roberta_tf.models.initializers import normal
from roberta_tf.models.roberta.config import RobertaConfig

MLM_HEAD_NAME = "mlm_head"


@keras.saving.register_keras_serializable(package="roberta_tf")
class MaskedLMHead(keras.layers.Layer):
  """Gather → dense → GELU → LayerNorm → tied decoder + bias (HF `RobertaLMHead`).

  Gathering the P masked positions first means only they pay for the [H, V] projection.
  The math and sublayer names ("intermediate_dense", "intermediate_layer_norm", "output_bias")
  are keras-hub's `MaskedLMHead`'s; that layer is not reused because under a mixed policy on
  the TF backend it adds its float32 bias to bfloat16 logits, which TF rejects. Here the
  decoder matmul runs in the compute dtype and its result is cast to float32 before the bias,
  so logits are float32 under every policy.

  The decoder matrix is `token_embedding`'s (a tracked reference, so checkpoints and
  parameter counts hold it once, under the encoder).
  """

  def __init__(self, token_embedding, layer_norm_eps=1e-5, initializer_range=0.02, **kwargs):
    # autocast=False: the float32 LayerNorm output reaches the embedding layer as is; the
    # embedding's `reverse_dtype` decides the matmul precision.
    super().__init__(autocast=False, **kwargs)
    self.token_embedding = token_embedding
    self.layer_norm_eps = layer_norm_eps
    self.initializer_range = initializer_range

  def build(self, inputs_shape, mask_positions_shape=None):
    hidden = self.token_embedding.output_dim
    vocab = self.token_embedding.input_dim
    self.intermediate_dense = keras.layers.Dense(
        hidden, activation="gelu", kernel_initializer=normal(self.initializer_range),
        dtype=self.dtype_policy, name="intermediate_dense")
    self.intermediate_dense.build((None, None, inputs_shape[-1]))
    self.intermediate_layer_norm = keras.layers.LayerNormalization(
        epsilon=self.layer_norm_eps, dtype="float32", name="intermediate_layer_norm")
    self.intermediate_layer_norm.build((None, None, hidden))
    # autocast=False: added to float32 logits, so never cast to a mixed policy's compute dtype.
    self.output_bias = self.add_weight(name="output_bias", shape=(vocab,), initializer="zeros",
                                       dtype="float32", autocast=False)
    self.built = True

  def call(self, inputs, mask_positions):
    """inputs: [B, S, H]; mask_positions: int [B, P]. Returns float32 logits [B, P, V]."""
    x = tf.gather(inputs, tf.cast(mask_positions, tf.int32), batch_dims=1)  # [B, P, H]
    x = self.intermediate_layer_norm(self.intermediate_dense(x))
    logits = self.token_embedding(x, reverse=True)
    return tf.cast(logits, tf.float32) + self.output_bias

  def compute_output_shape(self, inputs_shape, mask_positions_shape):
    return tuple(mask_positions_shape) + (self.token_embedding.input_dim,)

  def get_config(self):
    config = super().get_config()
    config.update(token_embedding=keras.layers.serialize(self.token_embedding),
                  layer_norm_eps=self.layer_norm_eps, initializer_range=self.initializer_range)
    return config

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    config["token_embedding"] = keras.layers.deserialize(config["token_embedding"])
    return cls(**config)


def build_mlm_head(config: RobertaConfig, token_embedding, dtype=None) -> MaskedLMHead:
  """A built `MaskedLMHead` for `config`, tied to the encoder's `token_embedding`.

  Args:
    config: the architecture (eps, initializer).
    token_embedding: the encoder's `ReversibleEmbedding` (tie_weights=True).
    dtype: the dtype policy (see `build_encoder`).
  """
  head = MaskedLMHead(token_embedding, layer_norm_eps=config.layer_norm_eps,
                      initializer_range=config.initializer_range, dtype=dtype,
                      name=MLM_HEAD_NAME)
  head.build((None, None, config.hidden_size))
  return head
