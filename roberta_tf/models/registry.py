"""Model families: the one place that maps a config's `family` to its code.

A model section of config.json names its family ("family": "modernbert"; absent: "roberta", as
every model dir written before families existed). Everything that builds, converts or sizes a
model asks this registry rather than a family's classes:

  family_of(config) / FAMILIES[name]   the `Family` record (below)
  config_from_dict(values)             a config of the family `values["family"]` names
  load_config_file(path)               a JSON config file (a preset's alternative)
  preset(family, name, **sizes)        a family's preset with overrides
  with_options(config, ["k=v", ...])   fields set from strings, checked by the family's config
  with_dropout(config, rate)           every dropout rate of the family (--dropout)
  free_fields(config)                  fields a checkpoint may differ in (dropout; ModernBERT's
                                       max_seq_len: no weight is sized by it)
  build_pretrainer(config, dtype, serving)   THE constructor of pretrainers
  build_encoder(config, dtype, serving)      the encoder alone (fine-tuning, exports)
  load_hf(hf_dir) / hf_converter(family)      HF *ForMaskedLM folders in / the module out
  count_parameters(config)             the pretrainer's weights, counted from the config

This module imports no TensorFlow: the builders and converters are imported when called.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from roberta_tf.common import files
from roberta_tf.models.modernbert import modernbert_config
from roberta_tf.models.roberta import config as roberta_config
from roberta_tf.models.roberta.config import ConfigError

DEFAULT_FAMILY = "roberta"
# The rate the held-out MLM evaluation masks for every family, whatever the training rate
# (--mask_rate): runs trained at different rates compare on one scale (ModernBERT's recipe
# trains at 30% and evaluates at 15%; RoBERTa trains and evaluates at 15%).
EVAL_MASK_RATE = 0.15


@dataclasses.dataclass(frozen=True)
class Family:
  """What differs between encoder families.

  Attributes:
    name: the `family` value in config.json.
    config_class: the frozen dataclass of its architecture (from_dict / to_dict / replace).
    presets: preset names; `preset_fn(name, **overrides)` builds one.
    hf_model_types: HF config.json `model_type`s this family imports.
    count_parameters: (config, include_head=True) -> int.
    mask_rate: the default fraction of tokens masked in pretraining (--mask_rate 0).
    position_table: the model has a learned position table (position growth applies).
    dropout_fields: the config's dropout rates that --dropout sets (the weights' shapes and
      the forward computation otherwise do not depend on them).
    tokenizer_files: HF tokenizer files an import copies along and --to_hf copies back.
  """
  name: str
  config_class: type
  presets: tuple[str, ...]
  preset_fn: Callable[..., Any]
  hf_model_types: tuple[str, ...]
  count_parameters: Callable[..., int]
  mask_rate: float
  position_table: bool
  dropout_fields: tuple[str, ...]
  tokenizer_files: tuple[str, ...] = ()

  def field_names(self) -> list[str]:
    return sorted(f.name for f in dataclasses.fields(self.config_class))


FAMILIES: dict[str, Family] = {
    "roberta": Family(
        name="roberta", config_class=roberta_config.RobertaConfig,
        presets=roberta_config.PRESET_NAMES, preset_fn=roberta_config.preset,
        hf_model_types=("roberta", "roberta-prelayernorm"),
        count_parameters=roberta_config.count_parameters, mask_rate=0.15, position_table=True,
        dropout_fields=("dropout", "attention_dropout")),
    modernbert_config.FAMILY: Family(
        name=modernbert_config.FAMILY, config_class=modernbert_config.ModernBertConfig,
        presets=modernbert_config.PRESET_NAMES, preset_fn=modernbert_config.preset,
        hf_model_types=("modernbert",),
        count_parameters=modernbert_config.count_parameters, mask_rate=0.3, position_table=False,
        dropout_fields=("embedding_dropout", "attention_dropout", "mlp_dropout"),
        tokenizer_files=("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")),
}
FAMILY_NAMES = tuple(FAMILIES)


def get(name: str) -> Family:
  """The family called `name`; ConfigError naming the known ones otherwise."""
  if name not in FAMILIES:
    raise ConfigError(f"unknown model family {name!r}; known: {list(FAMILY_NAMES)}")
  return FAMILIES[name]


def family_of(config) -> Family:
  """The family of a config object (or of a config dict: its "family", default roberta)."""
  if isinstance(config, dict):
    return get(config.get("family", DEFAULT_FAMILY))
  for family in FAMILIES.values():
    if isinstance(config, family.config_class):
      return family
  raise ConfigError(f"{type(config).__name__} is no model family's config")


def family_of_hf(hf_config: dict) -> Family | None:
  """The family that imports an HF config.json of this `model_type`, or None."""
  model_type = hf_config.get("model_type")
  for family in FAMILIES.values():
    if model_type in family.hf_model_types:
      return family
  return None


def config_from_dict(values: dict):
  """A config of the family `values` names ("family", absent: roberta); RoBERTa's dicts carry
  no "family" key (RobertaConfig.to_dict never writes one, so old readers read new dirs)."""
  family = family_of(values)
  values = dict(values)
  if family.name == DEFAULT_FAMILY:
    values.pop("family", None)
  return family.config_class.from_dict(values)


def load_config_file(path: str):
  """The config in a JSON file (a model section, or a model dir's config.json with one)."""
  try:
    values = json.loads(files.read_text(path))
  except (OSError, json.JSONDecodeError) as e:
    raise ConfigError(f"cannot read model config {path}: {e}") from e
  if isinstance(values, dict) and isinstance(values.get("model"), dict):
    values = values["model"]
  if not isinstance(values, dict):
    raise ConfigError(f"{path}: a model config must be a JSON object")
  try:
    return config_from_dict(values)
  except ConfigError as e:
    raise ConfigError(f"{path}: {e}") from e


def preset(family: str, name: str, **overrides):
  """`family`'s preset `name` with `overrides` (field names of its config; max_seq_len sizes
  RoBERTa's position table)."""
  return get(family).preset_fn(name, **overrides)


def _parse_value(text: str, current: Any, field: str, family: Family):
  """`text` as the type of the field's current value (bool: true/false; None: JSON)."""
  try:
    if isinstance(current, bool):
      if text.lower() not in ("true", "false", "1", "0"):
        raise ValueError("expected true or false")
      return text.lower() in ("true", "1")
    if isinstance(current, int):
      return int(text)
    if isinstance(current, float):
      return float(text)
    if isinstance(current, str):
      return text
    return json.loads(text)
  except (ValueError, json.JSONDecodeError) as e:
    raise ConfigError(f"--model_option={field}={text}: {e} ({family.name} field)") from e


def parse_options(family: Family, options) -> dict[str, Any]:
  """{field: value} from "field=value" strings, typed by `family`'s config defaults.

  Raises:
    ConfigError: one line: a malformed item, or an unknown field (naming the known ones).
  """
  defaults = {f.name: f.default for f in dataclasses.fields(family.config_class)}
  values = {}
  for item in options:
    field, sep, text = item.partition("=")
    field = field.strip()
    if not sep:
      raise ConfigError(f"--model_option={item}: expected field=value")
    if field not in defaults:
      raise ConfigError(f"--model_option={item}: {family.name} configs have no field "
                        f"{field!r}; fields: {', '.join(family.field_names())}")
    values[field] = _parse_value(text.strip(), defaults[field], field, family)
  return values


def with_options(config, options):
  """`config` with "field=value" strings applied (checked by its config class)."""
  values = parse_options(family_of(config), options)
  return config.replace(**values) if values else config


def with_dropout(config, rate: float):
  """`config` with every dropout rate of its family (Family.dropout_fields) set to `rate`."""
  return config.replace(**{name: rate for name in family_of(config).dropout_fields})


def free_fields(config) -> tuple[str, ...]:
  """Fields that may differ between a checkpoint and the model restoring it: dropout rates,
  and max_seq_len where no weight is sized by it (no position table)."""
  family = family_of(config)
  return family.dropout_fields + (() if family.position_table else ("max_seq_len",))


def build_pretrainer(config, dtype=None, serving: bool = False):
  """The pretrainer of `config`'s family (RobertaPretrainer / ModernBertPretrainer), built.

  Args:
    config: a family's config.
    dtype: a dtype policy or its name (variables are float32 either way).
    serving: the exports' inference-only layout (RoBERTa's fused QKV; ModernBERT has one).
  """
  # Imported here: this module stays TensorFlow-free (train --help), and only the family
  # built is imported.
  # pylint: disable=import-outside-toplevel
  if family_of(config).name == DEFAULT_FAMILY:
    from roberta_tf.models.roberta.pretrainer import RobertaPretrainer
    return RobertaPretrainer(config, dtype=dtype, serving=serving)
  from roberta_tf.models.modernbert.modernbert_pretrainer import ModernBertPretrainer
  return ModernBertPretrainer(config, dtype=dtype, serving=serving)


def build_encoder(config, dtype=None, serving: bool = False):
  """The encoder of `config`'s family (RoBERTa's build_encoder / build_modernbert_encoder),
  built, without an MLM head; `serving` as build_pretrainer's."""
  # pylint: disable=import-outside-toplevel
  if family_of(config).name == DEFAULT_FAMILY:
    from roberta_tf.models.roberta.encoder import build_encoder as build_roberta_encoder
    return build_roberta_encoder(config, dtype=dtype, serving=serving)
  from roberta_tf.models.modernbert.modernbert_encoder import build_modernbert_encoder
  return build_modernbert_encoder(config, dtype=dtype)


def hf_converter(family: Family):
  """`family`'s HF *ForMaskedLM module: config_from_hf(hf, source), set_from_hf_tensors(
  pretrainer, tensors, source), save_hf(hf_dir, pretrainer)."""
  # pylint: disable=import-outside-toplevel
  if family.name == DEFAULT_FAMILY:
    from roberta_tf.models.roberta import hf_weights
    return hf_weights
  from roberta_tf.models.modernbert import modernbert_hf_weights
  return modernbert_hf_weights


def load_hf(hf_dir: str, dtype=None, family: Family | None = None):
  """The pretrainer with the weights of the HF *ForMaskedLM folder `hf_dir`, of the family
  its config.json's model_type names (or `family`).

  Raises:
    hf_weights.HFCheckpointError: one line: unreadable folder, a model_type no family
      imports, a bad config, a missing / unexpected key or a shape that does not fit.
  """
  # pylint: disable=import-outside-toplevel
  from roberta_tf.models.modernbert import modernbert_hf_config
  from roberta_tf.models.roberta import hf_weights
  hf_config, tensors = hf_weights.read_hf_dir(hf_dir)
  family = family or family_of_hf(hf_config) or FAMILIES[DEFAULT_FAMILY]
  source = files.join(hf_dir, hf_weights.CONFIG_FILE)
  if family.name == DEFAULT_FAMILY:
    config = hf_weights.config_from_hf(hf_config, source)
  else:
    try:
      config = modernbert_hf_config.config_from_hf(hf_config, source)
    except ValueError as e:
      raise hf_weights.HFCheckpointError(str(e)) from e
  pretrainer = build_pretrainer(config, dtype=dtype)
  hf_converter(family).set_from_hf_tensors(pretrainer, tensors,
                                           files.join(hf_dir, hf_weights.WEIGHTS_FILE))
  return pretrainer


def count_parameters(config, include_head: bool = True) -> int:
  return family_of(config).count_parameters(config, include_head=include_head)
