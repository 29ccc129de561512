"""`RobertaConfig`: the architecture hyperparameters of a RoBERTa model, with presets and JSON I/O.

The resolved config is written as `config.json` into every model directory; the binaries rebuild
the model from it, so it holds only what fixes the weights' shapes and the forward computation.
Precision (float32 / mixed) is a run-time choice and is passed to the builders, not stored here.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from roberta_tf.common import atomic_write, error_text, files
from roberta_tf.models import flops


class ConfigError(ValueError):
  """A config is malformed: unknown preset or field, or inconsistent values."""


@dataclasses.dataclass(frozen=True)
class RobertaConfig:
  """RoBERTa architecture. Defaults are roberta-base's (Liu et al. 2019, Table 9 / HF config).

  Attributes:
    vocab_size: rows of the (tied) token embedding; 50265 for the GPT-2-derived RoBERTa vocab.
    hidden_size: H, the width of every token vector.
    num_layers: L, the number of Transformer layers.
    num_heads: A, attention heads; must divide hidden_size.
    intermediate_size: F, the feed-forward inner width (4H in every preset).
    max_positions: rows of the position table = max_seq_len + 2, because RoBERTa's position ids
      start at pad_id + 1 = 2 (rows 0 and 1 are never used by real tokens; pads read row pad_id).
    dropout: dropout on embeddings, attention output and feed-forward output.
    attention_dropout: dropout on the attention probabilities.
    layer_norm_eps: LayerNorm epsilon (1e-5 in fairseq/HF RoBERTa, not BERT's 1e-12).
    pad_id, bos_id, eos_id: special ids in the RoBERTa layout (<s>=0, <pad>=1, </s>=2).
    initializer_range: stddev of the normal N(0, initializer_range) initializer of kernels and
      embeddings (BERT/fairseq/HF's; models/initializers.py).
    type_vocab_size: rows of the token-type (segment) embedding. 1 (HF's RobertaModel, the
      default): one learned vector added to every token, no token_type_ids input. 0:
      fairseq's exact shape, no such vector. 2: BERT's segments for the NSP input-format
      ablation, with a token_type_ids input (training sets it from shards of a pair packing,
      data_prep/pair_packing.py). A config dict or config.json without the field means 0:
      every writer before the default became 1 omitted it exactly when it was 0.
    next_sentence_head: the pretrainer carries BERT's NSP head (pooler + 2-way classifier on
      `<s>`); set together with type_vocab_size for the pair packings.
    pre_layer_norm: LayerNorm before attention and feed-forward, plus one after the last layer
      (HF's roberta-prelayernorm) instead of RoBERTa's post-LN (a budget-recipe option).
    use_bias: biases in every Dense of the Transformer layers (False: Cramming's "no linear
      biases"; the LayerNorms and the MLM head keep theirs).
    gated_ffn: GEGLU feed-forward, gelu(x W_gate) * (x W_in), with an extra H x F gate kernel.
  """
  vocab_size: int = 50265
  hidden_size: int = 768
  num_layers: int = 12
  num_heads: int = 12
  intermediate_size: int = 3072
  max_positions: int = 514
  dropout: float = 0.1
  attention_dropout: float = 0.1
  layer_norm_eps: float = 1e-5
  pad_id: int = 1
  bos_id: int = 0
  eos_id: int = 2
  initializer_range: float = 0.02
  type_vocab_size: int = 1
  next_sentence_head: bool = False
  pre_layer_norm: bool = False
  use_bias: bool = True
  gated_ffn: bool = False

  def __post_init__(self):
    for name in ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size"):
      value = getattr(self, name)
      if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"RobertaConfig.{name} must be a positive int, got {value!r}")
    if self.hidden_size % self.num_heads:
      raise ConfigError(f"RobertaConfig.hidden_size={self.hidden_size} is not divisible by "
                        f"num_heads={self.num_heads}")
    if self.max_positions < self.pad_id + 2:
      raise ConfigError(f"RobertaConfig.max_positions={self.max_positions} leaves no room for a "
                        f"token: positions start at pad_id + 1 = {self.pad_id + 1}")
    if (not isinstance(self.type_vocab_size, int) or isinstance(self.type_vocab_size, bool)
        or self.type_vocab_size < 0):
      raise ConfigError(f"RobertaConfig.type_vocab_size must be an int >= 0, got "
                        f"{self.type_vocab_size!r}")
    for name in ("next_sentence_head", "pre_layer_norm", "use_bias", "gated_ffn"):
      if not isinstance(getattr(self, name), bool):
        raise ConfigError(f"RobertaConfig.{name} must be true or false, got "
                          f"{getattr(self, name)!r}")
    for name in ("dropout", "attention_dropout"):
      if not 0.0 <= getattr(self, name) < 1.0:
        raise ConfigError(f"RobertaConfig.{name} must be in [0, 1), got {getattr(self, name)!r}")
    for name in ("pad_id", "bos_id", "eos_id"):
      if not 0 <= getattr(self, name) < self.vocab_size:
        raise ConfigError(f"RobertaConfig.{name}={getattr(self, name)} is outside the vocabulary "
                          f"[0, {self.vocab_size})")

  @property
  def family(self) -> str:
    """models/registry.py's name of this family (config.json omits it: absent = roberta)."""
    return "roberta"

  @property
  def max_seq_len(self) -> int:
    """The longest input (in tokens, <s> and </s> included) the position table can hold."""
    return self.max_positions - self.pad_id - 1

  @property
  def head_size(self) -> int:
    return self.hidden_size // self.num_heads

  def flop_terms(self) -> flops.ModelWork:
    """What the pretrainer multiplies (models/flops.py): per layer Q, K, V and output (4 H x H),
    the feed-forward's H x F in (twice with gated_ffn: its gate) and F x H out, global
    attention over heads x head size = H; the MLM head's H x H transform and tied H x V decoder
    per predicted slot; with next_sentence_head the NSP pooler H x H and classifier H x 2 per
    sequence. Biases, LayerNorms (pre- or post-) and GELU are not matmuls: no term."""
    h, f = self.hidden_size, self.intermediate_size
    ffn_in = 2 if self.gated_ffn else 1
    layer = flops.LayerWork(projection_macs=4 * h * h + ffn_in * h * f + f * h,
                            attention_width=h)
    return flops.ModelWork(layers=(layer,) * self.num_layers,
                           head_macs=h * h + h * self.vocab_size,
                           sequence_macs=h * h + 2 * h if self.next_sentence_head else 0)

  def replace(self, **overrides) -> RobertaConfig:
    """A copy with `overrides` applied (`max_seq_len=N` is accepted and sets max_positions)."""
    values = self.to_dict()
    if "max_seq_len" in overrides:
      del values["max_positions"]
    return RobertaConfig.from_dict({**values, **overrides})

  def to_dict(self) -> dict[str, Any]:
    values = dataclasses.asdict(self)
    # Fields added after the first release are written only when they differ from what a
    # config.json without them means (_ABSENT), so such a config stays readable by releases
    # that predate them; from_dict reads a missing field back as that value.
    for name, absent in _ABSENT.items():
      if values[name] == absent:
        del values[name]
    return values

  @classmethod
  def from_dict(cls, values: dict[str, Any]) -> RobertaConfig:
    """Builds a config from a dict; unknown keys are an error (they would be silently lost).

    A missing type_vocab_size is 0 (no token-type table), not the dataclass default 1:
    config.json files omit it exactly when it is 0, and older ones never wrote it.
    """
    values = {**_ABSENT, **values}
    if values.get("family", "roberta") != "roberta":
      raise ConfigError(f"config family {values['family']!r} is not 'roberta'")
    values.pop("family", None)
    if "max_seq_len" in values:
      max_seq_len = values.pop("max_seq_len")
      pad_id = values.get("pad_id", cls.pad_id)
      positions = max_seq_len + pad_id + 1
      if values.get("max_positions", positions) != positions:
        raise ConfigError(f"max_seq_len={max_seq_len} disagrees with "
                          f"max_positions={values['max_positions']} (must be max_seq_len + 2)")
      values["max_positions"] = positions
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
      raise ConfigError(f"unknown RobertaConfig field(s) {unknown}; known: {sorted(known)}")
    return cls(**values)

  def to_json(self) -> str:
    return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

  @classmethod
  def from_json(cls, text: str) -> RobertaConfig:
    try:
      values = json.loads(text)
    except json.JSONDecodeError as e:
      raise ConfigError(f"RobertaConfig JSON is malformed: {e}") from e
    if not isinstance(values, dict):
      raise ConfigError(f"RobertaConfig JSON must be an object, got {type(values).__name__}")
    return cls.from_dict(values)

  def save(self, path: str) -> None:
    """Writes the JSON to `path` atomically (temp file + rename)."""
    atomic_write.write_text(path, self.to_json())

  @classmethod
  def load(cls, path: str) -> RobertaConfig:
    try:
      text = files.read_text(path)
    except Exception as e:  # OSError, or a TF file system's error on a URL
      if not (isinstance(e, OSError) or error_text.is_tf_error(e)):
        raise
      raise ConfigError(f"cannot read model config {path}: {e}") from e
    try:
      return cls.from_json(text)
    except ConfigError as e:
      raise ConfigError(f"{path}: {e}") from e


# What a config dict or config.json without the field means (see to_dict / from_dict).
_ABSENT = {"type_vocab_size": 0, "next_sentence_head": False, "pre_layer_norm": False,
           "use_bias": True, "gated_ffn": False}


# Sizes (L, H, A, F). base/large are roberta-base/-large; tiny..medium are for tests and
# small-budget runs, keeping BERT's ratios: F = 4H and a head size H/A of 64 everywhere.
_PRESETS: dict[str, dict[str, int]] = {
    "tiny": {"num_layers": 2, "hidden_size": 128, "num_heads": 2, "intermediate_size": 512},
    "small": {"num_layers": 4, "hidden_size": 256, "num_heads": 4, "intermediate_size": 1024},
    "medium": {"num_layers": 6, "hidden_size": 512, "num_heads": 8, "intermediate_size": 2048},
    "base": {"num_layers": 12, "hidden_size": 768, "num_heads": 12, "intermediate_size": 3072},
    "large": {"num_layers": 24, "hidden_size": 1024, "num_heads": 16, "intermediate_size": 4096},
}
PRESET_NAMES = tuple(_PRESETS)


def preset(name: str, **overrides) -> RobertaConfig:
  """The named preset with `overrides` applied, e.g. `preset("tiny", vocab_size=8000)`.

  Raises:
    ConfigError: unknown preset name or override field.
  """
  if name not in _PRESETS:
    raise ConfigError(f"unknown model preset {name!r}; choose one of {list(PRESET_NAMES)}")
  return RobertaConfig.from_dict({**_PRESETS[name], "type_vocab_size": 1, **overrides})


def count_parameters(config: RobertaConfig, include_head: bool = True) -> int:
  """The number of weights `RobertaPretrainer(config)` has (the encoder only if not include_head).

  Counted: token table V·H (once: the decoder is tied), position table max_positions·H, the
  token-type table type_vocab_size·H, embedding LayerNorm, per layer Q/K/V/output dense, the
  FFN (its gate too) and two LayerNorms (biases only with use_bias), the pre-LN final
  LayerNorm, and the MLM head's dense H·H + H, LayerNorm 2H and output bias V.
  Not counted, because this model has none: HF's pooler (dense H·H + H, trained only by
  fine-tuning heads), nor the NSP head of the input-format ablation. So roberta-base's HF
  RobertaForMaskedLM count equals ours with type_vocab_size=1.
  """
  h, f, layers = config.hidden_size, config.intermediate_size, config.num_layers
  b = 1 if config.use_bias else 0
  embeddings = (config.vocab_size + config.max_positions + config.type_vocab_size) * h + 2 * h
  per_layer = 4 * (h * h + b * h) + (h * f + b * f) + (f * h + b * h) + 2 * (2 * h)
  if config.gated_ffn:
    per_layer += h * f + b * f
  final_norm = 2 * h if config.pre_layer_norm else 0
  head = (h * h + h) + 2 * h + config.vocab_size
  return embeddings + layers * per_layer + final_norm + (head if include_head else 0)
