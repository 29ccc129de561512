"""`build_modernbert_encoder`: the ModernBERT encoder as a Keras functional model;
`encode_documents`: the same layers over rows that pack several documents."""

from __future__ import annotations

import keras

from roberta_tf.models.modernbert.modernbert_config import ModernBertConfig
from roberta_tf.models.modernbert.modernbert_layers import (
  ModernBertEmbeddings,
  ModernBertLayer,
  layer_norm,
)

ENCODER_NAME = "modernbert_encoder"
EMBEDDINGS_NAME = "embeddings"
FINAL_NORM_NAME = "final_norm"


def layer_name(index: int) -> str:
  """The (checkpoint-key) name of encoder layer `index`."""
  return f"modernbert_layer_{index}"


def build_modernbert_encoder(config: ModernBertConfig, dtype=None) -> keras.Model:
  """Builds the ModernBERT encoder (HF `ModernBertModel`).

  Args:
    config: the architecture.
    dtype: a Keras dtype policy or its name; None uses the global policy. Whatever the policy,
      the LayerNorms, rotary, softmax and the outputs are float32; matmuls run in the
      compute dtype.

  Returns:
    A functional keras.Model named "modernbert_encoder", with the interface of RoBERTa's
    `build_encoder`:
      inputs  {"input_ids": int32 [B, L], "padding_mask": int32 [B, L] (1 real, 0 pad)},
      outputs {"sequence_output": float32 [B, L, H], after final_norm (HF's
               last_hidden_state), "pooled_output": float32 [B, H] = sequence_output[:, 0]}.
    Positions are 0..L-1 in every row (HF's, whatever the padding); outputs at pad positions
    are meaningless.
  """
  input_ids = keras.Input(shape=(None,), dtype="int32", name="input_ids")
  padding_mask = keras.Input(shape=(None,), dtype="int32", name="padding_mask")
  x = ModernBertEmbeddings(
      config.vocab_size, config.hidden_size, pad_id=config.pad_id, norm_eps=config.norm_eps,
      norm_bias=config.norm_bias, dropout=config.embedding_dropout,
      initializer_std=config.init_std("in"),
      initializer_cutoff=config.initializer_cutoff_factor, dtype=dtype,
      name=EMBEDDINGS_NAME)(input_ids)
  for i in range(config.num_layers):
    x = ModernBertLayer(
        num_heads=config.num_heads, intermediate_size=config.intermediate_size,
        rope_theta=config.rope_theta(i),
        radius=None if config.is_global(i) else config.window_radius, first=i == 0,
        norm_eps=config.norm_eps, norm_bias=config.norm_bias,
        attention_bias=config.attention_bias, mlp_bias=config.mlp_bias,
        attention_dropout=config.attention_dropout, mlp_dropout=config.mlp_dropout,
        in_std=config.init_std("in"), out_std=config.init_std("out"),
        initializer_cutoff=config.initializer_cutoff_factor, dtype=dtype,
        name=layer_name(i))(x, padding_mask=padding_mask)
  x = layer_norm(config.norm_eps, config.norm_bias, FINAL_NORM_NAME)(x)
  outputs = {"sequence_output": x, "pooled_output": x[:, 0, :]}
  return keras.Model(inputs={"input_ids": input_ids, "padding_mask": padding_mask},
                     outputs=outputs, name=ENCODER_NAME, dtype=dtype)


def encode_documents(encoder: keras.Model, num_layers: int, inputs: dict, training=None) -> dict:
  """`encoder`'s outputs for rows packing several documents (data/packings.py's document
  packings): its own layers, called in order with the rows' document ids, so attention stays
  inside each document and rotary positions restart at each (modernbert_layers.py).

  Args:
    encoder: a `build_modernbert_encoder` model; num_layers: its config's.
    inputs: "input_ids", "padding_mask" int32 [B, L] and "document_ids" int32 [B, L] (each
      row's documents 0, 1, ... in order; data/example_spec.document_ids).

  Returns:
    The encoder's outputs dict. With one document per row (document_ids all 0) it equals
    `encoder(inputs)`; each document of a row gets what it gets as a row of its own.
  The functional encoder keeps its two inputs (every export and task head calls it so); this
  path is the pretrainer's, for training and evaluation on document-packed shards.
  """
  x = encoder.get_layer(EMBEDDINGS_NAME)(inputs["input_ids"], training=training)
  for i in range(num_layers):
    x = encoder.get_layer(layer_name(i))(x, padding_mask=inputs["padding_mask"],
                                         document_ids=inputs["document_ids"],
                                         training=training)
  x = encoder.get_layer(FINAL_NORM_NAME)(x)
  return {"sequence_output": x, "pooled_output": x[:, 0, :]}
