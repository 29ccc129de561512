"""Weights between a `keras_hub.models.RobertaBackbone` and our encoder (`build_encoder`).

The layers correspond one to one (keras-hub's TransformerEncoder is the same post-LN layer):

| keras-hub (layer i)                                  | ours                                    |
|------------------------------------------------------|-----------------------------------------|
| embeddings/token_embedding [V, H]                    | embeddings/token_embedding              |
| embeddings/position_embedding [max_seq_len, H]       | embeddings/position_embedding rows 2..  |
| embeddings_layer_norm                                | embeddings/layer_norm                   |
| self_attention_layer/{query,key,value} [H, A, H/A]   | {query,key,value} [H, H] (reshaped)     |
| self_attention_layer/attention_output [A, H/A, H]    | attention_output [H, H] (reshaped)      |
| self_attention_layer_norm, feedforward_layer_norm    | attention_layer_norm, output_layer_norm |
| feedforward_intermediate_dense, _output_dense        | intermediate_dense, output_dense        |
| RobertaMaskedLM mlm_head/intermediate_dense, ...     | mlm_head/intermediate_dense, ...        |
|   .../intermediate_layer_norm, .../output_bias       |   (the decoder is tied in both)         |

Positions: keras-hub numbers tokens 0..S-1 from the left, RoBERTa numbers real tokens from
pad_id + 1 = 2, so keras-hub's row j is our row j + 2 (keras-hub's own HF converter drops the
same two rows). Outputs agree at real tokens for right-padded inputs (the usual layout); with
left padding keras-hub's positions shift and they do not. Rows 0 and 1, which no real token
reads, are zeroed on import. keras-hub has a single dropout rate and a fixed eps of 1e-5.

keras-hub has no token-type table (fairseq's shape). Our one-row table (type_vocab_size=1, the
default), which every token adds, is added to every position row on export (the same sum);
an import builds a model without the table (config_from_backbone: type_vocab_size=0), or
zeroes the table of an encoder that has one.
"""

from __future__ import annotations

import keras
import keras_hub
import numpy as np

from roberta_tf.models.roberta.config import RobertaConfig
from roberta_tf.models.roberta.encoder import EMBEDDINGS_NAME, layer_name
from roberta_tf.models.roberta.mlm_head import MaskedLMHead


class KerasHubWeightsError(ValueError):
  """The backbone and the encoder disagree on a weight's shape or the architecture."""


def build_backbone(config: RobertaConfig, dtype=None) -> keras_hub.models.RobertaBackbone:
  """A keras-hub RobertaBackbone with `config`'s dimensions (dropout = config.dropout)."""
  check_supported(config)
  if config.layer_norm_eps != 1e-5:
    raise KerasHubWeightsError(f"keras-hub RobertaBackbone fixes layer_norm_eps at 1e-5, the "
                               f"config has {config.layer_norm_eps}")
  return keras_hub.models.RobertaBackbone(
      vocabulary_size=config.vocab_size, num_layers=config.num_layers,
      num_heads=config.num_heads, hidden_dim=config.hidden_size,
      intermediate_dim=config.intermediate_size, dropout=config.dropout,
      max_sequence_length=config.max_seq_len, dtype=dtype)


def config_from_backbone(backbone: keras_hub.models.RobertaBackbone) -> RobertaConfig:
  """The RobertaConfig of a keras-hub backbone (special ids: RoBERTa's defaults)."""
  return RobertaConfig(
      vocab_size=backbone.vocabulary_size, hidden_size=backbone.hidden_dim,
      num_layers=backbone.num_layers, num_heads=backbone.num_heads,
      intermediate_size=backbone.intermediate_dim,
      max_positions=backbone.max_sequence_length + RobertaConfig.pad_id + 1,
      dropout=backbone.dropout, attention_dropout=backbone.dropout, type_vocab_size=0)


def _pairs(backbone, encoder):
  """[(name, our variable, keras-hub variable)] for every weight except the position table."""
  ours = encoder.get_layer(EMBEDDINGS_NAME)
  theirs = backbone.get_layer("embeddings")
  norm = backbone.get_layer("embeddings_layer_norm")
  pairs = [("token_embedding", ours.token_embedding.embeddings,
            theirs.token_embedding.embeddings),
           ("embeddings/layer_norm/gamma", ours.layer_norm.gamma, norm.gamma),
           ("embeddings/layer_norm/beta", ours.layer_norm.beta, norm.beta)]
  num_layers = sum(layer.name.startswith("transformer_layer_") for layer in backbone.layers)
  ours_layers = sum(layer.name.startswith("transformer_layer_") for layer in encoder.layers)
  if num_layers != ours_layers:
    raise KerasHubWeightsError(f"the backbone has {num_layers} Transformer layers, the encoder "
                               f"{ours_layers}")
  for i in range(num_layers):
    mine = encoder.get_layer(layer_name(i))
    kh = backbone.get_layer(f"transformer_layer_{i}")
    sublayers = [
        ("query", mine.query, "self_attention_layer/query"),
        ("key", mine.key, "self_attention_layer/key"),
        ("value", mine.value, "self_attention_layer/value"),
        ("attention_output", mine.attention_output, "self_attention_layer/attention_output"),
        ("intermediate_dense", mine.intermediate_dense, "feedforward_intermediate_dense"),
        ("output_dense", mine.output_dense, "feedforward_output_dense"),
    ]
    for name, a, b in sublayers:
      pairs.append((f"{layer_name(i)}/{name}/kernel", a.kernel, _weight(kh, f"{b}/kernel")))
      pairs.append((f"{layer_name(i)}/{name}/bias", a.bias, _weight(kh, f"{b}/bias")))
    for name, a, b in [("attention_layer_norm", mine.attention_layer_norm,
                        "self_attention_layer_norm"),
                       ("output_layer_norm", mine.output_layer_norm, "feedforward_layer_norm")]:
      pairs.append((f"{layer_name(i)}/{name}/gamma", a.gamma, _weight(kh, f"{b}/gamma")))
      pairs.append((f"{layer_name(i)}/{name}/beta", a.beta, _weight(kh, f"{b}/beta")))
  return pairs


def _weight(layer, path: str):
  """The weight of keras-hub's `layer` at `layer.name`/`path` (keras-hub's sublayer names, the
  table in the module docstring), by its public path."""
  full = f"{layer.name}/{path}"
  found = [w for w in layer.weights if w.path == full]
  if len(found) != 1:
    raise KerasHubWeightsError(f"keras-hub's {layer.name} has no weight {full} (this keras-hub "
                               "names its sublayers otherwise)")
  return found[0]


def _type_table(encoder):
  """Our one-row token-type table, or None; a segment table (>= 2 types) has no equivalent."""
  table = encoder.get_layer(EMBEDDINGS_NAME).token_type_embedding
  if table is not None and table.embeddings.shape[0] != 1:
    raise KerasHubWeightsError(f"the encoder has {table.embeddings.shape[0]} token types "
                               "(segments); keras-hub's RobertaBackbone has none")
  return None if table is None else table.embeddings


def _positions(backbone, encoder):
  ours = encoder.get_layer(EMBEDDINGS_NAME)
  theirs = backbone.get_layer("embeddings").position_embedding.position_embeddings
  offset = ours.pad_id + 1
  if ours.position_embedding.embeddings.shape[0] != theirs.shape[0] + offset:
    raise KerasHubWeightsError(
        f"position tables disagree: ours has {ours.position_embedding.embeddings.shape[0]} rows, "
        f"the backbone {theirs.shape[0]} (ours must have {offset} more)")
  return ours.position_embedding.embeddings, theirs, offset


def check_supported(config: RobertaConfig) -> None:
  """Raises KerasHubWeightsError naming the option keras-hub's RobertaBackbone cannot hold."""
  for name in ("pre_layer_norm", "gated_ffn"):
    flag = f"--model_option={name}=true"
    if getattr(config, name):
      raise KerasHubWeightsError(f"{name} ({flag}): keras-hub's RobertaBackbone is post-LN with a "
                                 "plain feed-forward, so it cannot hold this model; use --to_hf "
                                 "(pre-LN) or the SavedModel")


def _copy(pairs, to_backbone: bool):
  values = []
  for name, ours, theirs in pairs:
    src, dst = (ours, theirs) if to_backbone else (theirs, ours)
    if src is None:  # our bias-free Dense (use_bias=False): keras-hub's bias is zero
      values.append((dst, np.zeros(dst.shape, np.float32)))
      continue
    if dst is None:
      if np.any(src.numpy()):
        raise KerasHubWeightsError(f"{name}: the backbone's bias is non-zero, the encoder has "
                                   "no biases (use_bias=false)")
      continue
    if int(np.prod(src.shape)) != int(np.prod(dst.shape)):
      raise KerasHubWeightsError(f"{name}: shape {tuple(src.shape)} cannot become "
                                 f"{tuple(dst.shape)}")
    # Head splits are row-major reshapes: [H, H] ↔ [H, A, H/A], [H] ↔ [A, H/A], [A, H/A, H].
    values.append((dst, np.reshape(src.numpy(), dst.shape)))
  for dst, value in values:  # Assign only after every shape was checked.
    dst.assign(value)


def copy_to_backbone(encoder: keras.Model, backbone: keras_hub.models.RobertaBackbone) -> None:
  """Copies our encoder's weights into a keras-hub RobertaBackbone of the same dimensions."""
  if any(layer.name == "final_layer_norm" for layer in encoder.layers) or any(
      getattr(layer, "gated_ffn", False) for layer in encoder.layers):
    raise KerasHubWeightsError("a pre-LN or gated-FFN encoder has no keras-hub RobertaBackbone "
                               "equivalent (post-LN, plain feed-forward)")
  pairs = _pairs(backbone, encoder)
  ours, theirs, offset = _positions(backbone, encoder)
  type_table = _type_table(encoder)
  _copy(pairs, to_backbone=True)
  shared = 0.0 if type_table is None else type_table.numpy()[0]  # every token adds it
  theirs.assign(ours.numpy()[offset:] + shared)


def copy_from_backbone(backbone: keras_hub.models.RobertaBackbone, encoder: keras.Model) -> None:
  """Copies a keras-hub RobertaBackbone's weights into our encoder of the same dimensions."""
  pairs = _pairs(backbone, encoder)
  ours, theirs, offset = _positions(backbone, encoder)
  type_table = _type_table(encoder)
  _copy(pairs, to_backbone=False)
  table = np.zeros(ours.shape, np.float32)
  table[offset:] = theirs.numpy()
  ours.assign(table)
  if type_table is not None:  # keras-hub's positions already hold the whole sum
    type_table.assign(np.zeros(type_table.shape, np.float32))


def _head_pairs(head: MaskedLMHead, masked_lm_head):
  """[(name, our variable, keras-hub variable)] of the MLM heads (the decoder is tied to the
  token embedding in both, so it travels with the backbone)."""
  theirs = lambda path: _weight(masked_lm_head, path)  # noqa: E731
  return [("mlm_head/intermediate_dense/kernel", head.intermediate_dense.kernel,
           theirs("intermediate_dense/kernel")),
          ("mlm_head/intermediate_dense/bias", head.intermediate_dense.bias,
           theirs("intermediate_dense/bias")),
          ("mlm_head/intermediate_layer_norm/gamma", head.intermediate_layer_norm.gamma,
           theirs("intermediate_layer_norm/gamma")),
          ("mlm_head/intermediate_layer_norm/beta", head.intermediate_layer_norm.beta,
           theirs("intermediate_layer_norm/beta")),
          ("mlm_head/output_bias", head.output_bias, theirs("output_bias"))]


def copy_head_to_masked_lm(head: MaskedLMHead,
                           masked_lm: keras_hub.models.RobertaMaskedLM) -> None:
  """Copies our MLM head's weights into a keras-hub RobertaMaskedLM's `mlm_head`."""
  _copy(_head_pairs(head, masked_lm.masked_lm_head), to_backbone=True)


def copy_head_from_masked_lm(masked_lm: keras_hub.models.RobertaMaskedLM,
                             head: MaskedLMHead) -> None:
  """Copies a keras-hub RobertaMaskedLM's `mlm_head` weights into our MLM head."""
  _copy(_head_pairs(head, masked_lm.masked_lm_head), to_backbone=False)
