"""ModernBERT's HF config.json (both dialects) to `ModernBertConfig` and back.

Dialects (modernbert.md 2.1): the Hub's legacy keys `global_attn_every_n_layers`,
`global_rope_theta`, `local_rope_theta`, and 5.x's `layer_types` and `rope_parameters`
({"full_attention": {"rope_theta": ...}, "sliding_attention": {...}}). As HF does, an explicit
`layer_types` wins over the every-n rule, and a `rope_parameters` entry's theta wins over the
legacy key, which wins over the defaults (160k global, 10k local). Writing gives both, as a
5.23 `save_pretrained` does, so 4.x and 5.x transformers read the same model.
"""

from __future__ import annotations

from roberta_tf.models.modernbert.modernbert_config import GLOBAL, LOCAL, ModernBertConfig

MODEL_TYPE = "modernbert"
_DEFAULT_THETA = {GLOBAL: 160000.0, LOCAL: 10000.0}
_LEGACY_THETA = {GLOBAL: "global_rope_theta", LOCAL: "local_rope_theta"}


class HFConfigError(ValueError):
  """An HF config.json that is not a ModernBERT this encoder computes."""


def _rope_theta(hf: dict, kind: str, source: str) -> float:
  params = (hf.get("rope_parameters") or {}).get(kind) or {}
  scaling = {**(hf.get("rope_scaling") or {}), **params}
  rope_type = scaling.get("rope_type", scaling.get("type", "default"))
  if rope_type != "default":
    raise HFConfigError(f"{source}: rope_type {rope_type!r} for {kind} is not supported (only "
                        "'default' rotary, what every released ModernBERT uses)")
  return float(params.get("rope_theta", hf.get(_LEGACY_THETA[kind], _DEFAULT_THETA[kind])))


def config_from_hf(hf: dict, source: str = "config.json") -> ModernBertConfig:
  """A ModernBertConfig from an HF ModernBERT config.json dict (either dialect)."""
  def need(key):
    if key not in hf:
      raise HFConfigError(f"{source}: missing field {key!r}")
    return hf[key]

  if hf.get("model_type") != MODEL_TYPE:
    raise HFConfigError(f"{source}: model_type {hf.get('model_type')!r} is not {MODEL_TYPE!r}")
  for key in ("hidden_activation", "classifier_activation"):
    if hf.get(key, "gelu") != "gelu":
      raise HFConfigError(f"{source}: {key} {hf[key]!r} is not 'gelu' (exact erf GELU, the "
                          "only activation this encoder computes)")
  if not hf.get("tie_word_embeddings", True):
    raise HFConfigError(f"{source}: tie_word_embeddings is false; the MLM decoder here is "
                        "tied to the token embedding")
  layer_types = hf.get("layer_types")
  try:
    return ModernBertConfig(
        vocab_size=need("vocab_size"), hidden_size=need("hidden_size"),
        num_layers=need("num_hidden_layers"), num_heads=need("num_attention_heads"),
        intermediate_size=need("intermediate_size"),
        max_seq_len=hf.get("max_position_embeddings", 8192),
        local_attention=hf.get("local_attention", 128),
        global_attn_every_n_layers=hf.get("global_attn_every_n_layers", 3),
        layer_types=tuple(layer_types) if layer_types is not None else None,
        global_rope_theta=_rope_theta(hf, GLOBAL, source),
        local_rope_theta=_rope_theta(hf, LOCAL, source),
        norm_eps=float(hf.get("norm_eps", 1e-5)), norm_bias=hf.get("norm_bias", False),
        attention_bias=hf.get("attention_bias", False), mlp_bias=hf.get("mlp_bias", False),
        decoder_bias=hf.get("decoder_bias", True),
        classifier_bias=hf.get("classifier_bias", False),
        embedding_dropout=float(hf.get("embedding_dropout", 0.0)),
        attention_dropout=float(hf.get("attention_dropout", 0.0)),
        mlp_dropout=float(hf.get("mlp_dropout", 0.0)),
        classifier_dropout=float(hf.get("classifier_dropout") or 0.0),
        pad_id=hf.get("pad_token_id", 50283),
        bos_id=hf.get("cls_token_id", hf.get("bos_token_id", 50281)),
        eos_id=hf.get("sep_token_id", hf.get("eos_token_id", 50282)),
        initializer_range=float(hf.get("initializer_range", 0.02)),
        # HF: 2.0 by default, 3.0 when set to null.
        initializer_cutoff_factor=float(hf.get("initializer_cutoff_factor", 2.0) or 3.0),
        classifier_pooling=hf.get("classifier_pooling", "cls"))
  except ValueError as e:  # ConfigError
    raise HFConfigError(f"{source}: {e}") from e


def config_to_hf(config: ModernBertConfig, architecture: str = "ModernBertForMaskedLM") -> dict:
  """The HF config.json dict, in both dialects (5.x keys and the legacy ones)."""
  types = [config.layer_type(i) for i in range(config.num_layers)]
  hf = {
      "architectures": [architecture],
      "model_type": MODEL_TYPE,
      "dtype": "float32",
      "vocab_size": config.vocab_size,
      "hidden_size": config.hidden_size,
      "intermediate_size": config.intermediate_size,
      "num_hidden_layers": config.num_layers,
      "num_attention_heads": config.num_heads,
      "hidden_activation": "gelu",
      "max_position_embeddings": config.max_seq_len,
      "initializer_range": config.initializer_range,
      "initializer_cutoff_factor": config.initializer_cutoff_factor,
      "norm_eps": config.norm_eps,
      "norm_bias": config.norm_bias,
      "pad_token_id": config.pad_id,
      "bos_token_id": config.bos_id, "cls_token_id": config.bos_id,
      "eos_token_id": config.eos_id, "sep_token_id": config.eos_id,
      "attention_bias": config.attention_bias,
      "attention_dropout": config.attention_dropout,
      "layer_types": types,
      "rope_parameters": {
          GLOBAL: {"rope_type": "default", "rope_theta": config.global_rope_theta},
          LOCAL: {"rope_type": "default", "rope_theta": config.local_rope_theta}},
      "local_attention": config.local_attention,
      "embedding_dropout": config.embedding_dropout,
      "mlp_bias": config.mlp_bias,
      "mlp_dropout": config.mlp_dropout,
      "decoder_bias": config.decoder_bias,
      "classifier_pooling": config.classifier_pooling,
      "classifier_dropout": config.classifier_dropout,
      "classifier_bias": config.classifier_bias,
      "classifier_activation": "gelu",
      "tie_word_embeddings": True,
      "global_rope_theta": config.global_rope_theta,
      "local_rope_theta": config.local_rope_theta,
  }
  if config.layer_types is None:
    hf["global_attn_every_n_layers"] = config.global_attn_every_n_layers
  return hf
