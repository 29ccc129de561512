"""`build_encoder`: the RoBERTa encoder as a Keras functional model."""

from __future__ import annotations

import keras
import tensorflow as tf

from roberta_tf.models.roberta.config import RobertaConfig
from roberta_tf.models.roberta.embeddings import RobertaEmbeddings
from roberta_tf.models.roberta.transformer_layer import TransformerLayer

ENCODER_NAME = "roberta_encoder"
EMBEDDINGS_NAME = "embeddings"
FINAL_LAYER_NORM_NAME = "final_layer_norm"  # pre-LN only


def layer_name(index: int) -> str:
  """The (checkpoint-key) name of Transformer layer `index`."""
  return f"transformer_layer_{index}"


def build_encoder(config: RobertaConfig, dtype=None, serving: bool = False) -> keras.Model:
  """Builds the RoBERTa encoder.

  Args:
    config: the architecture.
    dtype: a Keras dtype policy or its name ("float32", "mixed_bfloat16", "mixed_float16");
      None uses the global policy (`keras.config.dtype_policy()`). Whatever the policy, the
      embedding sum, LayerNorms, softmax and the outputs are float32; matmuls run in the
      policy's compute dtype and all variables are float32.
    serving: the exports' inference-only layout (TransformerLayer's `serving`: Q, K and V one
      `query_key_value` Dense per layer); its weights come from a trained encoder through
      serving/serving_precision.rebuilt, not from a checkpoint.

  Returns:
    A functional keras.Model named "roberta_encoder" with
      inputs  {"input_ids": int32 [B, S], "padding_mask": int32 [B, S] (1 real, 0 pad)}, and
              "token_type_ids" int32 [B, S] only when config.type_vocab_size > 1 (callers
              build the dict with `encoder_inputs`, which fills it),
      outputs {"sequence_output": float32 [B, S, H],
               "pooled_output": float32 [B, H] = sequence_output[:, 0], the <s> vector}.
    S is dynamic, up to config.max_seq_len. `pooled_output` has no dense+tanh "pooler": HF's
    RobertaForMaskedLM has none (RobertaModel's pooler is only trained by fine-tuning heads), so
    a classification head puts its own dense on top of it. Layers: "embeddings"
    (RobertaEmbeddings), "transformer_layer_{i}" (TransformerLayer), i = 0..L-1, and with
    config.pre_layer_norm a "final_layer_norm".
  """
  input_ids = keras.Input(shape=(None,), dtype="int32", name="input_ids")
  padding_mask = keras.Input(shape=(None,), dtype="int32", name="padding_mask")
  inputs = {"input_ids": input_ids, "padding_mask": padding_mask}
  if config.type_vocab_size > 1:  # one type (RoBERTa's) needs no input: every token adds it
    inputs["token_type_ids"] = keras.Input(shape=(None,), dtype="int32", name="token_type_ids")
  x = RobertaEmbeddings(
      vocab_size=config.vocab_size, hidden_size=config.hidden_size,
      max_positions=config.max_positions, pad_id=config.pad_id, dropout=config.dropout,
      layer_norm_eps=config.layer_norm_eps, initializer_range=config.initializer_range,
      type_vocab_size=config.type_vocab_size, dtype=dtype,
      name=EMBEDDINGS_NAME)(input_ids, padding_mask, inputs.get("token_type_ids"))
  for i in range(config.num_layers):
    x = TransformerLayer(
        num_heads=config.num_heads, intermediate_size=config.intermediate_size,
        dropout=config.dropout, attention_dropout=config.attention_dropout,
        layer_norm_eps=config.layer_norm_eps, initializer_range=config.initializer_range,
        pre_layer_norm=config.pre_layer_norm, use_bias=config.use_bias,
        gated_ffn=config.gated_ffn, serving=serving, dtype=dtype,
        name=layer_name(i))(x, padding_mask=padding_mask)
  if config.pre_layer_norm:  # the residual stream is never normalized inside pre-LN layers
    x = keras.layers.LayerNormalization(epsilon=config.layer_norm_eps, dtype="float32",
                                        name=FINAL_LAYER_NORM_NAME)(x)
  outputs = {"sequence_output": x, "pooled_output": x[:, 0, :]}
  return keras.Model(inputs=inputs, outputs=outputs, name=ENCODER_NAME, dtype=dtype)


def encoder_inputs(encoder: keras.Model, input_ids, padding_mask, token_type_ids=None) -> dict:
  """``encoder``'s input dict: token_type_ids (default all 0, one segment) only when it takes
  them (a table of >= 2 types), so RoBERTa and NSP-ablation encoders are called the same way."""
  inputs = {"input_ids": input_ids, "padding_mask": padding_mask}
  if "token_type_ids" in encoder.input:
    inputs["token_type_ids"] = (tf.zeros_like(input_ids) if token_type_ids is None
                                else token_type_ids)
  return inputs
