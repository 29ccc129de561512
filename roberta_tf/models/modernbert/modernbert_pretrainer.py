"""`ModernBertPretrainer`: the ModernBERT encoder plus its tied MLM head (HF
ModernBertForMaskedLM), with RobertaPretrainer's interface, so the training step, the exports
and fine-tuning call either the same way."""

from __future__ import annotations

import keras
import tensorflow as tf

from roberta_tf.models.every_position import every_position_inputs
from roberta_tf.models.modernbert.modernbert_config import ModernBertConfig
from roberta_tf.models.modernbert.modernbert_encoder import (
  EMBEDDINGS_NAME,
  build_modernbert_encoder,
  encode_documents,
)
from roberta_tf.models.modernbert.modernbert_mlm_head import build_modernbert_mlm_head


@keras.saving.register_keras_serializable(package="roberta_tf")
class ModernBertPretrainer(keras.Model):
  """ModernBERT for masked-LM pretraining.

  Attributes:
    config: the ModernBertConfig it was built from.
    encoder: the functional encoder (`build_modernbert_encoder`).
    mlm_head: the MLM head, its decoder tied to the token embedding.
    nsp_head: always None (kept so callers treat both families alike).

  Built on construction; checkpoint layout `tf.train.Checkpoint(model=pretrainer)`.
  """

  def __init__(self, config: ModernBertConfig, dtype=None, serving: bool = False, **kwargs):
    """Args: config: the architecture; dtype: a dtype policy or its name (see
    build_modernbert_encoder); serving: accepted for RobertaPretrainer's interface: ModernBERT
    has one layout (Wqkv is already fused), which trains and serves, so weights copy by path."""
    del serving
    if isinstance(config, dict):  # from_config
      config = ModernBertConfig.from_dict(config)
    kwargs.setdefault("name", "modernbert_pretrainer")
    super().__init__(dtype=dtype, **kwargs)
    self.config = config
    self.encoder = build_modernbert_encoder(config, dtype=dtype)
    token_embedding = self.encoder.get_layer(EMBEDDINGS_NAME).token_embedding
    self.mlm_head = build_modernbert_mlm_head(config, token_embedding, dtype=dtype)
    self.nsp_head = None
    self.built = True

  def call(self, inputs, training=None, with_nsp=False):
    """MLM logits at the masked positions.

    Args:
      inputs: dict with "input_ids" int32 [B, S], "padding_mask" int32 [B, S] and
        "mask_positions" int32 [B, P] (empty slots may point anywhere valid, e.g. 0; the loss
        ignores them via mask_weights); optionally "document_ids" int32 [B, S] (rows packing
        several documents: each is encoded as if alone, `encode_documents`).
      training: enables dropout.
      with_nsp: must be False (ModernBERT has no NSP head).

    Returns:
      float32 [B, P, V].
    """
    if with_nsp:
      raise ValueError("with_nsp=True, but ModernBERT has no NSP head")
    if inputs.get("document_ids") is not None:
      encoded = encode_documents(self.encoder, self.config.num_layers, inputs, training)
    else:
      encoded = self.encoder({"input_ids": inputs["input_ids"],
                              "padding_mask": inputs["padding_mask"]}, training=training)
    return tf.cast(self.mlm_head(encoded["sequence_output"],
                                 mask_positions=inputs["mask_positions"], training=training),
                   tf.float32)

  def full_logits(self, input_ids, padding_mask, training=False):
    """MLM logits at every position: float32 [B, S, V] for int32 [B, S] inputs."""
    return self(every_position_inputs(input_ids, padding_mask), training=training)

  def get_config(self):
    config = super().get_config()
    config["config"] = self.config.to_dict()
    return config

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    return cls(ModernBertConfig.from_dict(config.pop("config")), **config)
