"""`ModernBertConfig`: the architecture of a ModernBERT encoder, with presets and JSON I/O.

Field meanings follow HF's `ModernBertConfig` (transformers 5.23), renamed where this project
already has a name (num_layers, num_heads, pad_id, bos_id, eos_id, max_seq_len). HF config.json
files in either dialect (legacy `global_rope_theta` / `local_rope_theta` /
`global_attn_every_n_layers`, or 5.x `layer_types` / `rope_parameters`) are read by
`modernbert_hf_config.config_from_hf`. There is no position table: `max_seq_len` only bounds
the inputs (HF's `max_position_embeddings`, which sizes nothing either).
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from roberta_tf.common import atomic_write, files
from roberta_tf.models import flops
from roberta_tf.models.roberta.config import ConfigError

FAMILY = "modernbert"
GLOBAL = "full_attention"  # HF's layer_types values
LOCAL = "sliding_attention"
POOLINGS = ("cls", "mean")


@dataclasses.dataclass(frozen=True)
class ModernBertConfig:
  """ModernBERT architecture. Defaults are ModernBERT-base's (Warner et al. 2024, HF config).

  Attributes:
    vocab_size, hidden_size (H), num_layers, num_heads, intermediate_size: sizes;
      intermediate_size is the GeGLU's gated width I (the input projection is H x 2I).
    max_seq_len: the longest input accepted (nothing is sized by it).
    local_attention: the full window of local layers: a query sees keys at |i - j| <=
      local_attention // 2.
    global_attn_every_n_layers: layer i is global iff i % n == 0 (unless layer_types is set).
    layer_types: None, or an explicit tuple of "full_attention" / "sliding_attention" per layer.
    global_rope_theta, local_rope_theta: the rotary base of global and of local layers.
    norm_eps: every LayerNorm's epsilon; norm_bias: LayerNorms have a beta.
    attention_bias, mlp_bias: biases in Wqkv/Wo and Wi/Wo. decoder_bias: the MLM decoder's
      bias. classifier_bias: a bias in the heads' dense (the MLM head's and the task heads').
    embedding_dropout, attention_dropout (probabilities and after Wo), mlp_dropout (before
      the MLP's Wo), classifier_dropout (task heads): dropout rates.
    pad_id, bos_id, eos_id: [PAD], [CLS] (= HF bos/cls) and [SEP] (= HF eos/sep) ids.
    initializer_range, initializer_cutoff_factor: the truncated-normal init (see
      `init_std`).
    classifier_pooling: "cls" or "mean", the sequence-classification head's pooling.
  """
  # Not a field (not in config.json): the pretrainer keeps the documents of a packed row apart
  # (document_ids: modernbert_encoder.encode_documents), so it trains on document-packed shards.
  separates_documents = True
  vocab_size: int = 50368
  hidden_size: int = 768
  num_layers: int = 22
  num_heads: int = 12
  intermediate_size: int = 1152
  max_seq_len: int = 8192
  local_attention: int = 128
  global_attn_every_n_layers: int = 3
  layer_types: tuple[str, ...] | None = None
  global_rope_theta: float = 160000.0
  local_rope_theta: float = 10000.0
  norm_eps: float = 1e-5
  norm_bias: bool = False
  attention_bias: bool = False
  mlp_bias: bool = False
  decoder_bias: bool = True
  classifier_bias: bool = False
  embedding_dropout: float = 0.0
  attention_dropout: float = 0.0
  mlp_dropout: float = 0.0
  classifier_dropout: float = 0.0
  pad_id: int = 50283
  bos_id: int = 50281
  eos_id: int = 50282
  initializer_range: float = 0.02
  initializer_cutoff_factor: float = 2.0
  classifier_pooling: str = "cls"

  def __post_init__(self):
    for name in ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size",
                 "max_seq_len", "local_attention", "global_attn_every_n_layers"):
      value = getattr(self, name)
      if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"ModernBertConfig.{name} must be a positive int, got {value!r}")
    if self.hidden_size % self.num_heads or (self.hidden_size // self.num_heads) % 2:
      raise ConfigError(f"ModernBertConfig: hidden_size={self.hidden_size} / num_heads="
                        f"{self.num_heads} must be an even head size (rotary halves)")
    if self.layer_types is not None:
      types = tuple(self.layer_types)
      if len(types) != self.num_layers or set(types) - {GLOBAL, LOCAL}:
        raise ConfigError(f"ModernBertConfig.layer_types must list {self.num_layers} of "
                          f"{GLOBAL!r} / {LOCAL!r}, got {list(types)}")
      object.__setattr__(self, "layer_types", types)
    for name in ("norm_bias", "attention_bias", "mlp_bias", "decoder_bias", "classifier_bias"):
      if not isinstance(getattr(self, name), bool):
        raise ConfigError(f"ModernBertConfig.{name} must be true or false, got "
                          f"{getattr(self, name)!r}")
    for name in ("embedding_dropout", "attention_dropout", "mlp_dropout", "classifier_dropout"):
      if not 0.0 <= getattr(self, name) < 1.0:
        raise ConfigError(f"ModernBertConfig.{name} must be in [0, 1), got "
                          f"{getattr(self, name)!r}")
    for name in ("pad_id", "bos_id", "eos_id"):
      if not 0 <= getattr(self, name) < self.vocab_size:
        raise ConfigError(f"ModernBertConfig.{name}={getattr(self, name)} is outside the "
                          f"vocabulary [0, {self.vocab_size})")
    for name in ("global_rope_theta", "local_rope_theta", "initializer_range",
                 "initializer_cutoff_factor", "norm_eps"):
      if not getattr(self, name) > 0:
        raise ConfigError(f"ModernBertConfig.{name} must be > 0, got {getattr(self, name)!r}")
    if self.classifier_pooling not in POOLINGS:
      raise ConfigError(f"ModernBertConfig.classifier_pooling must be one of {POOLINGS}, got "
                        f"{self.classifier_pooling!r}")

  @property
  def family(self) -> str:
    return FAMILY

  @property
  def head_size(self) -> int:
    return self.hidden_size // self.num_heads

  def layer_type(self, index: int) -> str:
    """"full_attention" (global) or "sliding_attention" (local) for layer `index`."""
    if self.layer_types is not None:
      return self.layer_types[index]
    return LOCAL if index % self.global_attn_every_n_layers else GLOBAL

  def is_global(self, index: int) -> bool:
    return self.layer_type(index) == GLOBAL

  def rope_theta(self, index: int) -> float:
    return self.global_rope_theta if self.is_global(index) else self.local_rope_theta

  @property
  def window_radius(self) -> int:
    """A local layer's query i sees keys j with |i - j| <= this (HF's `sliding_window`)."""
    return self.local_attention // 2

  def init_std(self, kind: str) -> float:
    """The truncated normal's std (HF `_init_weights`): "in" (embeddings, Wqkv, Wi), "out"
    (attention and MLP Wo, the heads' dense: initializer_range / sqrt(2 num_layers)) or
    "final_out" (task classifiers: hidden_size ** -0.5)."""
    if kind == "in":
      return self.initializer_range
    if kind == "out":
      return self.initializer_range / math.sqrt(2.0 * self.num_layers)
    if kind == "final_out":
      return self.hidden_size ** -0.5
    raise ValueError(f"unknown init kind {kind!r}")

  def flop_terms(self) -> flops.ModelWork:
    """What the pretrainer multiplies (models/flops.py): per layer the fused Wqkv 3 H x H and
    Wo H x H, the GeGLU's Wi H x 2I and Wo I x H; global layers attend over all keys, local
    ones over `local_attention` // 2 on either side; the MLM head's H x H dense and tied H x V
    decoder per predicted slot. No biases, norms, rotary or the GeGLU product: not matmuls."""
    h, i = self.hidden_size, self.intermediate_size
    projections = 4 * h * h + 2 * i * h + i * h
    layers = tuple(flops.LayerWork(projection_macs=projections, attention_width=h,
                                   window=None if self.is_global(n) else self.local_attention)
                   for n in range(self.num_layers))
    return flops.ModelWork(layers=layers, head_macs=h * h + h * self.vocab_size)

  def replace(self, **overrides) -> ModernBertConfig:
    return ModernBertConfig.from_dict({**self.to_dict(), **overrides})

  def to_dict(self) -> dict[str, Any]:
    values = dataclasses.asdict(self)
    if values["layer_types"] is None:
      del values["layer_types"]
    else:
      values["layer_types"] = list(values["layer_types"])
    return {"family": FAMILY, **values}

  @classmethod
  def from_dict(cls, values: dict[str, Any]) -> ModernBertConfig:
    """A config from a dict (as `to_dict` writes); unknown keys are an error."""
    values = dict(values)
    family = values.pop("family", FAMILY)
    if family != FAMILY:
      raise ConfigError(f"config family {family!r} is not {FAMILY!r}")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
      raise ConfigError(f"unknown ModernBertConfig field(s) {unknown}; known: {sorted(known)}")
    if values.get("layer_types") is not None:
      values["layer_types"] = tuple(values["layer_types"])
    return cls(**values)

  def to_json(self) -> str:
    return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

  @classmethod
  def from_json(cls, text: str) -> ModernBertConfig:
    try:
      values = json.loads(text)
    except json.JSONDecodeError as e:
      raise ConfigError(f"ModernBertConfig JSON is malformed: {e}") from e
    if not isinstance(values, dict):
      raise ConfigError(f"ModernBertConfig JSON must be an object, got {type(values).__name__}")
    return cls.from_dict(values)

  def save(self, path: str) -> None:
    atomic_write.write_text(path, self.to_json())

  @classmethod
  def load(cls, path: str) -> ModernBertConfig:
    try:
      return cls.from_json(files.read_text(path))
    except ConfigError as e:
      raise ConfigError(f"{path}: {e}") from e


# Sizes (layers, H, heads, I). base and large are the paper's; tiny..medium keep its shape
# (head size 64 from small up, I = 1.5 H, a global layer every third).
_PRESETS: dict[str, dict[str, int]] = {
    "tiny": {"num_layers": 3, "hidden_size": 128, "num_heads": 2, "intermediate_size": 192},
    "small": {"num_layers": 6, "hidden_size": 256, "num_heads": 4, "intermediate_size": 384},
    "medium": {"num_layers": 12, "hidden_size": 512, "num_heads": 8, "intermediate_size": 768},
    "base": {"num_layers": 22, "hidden_size": 768, "num_heads": 12, "intermediate_size": 1152},
    "large": {"num_layers": 28, "hidden_size": 1024, "num_heads": 16,
              "intermediate_size": 2624},
}
PRESET_NAMES = tuple(_PRESETS)


def preset(name: str, **overrides) -> ModernBertConfig:
  """The named preset with `overrides`, e.g. `preset("tiny", vocab_size=8000, max_seq_len=512)`.

  Raises:
    ConfigError: unknown preset name or override field.
  """
  if name not in _PRESETS:
    raise ConfigError(f"unknown ModernBERT preset {name!r}; choose one of {list(PRESET_NAMES)}")
  return ModernBertConfig.from_dict({**_PRESETS[name], **overrides})


def count_parameters(config: ModernBertConfig, include_head: bool = True) -> int:
  """The number of weights `ModernBertPretrainer(config)` has (the encoder only if not
  include_head): HF's ModernBertForMaskedLM count, the tied decoder counted once.

  Token table V·H; LayerNorms H each (2H with norm_bias): the embedding norm, per layer
  attn_norm (not layer 0) and mlp_norm, the final norm, the head's norm; per layer Wqkv 3H·H,
  Wo H·H, Wi 2I·H, Wo I·H (+ biases with attention_bias / mlp_bias); the head's dense H·H
  (+ H with classifier_bias) and the decoder bias V (with decoder_bias).
  """
  h, i, layers = config.hidden_size, config.intermediate_size, config.num_layers
  norm = 2 * h if config.norm_bias else h
  attention = 4 * h * h + (4 * h if config.attention_bias else 0)
  mlp = 3 * i * h + (2 * i + h if config.mlp_bias else 0)
  # Layer 0 has no attn_norm; the final norm takes its count's place.
  encoder = config.vocab_size * h + norm + layers * (attention + mlp + 2 * norm)
  head = (h * h + (h if config.classifier_bias else 0) + norm
          + (config.vocab_size if config.decoder_bias else 0))
  return encoder + (head if include_head else 0)
