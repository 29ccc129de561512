"""Hugging Face `ModernBertForMaskedLM` checkpoints (config.json + model.safetensors) in and out.

Read and written with the safetensors numpy API (no torch), through hf_weights' directory
reader. The mapping (layer i; HF Linear weights are [out, in], Keras kernels [in, out]:
transposed on the way; a `.bias` exists only with the matching *_bias flag):

| HF key                                    | ours                                          |
|-------------------------------------------|-----------------------------------------------|
| model.embeddings.tok_embeddings.weight    | embeddings/token_embedding (also the decoder) |
| model.embeddings.norm.{weight,bias}       | embeddings/norm.{gamma,beta}                  |
| model.layers.i.attn_norm (i >= 1)         | modernbert_layer_i/attn_norm                  |
| model.layers.i.attn.Wqkv, attn.Wo         | modernbert_layer_i/attn_wqkv, attn_wo         |
| model.layers.i.mlp_norm                   | modernbert_layer_i/mlp_norm                   |
| model.layers.i.mlp.Wi, mlp.Wo             | modernbert_layer_i/mlp_wi, mlp_wo             |
| model.final_norm                          | final_norm                                    |
| head.dense, head.norm                     | mlm_head/head/dense, mlm_head/head/norm       |
| decoder.bias                              | mlm_head/decoder_bias                         |

`decoder.weight` is tied (not in HF's file; if present it must equal the token embedding). A
bare ModernBertModel file (keys without "model.") is read too, as an encoder without a head.
"""

from __future__ import annotations

import numpy as np
from safetensors.numpy import save_file

from roberta_tf.common import atomic_write, files
from roberta_tf.models.modernbert.modernbert_encoder import (
  EMBEDDINGS_NAME,
  FINAL_NORM_NAME,
  layer_name,
)
from roberta_tf.models.modernbert.modernbert_hf_config import config_to_hf
from roberta_tf.models.modernbert.modernbert_pretrainer import ModernBertPretrainer
from roberta_tf.models.roberta import hf_weights
from roberta_tf.models.roberta.hf_weights import HFCheckpointError

WORD_KEY = "model.embeddings.tok_embeddings.weight"
DECODER_KEY = "decoder.weight"


def _dense(hf_prefix, layer):
  entries = [(f"{hf_prefix}.weight", layer.kernel, True)]
  if layer.use_bias:
    entries.append((f"{hf_prefix}.bias", layer.bias, False))
  return entries


def _norm(hf_prefix, layer):
  entries = [(f"{hf_prefix}.weight", layer.gamma, False)]
  if layer.center:
    entries.append((f"{hf_prefix}.bias", layer.beta, False))
  return entries


def encoder_weight_map(encoder, num_layers: int, prefix: str = "model."):
  """[(hf_key, variable, transpose)] of a ModernBertModel's tensors, keys under `prefix`."""
  embeddings = encoder.get_layer(EMBEDDINGS_NAME)
  entries = [(f"{prefix}embeddings.tok_embeddings.weight",
              embeddings.token_embedding.embeddings, False)]
  entries += _norm(f"{prefix}embeddings.norm", embeddings.norm)
  for i in range(num_layers):
    layer, hf = encoder.get_layer(layer_name(i)), f"{prefix}layers.{i}"
    if layer.attn_norm is not None:
      entries += _norm(f"{hf}.attn_norm", layer.attn_norm)
    entries += _dense(f"{hf}.attn.Wqkv", layer.attn_wqkv)
    entries += _dense(f"{hf}.attn.Wo", layer.attn_wo)
    entries += _norm(f"{hf}.mlp_norm", layer.mlp_norm)
    entries += _dense(f"{hf}.mlp.Wi", layer.mlp_wi)
    entries += _dense(f"{hf}.mlp.Wo", layer.mlp_wo)
  entries += _norm(f"{prefix}final_norm", encoder.get_layer(FINAL_NORM_NAME))
  return entries


def head_weight_map(head, prefix: str = "head."):
  """[(hf_key, variable, transpose)] of a PredictionHead (dense, norm)."""
  return _dense(f"{prefix}dense", head.dense) + _norm(f"{prefix}norm", head.norm)


def _weight_map(pretrainer: ModernBertPretrainer):
  entries = encoder_weight_map(pretrainer.encoder, pretrainer.config.num_layers)
  entries += head_weight_map(pretrainer.mlm_head.head)
  if pretrainer.mlm_head.decoder_bias is not None:
    entries.append(("decoder.bias", pretrainer.mlm_head.decoder_bias, False))
  return entries


def tensors_of(entries) -> dict[str, np.ndarray]:
  """{hf_key: float32 numpy in HF's layout} of a weight map."""
  tensors = {}
  for key, variable, transpose in entries:
    value = np.asarray(variable.numpy(), np.float32)
    tensors[key] = np.ascontiguousarray(value.T if transpose else value)
  return tensors


def to_hf_tensors(pretrainer: ModernBertPretrainer) -> dict[str, np.ndarray]:
  """The HF ModernBertForMaskedLM state dict (without the tied decoder.weight)."""
  return tensors_of(_weight_map(pretrainer))


def assign(entries, tensors: dict[str, np.ndarray], source: str, what: str) -> None:
  """Assigns `tensors` to a weight map's variables; every key must be present, none left over
  and every shape fit, checked before anything is assigned (no half-loaded model)."""
  missing = [key for key, _, _ in entries if key not in tensors]
  if missing:
    raise HFCheckpointError(f"{source}: missing key {missing[0]!r} (a {what} checkpoint is "
                            "expected)")
  unexpected = sorted(set(tensors) - {key for key, _, _ in entries})
  if unexpected:
    raise HFCheckpointError(f"{source}: unexpected key {unexpected[0]!r}"
                            + (f" (and {len(unexpected) - 1} more)" if len(unexpected) > 1 else ""))
  assignments = []
  for key, variable, transpose in entries:
    value = np.asarray(tensors[key])
    if value.dtype not in (np.float32, np.float16, np.float64):
      raise HFCheckpointError(f"{source}: key {key!r} has dtype {value.dtype}; float32 or "
                              "float16 expected")
    value = value.astype(np.float32)
    value = value.T if transpose else value
    if value.shape != tuple(variable.shape):
      expected = tuple(variable.shape)[::-1] if transpose else tuple(variable.shape)
      raise HFCheckpointError(f"{source}: key {key!r} has shape {tuple(tensors[key].shape)}, "
                              f"the model expects {expected}")
    assignments.append((variable, value))
  for variable, value in assignments:
    variable.assign(value)


def with_model_prefix(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
  """A bare ModernBertModel's keys ("embeddings.", "layers.", "final_norm.") under "model."."""
  bare = ("embeddings.", "layers.", "final_norm.")
  return {("model." + k if k.startswith(bare) else k): v for k, v in tensors.items()}


def set_from_hf_tensors(pretrainer: ModernBertPretrainer, tensors: dict[str, np.ndarray],
                        source: str = "HF checkpoint") -> None:
  """Assigns an HF ModernBertForMaskedLM state dict to `pretrainer`.

  Raises:
    HFCheckpointError: naming the missing or unexpected key, or the key and both shapes.
  """
  tensors = with_model_prefix(dict(tensors))
  decoder = tensors.pop(DECODER_KEY, None)
  if decoder is not None and WORD_KEY in tensors and not np.array_equal(decoder,
                                                                        tensors[WORD_KEY]):
    raise HFCheckpointError(f"{source}: {DECODER_KEY} differs from {WORD_KEY}; this model "
                            "ties the decoder to the token embedding")
  assign(_weight_map(pretrainer), tensors, source, "ModernBertForMaskedLM")


def write_hf_dir(hf_dir: str, tensors: dict[str, np.ndarray], hf_config: dict) -> None:
  """config.json + model.safetensors, each written under a temporary name and renamed."""
  files.makedirs(hf_dir)
  # transformers refuses safetensors files without format metadata.
  with atomic_write.atomic_path(files.join(hf_dir, hf_weights.WEIGHTS_FILE),
                                umask_mode=True) as tmp:
    save_file(tensors, tmp, metadata={"format": "pt"})
  atomic_write.write_json(files.join(hf_dir, hf_weights.CONFIG_FILE), hf_config)


def save_hf(hf_dir: str, pretrainer: ModernBertPretrainer) -> None:
  """Writes a folder that transformers' AutoModelForMaskedLM loads as ModernBertForMaskedLM."""
  write_hf_dir(hf_dir, to_hf_tensors(pretrainer), config_to_hf(pretrainer.config))
