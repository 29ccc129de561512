"""The architecture a run trains: one resolver for pretraining and fine-tuning.

`resolve(cfg.model, family=, model_options=, **preset_sizes)` reads the MODEL option group
(common/option_groups.py): --init_from's config.json, else --config as a JSON config file (of
the family its "family" names, absent: roberta), else --config as a preset of `family`
(models/registry.py) sized by the task (`preset_sizes`: the vocabulary, max_seq_len, the
special ids); `model_options` ("field=value", train's --model_option) set fields of a new
model's config (of an --init_from model: only its family's phase fields, e.g. ModernBERT's
global_rope_theta for a context extension); then --dropout (>= 0) on every dropout rate of its
family. Each task then checks and adapts it to its data: pretraining to its shards (the pair
packings' token types and NSP head, a grown vocabulary or position table: pretraining/task.py
`model_config_for`), fine-tuning to its vocabulary and --max_seq_len
(finetuning/sweep_runner.py `model_config_for`).
"""

from __future__ import annotations

from roberta_tf import models
from roberta_tf.common import files
from roberta_tf.common.option_groups import ModelOptions
from roberta_tf.models import registry


def resolve(options: ModelOptions, family: str = registry.DEFAULT_FAMILY,
            model_options: tuple[str, ...] = (), **preset_sizes):
  """The model config `options` name (see the module docstring); `preset_sizes` are the
  family preset's overrides, used only for a preset.

  Raises:
    ValueError (models.ConfigError): one line: an unknown preset or --model_option field
      (naming the family's fields), a bad value, or --model_option with --init_from of a
      field other than its family's phase fields.
  """
  if options.init_from:
    config = _init_from_config(options.init_from, model_options)
  elif files.isfile(options.config):
    config = registry.with_options(registry.load_config_file(options.config), model_options)
  else:
    config = registry.preset(family, options.config, **preset_sizes,
                             **registry.parse_options(registry.get(family), model_options))
  if options.dropout >= 0:
    config = registry.with_dropout(config, options.dropout)
  return config


def _init_from_config(init_from: str, model_options: tuple[str, ...]):
  """--init_from's config with `model_options` applied to its family's phase fields only (no
  weight depends on them: ModernBERT's rotary thetas, raised by a context extension).

  Raises:
    ValueError: an option of another field (the model keeps its architecture).
  """
  config = models.read_config(init_from)
  allowed = registry.family_of(config).phase_fields
  for item in model_options:
    if item.partition("=")[0].strip() not in allowed:
      may = (f"only {', '.join(allowed)} may change (no weight depends on them)" if allowed
             else "--model_option shapes a new model")
      raise ValueError(f"--model_option={item}: --init_from={init_from} keeps its own "
                       f"architecture; {may}")
  return registry.with_options(config, model_options)
