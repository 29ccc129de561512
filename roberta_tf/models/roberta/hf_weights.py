"""Hugging Face `RobertaForMaskedLM` checkpoints (config.json + model.safetensors) in and out.

Read and written with the `safetensors` numpy API: no torch, no pickle; an HF dir may be a URL
(a URL's safetensors file is read from a local copy, and written locally then uploaded whole).
The mapping:

| HF key (layer i)                                | ours                                          |
|-------------------------------------------------|-----------------------------------------------|
| roberta.embeddings.word_embeddings.weight [V,H] | embeddings/token_embedding (also the decoder) |
| roberta.embeddings.position_embeddings.weight   | embeddings/position_embedding (+ type row 0)  |
| roberta.embeddings.token_type_embeddings [1,H]  | embeddings/token_type_embedding [1,H]; see * |
| roberta.embeddings.LayerNorm.{weight,bias}      | embeddings/layer_norm.{gamma,beta}            |
| ...layer.i.attention.self.{query,key,value}     | transformer_layer_i/{query,key,value}         |
| ...layer.i.attention.output.dense               | transformer_layer_i/attention_output          |
| ...layer.i.attention.output.LayerNorm           | transformer_layer_i/attention_layer_norm      |
| ...layer.i.intermediate.dense                   | transformer_layer_i/intermediate_dense        |
| ...layer.i.output.dense                         | transformer_layer_i/output_dense              |
| ...layer.i.output.LayerNorm                     | transformer_layer_i/output_layer_norm         |
| lm_head.dense, lm_head.layer_norm               | mlm_head/intermediate_dense, .../layer_norm   |
| lm_head.bias [V]                                | mlm_head/output_bias                          |

Pre-LN models (pre_layer_norm) are HF's `RobertaPreLayerNormForMaskedLM` (model_type
"roberta-prelayernorm", keys under `roberta_prelayernorm.`): the LayerNorm before attention is
`attention.LayerNorm` (ours: attention_layer_norm), the one before the feed-forward
`intermediate.LayerNorm` (ours: output_layer_norm), and `roberta_prelayernorm.LayerNorm` the
final one (ours: final_layer_norm). A model without linear biases (use_bias=False) is written
with zero biases, which HF computes identically. A gated feed-forward (gated_ffn) has no HF
class and is refused (`check_exportable`), as are the NSP ablation's segments and head.

HF Linear weights are [out, in]; Keras Dense kernels are [in, out] (transposed on the way).
* The token-type row: a model with type_vocab_size=1 (the default, and what an HF import
builds) holds HF's row 0 as its own [1, H] table, both ways. A fairseq-shaped model
(type_vocab_size=0) has no table: on import the row is added to every position row (RoBERTa
always feeds token type 0 and every token adds exactly one position row, so the sum is the
same), and on export the row is written as zeros; either way a re-import gives back identical
weights and the same logits. Keys that the MLM
model does not use are skipped on import: `roberta.pooler.*` (RobertaModel's pooler, untrained
by MLM), `roberta.embeddings.position_ids` (an old buffer), `lm_head.decoder.weight` (must equal
the word embeddings: the decoder is tied) and `lm_head.decoder.bias` (an alias of lm_head.bias).
"""

from __future__ import annotations

import json

import numpy as np
from safetensors.numpy import load_file, save_file

from roberta_tf.common import atomic_write, error_text, files
from roberta_tf.models.roberta.config import RobertaConfig
from roberta_tf.models.roberta.encoder import EMBEDDINGS_NAME, FINAL_LAYER_NORM_NAME, layer_name
from roberta_tf.models.roberta.pretrainer import RobertaPretrainer

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX_FILE = "model.safetensors.index.json"
TOKEN_TYPE_KEY = "roberta.embeddings.token_type_embeddings.weight"
POSITION_KEY = "roberta.embeddings.position_embeddings.weight"
WORD_KEY = "roberta.embeddings.word_embeddings.weight"
_IGNORED_PREFIXES = ("roberta.pooler.",)
_IGNORED_KEYS = ("roberta.embeddings.position_ids",)
PRE_LN_TYPE = "roberta-prelayernorm"  # HF's RobertaPreLayerNorm* (pre_layer_norm=True)
MODEL_TYPES = ("roberta", PRE_LN_TYPE)


class HFCheckpointError(ValueError):
  """A Hugging Face checkpoint is missing files or keys, or has keys/shapes we cannot map."""


def config_from_hf(hf: dict, source: str = CONFIG_FILE) -> RobertaConfig:
  """A RobertaConfig from an HF RoBERTa config.json dict; refuses variants we do not compute."""
  def need(key):
    if key not in hf:
      raise HFCheckpointError(f"{source}: missing field {key!r}")
    return hf[key]

  model_type = hf.get("model_type", "roberta")
  if model_type not in MODEL_TYPES:
    raise HFCheckpointError(f"{source}: model_type {model_type!r} is not 'roberta' or "
                            "'roberta-prelayernorm'")
  if hf.get("hidden_act", "gelu") != "gelu":
    raise HFCheckpointError(f"{source}: hidden_act {hf['hidden_act']!r} is not 'gelu' (exact "
                            "erf GELU, the only activation this encoder computes)")
  if hf.get("position_embedding_type", "absolute") != "absolute":
    raise HFCheckpointError(f"{source}: position_embedding_type "
                            f"{hf['position_embedding_type']!r} is not 'absolute'")
  if hf.get("is_decoder", False):
    raise HFCheckpointError(f"{source}: is_decoder is true; only the bidirectional encoder is "
                            "supported")
  return RobertaConfig(
      vocab_size=need("vocab_size"), hidden_size=need("hidden_size"),
      num_layers=need("num_hidden_layers"), num_heads=need("num_attention_heads"),
      intermediate_size=need("intermediate_size"),
      max_positions=need("max_position_embeddings"),
      dropout=hf.get("hidden_dropout_prob", 0.1),
      attention_dropout=hf.get("attention_probs_dropout_prob", 0.1),
      layer_norm_eps=hf.get("layer_norm_eps", 1e-5), pad_id=hf.get("pad_token_id", 1),
      bos_id=hf.get("bos_token_id", 0), eos_id=hf.get("eos_token_id", 2),
      initializer_range=hf.get("initializer_range", 0.02),
      # RoBERTa feeds only token type 0: one row is all an MLM model uses (load_hf keeps row 0).
      type_vocab_size=1 if hf.get("type_vocab_size", 1) else 0,
      pre_layer_norm=model_type == PRE_LN_TYPE)


def config_to_hf(config: RobertaConfig) -> dict:
  """The HF config.json dict (the fields `save_pretrained` writes for RobertaForMaskedLM, or
  RobertaPreLayerNormForMaskedLM for a pre-LN model)."""
  pre = config.pre_layer_norm
  return {
      "add_cross_attention": False,
      "architectures": ["RobertaPreLayerNormForMaskedLM" if pre else "RobertaForMaskedLM"],
      "attention_probs_dropout_prob": config.attention_dropout,
      "bos_token_id": config.bos_id,
      "classifier_dropout": None,
      "dtype": "float32",
      "eos_token_id": config.eos_id,
      "hidden_act": "gelu",
      "hidden_dropout_prob": config.dropout,
      "hidden_size": config.hidden_size,
      "initializer_range": config.initializer_range,
      "intermediate_size": config.intermediate_size,
      "is_decoder": False,
      "layer_norm_eps": config.layer_norm_eps,
      "max_position_embeddings": config.max_positions,
      "model_type": PRE_LN_TYPE if pre else "roberta",
      "num_attention_heads": config.num_heads,
      "num_hidden_layers": config.num_layers,
      "pad_token_id": config.pad_id,
      "tie_word_embeddings": True,
      "type_vocab_size": 1,
      "use_cache": True,
      "vocab_size": config.vocab_size,
  }


def check_exportable(config: RobertaConfig) -> None:
  """Raises HFCheckpointError naming the option no HF RoBERTa class can load."""
  if config.type_vocab_size > 1 or config.next_sentence_head:
    raise HFCheckpointError("this model has segment token types / an NSP head (the "
                            "input-format ablation's); RobertaForMaskedLM has neither, so it is "
                            "not exported")
  if config.gated_ffn:
    raise HFCheckpointError("gated_ffn (--model_option=gated_ffn=true, a GEGLU feed-forward): "
                            "no Hugging Face RoBERTa class has a gated feed-forward, so it is "
                            "not exported; serve the SavedModel (roberta_tf.export) instead")


def _prefix(config: RobertaConfig) -> str:
  return "roberta_prelayernorm" if config.pre_layer_norm else "roberta"


def _weight_map(pretrainer: RobertaPretrainer):
  """[(hf_key, variable, transpose)] for every tensor of the HF checkpoint, in a fixed order,
  keys under "roberta." (a pre-LN model's are "roberta_prelayernorm.": `_renamed`); a bias the
  model does not have (use_bias=False) is ("zeros", units): written as zeros."""
  config = pretrainer.config
  check_exportable(config)
  embeddings = pretrainer.encoder.get_layer(EMBEDDINGS_NAME)
  entries = [
      (WORD_KEY, embeddings.token_embedding.embeddings, False),
      (POSITION_KEY, embeddings.position_embedding.embeddings, False),
      ("roberta.embeddings.LayerNorm.weight", embeddings.layer_norm.gamma, False),
      ("roberta.embeddings.LayerNorm.bias", embeddings.layer_norm.beta, False),
  ]
  if embeddings.token_type_embedding is not None:
    entries.append((TOKEN_TYPE_KEY, embeddings.token_type_embedding.embeddings, False))

  def dense(hf_prefix, layer):
    return [(f"{hf_prefix}.weight", layer.kernel, True),
            (f"{hf_prefix}.bias", layer.bias if layer.use_bias else ("zeros", layer.units),
             False)]

  def norm(hf_prefix, layer):
    return [(f"{hf_prefix}.weight", layer.gamma, False), (f"{hf_prefix}.bias", layer.beta, False)]

  # Pre-LN (roberta-prelayernorm): the LayerNorm before attention is attention.LayerNorm, the
  # one before the feed-forward intermediate.LayerNorm, plus the model's final LayerNorm.
  pre = config.pre_layer_norm
  attention_norm = "attention.LayerNorm" if pre else "attention.output.LayerNorm"
  ffn_norm = "intermediate.LayerNorm" if pre else "output.LayerNorm"
  for i in range(config.num_layers):
    layer = pretrainer.encoder.get_layer(layer_name(i))
    hf = f"roberta.encoder.layer.{i}"
    entries += dense(f"{hf}.attention.self.query", layer.query)
    entries += dense(f"{hf}.attention.self.key", layer.key)
    entries += dense(f"{hf}.attention.self.value", layer.value)
    entries += dense(f"{hf}.attention.output.dense", layer.attention_output)
    entries += norm(f"{hf}.{attention_norm}", layer.attention_layer_norm)
    entries += dense(f"{hf}.intermediate.dense", layer.intermediate_dense)
    entries += dense(f"{hf}.output.dense", layer.output_dense)
    entries += norm(f"{hf}.{ffn_norm}", layer.output_layer_norm)
  if pre:
    entries += norm("roberta.LayerNorm", pretrainer.encoder.get_layer(FINAL_LAYER_NORM_NAME))
  head = pretrainer.mlm_head
  entries += dense("lm_head.dense", head.intermediate_dense)
  entries += norm("lm_head.layer_norm", head.intermediate_layer_norm)
  entries.append(("lm_head.bias", head.output_bias, False))
  return entries


def to_hf_tensors(pretrainer: RobertaPretrainer) -> dict[str, np.ndarray]:
  """The HF state dict (float32 numpy, HF key names and layouts) of `pretrainer`."""
  tensors = {}
  for key, variable, transpose in _weight_map(pretrainer):
    if isinstance(variable, tuple):  # a bias this model does not have: zeros, the same sum
      tensors[key] = np.zeros((variable[1],), np.float32)
      continue
    value = np.asarray(variable.numpy(), np.float32)
    tensors[key] = np.ascontiguousarray(value.T if transpose else value)
  if TOKEN_TYPE_KEY not in tensors:  # fairseq-shaped: the sum is already in the positions
    tensors[TOKEN_TYPE_KEY] = np.zeros((1, pretrainer.config.hidden_size), np.float32)
  return _renamed(tensors, "roberta.", _prefix(pretrainer.config) + ".")


def _renamed(tensors: dict, old: str, new: str) -> dict:
  if old == new:
    return tensors
  return {(new + k[len(old):] if k.startswith(old) else k): v for k, v in tensors.items()}


def _drop_unused(tensors: dict[str, np.ndarray], source: str) -> dict[str, np.ndarray]:
  """Removes (after checking) the keys the MLM model does not hold; see the module docstring."""
  tensors = {k: v for k, v in tensors.items()
             if k not in _IGNORED_KEYS and not k.startswith(_IGNORED_PREFIXES)}
  decoder = tensors.pop("lm_head.decoder.weight", None)
  if decoder is not None and WORD_KEY in tensors and not np.array_equal(decoder,
                                                                        tensors[WORD_KEY]):
    raise HFCheckpointError(f"{source}: lm_head.decoder.weight differs from {WORD_KEY}; this "
                            "model ties the decoder to the token embedding")
  decoder_bias = tensors.pop("lm_head.decoder.bias", None)
  if decoder_bias is not None:
    if "lm_head.bias" not in tensors:
      tensors["lm_head.bias"] = decoder_bias
    elif not np.array_equal(decoder_bias, tensors["lm_head.bias"]):
      raise HFCheckpointError(f"{source}: lm_head.decoder.bias differs from lm_head.bias")
  return tensors


def set_from_hf_tensors(pretrainer: RobertaPretrainer, tensors: dict[str, np.ndarray],
                        source: str = "HF checkpoint") -> None:
  """Assigns an HF state dict to `pretrainer`; every key must be present and every shape fit.

  Raises:
    HFCheckpointError: naming the missing or unexpected key, or the key and both shapes.
  """
  tensors = _drop_unused(_renamed(dict(tensors), "roberta_prelayernorm.", "roberta."), source)
  hidden = pretrainer.config.hidden_size
  token_type = tensors.pop(TOKEN_TYPE_KEY, None)
  if token_type is not None and (token_type.ndim != 2 or token_type.shape[1] != hidden
                                 or not token_type.shape[0]):
    raise HFCheckpointError(f"{source}: {TOKEN_TYPE_KEY} has shape {token_type.shape}, "
                            f"expected [type_vocab_size, {hidden}]")
  entries = _weight_map(pretrainer)
  has_table = any(key == TOKEN_TYPE_KEY for key, _, _ in entries)
  if has_table:  # ours holds row 0 itself (the only type RoBERTa feeds); none in HF: zeros
    tensors[TOKEN_TYPE_KEY] = (token_type[:1] if token_type is not None
                               else np.zeros((1, hidden), np.float32))
    token_type = None
  for key, _, _ in entries:
    if key not in tensors:
      raise HFCheckpointError(f"{source}: missing key {key!r} (a RobertaForMaskedLM checkpoint "
                              f"for {pretrainer.config} is expected)")
  unexpected = sorted(set(tensors) - {key for key, _, _ in entries})
  if unexpected:
    raise HFCheckpointError(f"{source}: unexpected key {unexpected[0]!r}"
                            + (f" (and {len(unexpected) - 1} more)" if len(unexpected) > 1 else ""))
  assignments = []
  for key, variable, transpose in entries:
    value = np.asarray(tensors[key])
    if isinstance(variable, tuple):  # a bias the model (use_bias=False) does not have
      if value.shape != (variable[1],) or np.any(value):
        raise HFCheckpointError(f"{source}: key {key!r} is a non-zero bias, but the model has "
                                "no biases (use_bias=false)")
      continue
    if value.dtype not in (np.float32, np.float16, np.float64):
      raise HFCheckpointError(f"{source}: key {key!r} has dtype {value.dtype}; float32 or "
                              "float16 expected")
    value = value.astype(np.float32)
    if transpose:
      value = value.T
    if key == POSITION_KEY and token_type is not None:
      # Every token adds token_type row 0 (RoBERTa has one segment) and exactly one position
      # row, so adding the former to each of the latter is the same sum.
      value = value + token_type[0].astype(np.float32)
    expected = tuple(variable.shape)
    if value.shape != expected:
      hf_expected = expected[::-1] if transpose else expected
      raise HFCheckpointError(f"{source}: key {key!r} has shape {tuple(tensors[key].shape)}, "
                              f"the model expects {hf_expected}")
    assignments.append((variable, value))
  for variable, value in assignments:  # Only once everything checked: no half-loaded model.
    variable.assign(value)


def read_hf_dir(hf_dir: str) -> tuple[dict, dict[str, np.ndarray]]:
  """(config.json dict, tensors) of an HF model directory (single or sharded safetensors)."""
  config_path = files.join(hf_dir, CONFIG_FILE)
  if not files.isfile(config_path):
    raise HFCheckpointError(f"{config_path} not found: is {hf_dir!r} a Hugging Face model dir?")
  try:
    hf_config = files.read_json(config_path)
  except (OSError, json.JSONDecodeError) as e:
    raise HFCheckpointError(f"{config_path} is not valid JSON: {e}") from e
  except Exception as e:  # a TF file system's error on a URL
    if not error_text.is_tf_error(e):
      raise
    raise HFCheckpointError(f"cannot read {config_path}: {error_text.one_line(e)}") from e
  weights_path = files.join(hf_dir, WEIGHTS_FILE)
  index_path = files.join(hf_dir, WEIGHTS_INDEX_FILE)
  if files.isfile(weights_path):
    shards = [weights_path]
  elif files.isfile(index_path):
    try:
      shards = [files.join(hf_dir, name)
                for name in sorted(set(files.read_json(index_path)["weight_map"].values()))]
    except (OSError, json.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
      raise HFCheckpointError(f"{index_path} is not a safetensors index (a JSON object with a "
                              f"'weight_map'): {e!r}") from e
  else:
    raise HFCheckpointError(f"{weights_path} not found (only safetensors checkpoints are read; "
                            "convert pytorch_model.bin with transformers first)")
  tensors = {}
  for path in shards:
    try:
      # safetensors memory-maps a local file; a URL's is copied to a local temporary first.
      with files.local_copy(path) as local:
        tensors.update(load_file(local))
    except Exception as e:  # safetensors raises its own error types
      raise HFCheckpointError(f"cannot read {path}: {e}") from e
  return hf_config, tensors


def save_hf(hf_dir: str, pretrainer: RobertaPretrainer) -> None:
  """Writes config.json + model.safetensors that transformers' RobertaForMaskedLM loads.

  Files are written under temporary names and renamed when complete (on a URL: written
  locally, then uploaded whole; atomic_write).
  """
  _weight_map(pretrainer)  # refuses what has no HF equivalent before anything is written
  files.makedirs(hf_dir)
  weights_path = files.join(hf_dir, WEIGHTS_FILE)
  config_path = files.join(hf_dir, CONFIG_FILE)
  # transformers refuses safetensors files without format metadata.
  with atomic_write.atomic_path(weights_path, umask_mode=True) as tmp:
    save_file(to_hf_tensors(pretrainer), tmp, metadata={"format": "pt"})
  atomic_write.write_json(config_path, config_to_hf(pretrainer.config))
