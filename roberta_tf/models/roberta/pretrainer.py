"""`RobertaPretrainer`: the encoder plus the tied MLM head, the model that pretraining trains."""

from __future__ import annotations

import keras
import tensorflow as tf

from roberta_tf.models.every_position import every_position_inputs
from roberta_tf.models.roberta.config import RobertaConfig
from roberta_tf.models.roberta.encoder import EMBEDDINGS_NAME, build_encoder, encoder_inputs
from roberta_tf.models.roberta.mlm_head import build_mlm_head
from roberta_tf.models.roberta.nsp_head import build_nsp_head


@keras.saving.register_keras_serializable(package="roberta_tf")
class RobertaPretrainer(keras.Model):
  """RoBERTa for masked-LM pretraining (HF `RobertaForMaskedLM`, without its unused pooler).

  Attributes:
    config: the RobertaConfig it was built from.
    encoder: the functional encoder (`build_encoder`).
    mlm_head: the MLM head (`build_mlm_head`), its decoder tied to the token embedding.
    nsp_head: BERT's next-sentence head (`build_nsp_head`) when config.next_sentence_head (the
      input-format ablation), else None.

  Built on construction (variables exist before any call), so a checkpoint can be restored
  into it straight away. Checkpoint layout: `tf.train.Checkpoint(model=pretrainer)`.
  """

  def __init__(self, config: RobertaConfig, dtype=None, serving: bool = False, **kwargs):
    """Args: config: the architecture; dtype: a dtype policy or its name; serving: the encoder
    in the exports' inference-only layout (both: see build_encoder)."""
    if isinstance(config, dict):  # from_config
      config = RobertaConfig.from_dict(config)
    kwargs.setdefault("name", "roberta_pretrainer")
    super().__init__(dtype=dtype, **kwargs)
    self.config = config
    self.encoder = build_encoder(config, dtype=dtype, serving=serving)
    token_embedding = self.encoder.get_layer(EMBEDDINGS_NAME).token_embedding
    self.mlm_head = build_mlm_head(config, token_embedding, dtype=dtype)
    self.nsp_head = build_nsp_head(config, dtype=dtype) if config.next_sentence_head else None
    self.built = True

  def call(self, inputs, training=None, with_nsp=False):
    """MLM logits at the masked positions only (and with_nsp: the NSP logits too).

    Args:
      inputs: dict with "input_ids" int32 [B, S], "padding_mask" int32 [B, S] and
        "mask_positions" int32 [B, P] (indices into S; empty slots may point anywhere valid,
        e.g. 0, and are ignored by the loss via mask_weights); optional "token_type_ids" int32
        [B, S] (used when the config has a type table; all 0 when absent).
      training: enables dropout.
      with_nsp: also return the NSP head's logits (the model must have one).

    Returns:
      float32 [B, P, V] logits; with_nsp: (those, float32 [B, 2] NSP logits).
    """
    encoded = self.encoder(encoder_inputs(self.encoder, inputs["input_ids"],
                                          inputs["padding_mask"], inputs.get("token_type_ids")),
                           training=training)
    logits = tf.cast(
        self.mlm_head(encoded["sequence_output"], mask_positions=inputs["mask_positions"]),
        tf.float32)
    if not with_nsp:
      return logits
    if self.nsp_head is None:
      raise ValueError("with_nsp=True, but this model has no NSP head (config."
                       "next_sentence_head is false)")
    return logits, self.nsp_head(encoded["pooled_output"])

  def full_logits(self, input_ids, padding_mask, training=False):
    """MLM logits at every position (inference, fill-mask, parity with HF).

    Args:
      input_ids, padding_mask: int32 [B, S].

    Returns:
      float32 [B, S, V].
    """
    return self(every_position_inputs(input_ids, padding_mask), training=training)

  def get_config(self):
    config = super().get_config()
    config["config"] = self.config.to_dict()
    return config

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    return cls(RobertaConfig.from_dict(config.pop("config")), **config)
