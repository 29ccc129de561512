"""The architecture a run trains: one resolver for pretraining and fine-tuning.

`resolve(cfg.model, **preset_sizes)` reads the MODEL option group (common/option_groups.py):
--init_from's config.json, else --config as a RobertaConfig JSON file, else --config as a preset
sized by the task (`preset_sizes`: the vocabulary, the position table, ...); then --dropout
(>= 0) on it. Each task then checks and adapts it to its data: pretraining to its shards (the
pair packings' token types and NSP head, a grown vocabulary or position table:
pretraining/task.py `model_config_for`), fine-tuning to its vocabulary and --max_seq_len
(finetuning/sweep_runner.py `model_config_for`).
"""

from __future__ import annotations

from roberta_tf import models
from roberta_tf.common import files
from roberta_tf.common.option_groups import ModelOptions


def resolve(options: ModelOptions, **preset_sizes) -> models.RobertaConfig:
  """The model config `options` name (see the module docstring); `preset_sizes` are
  models.preset's overrides, used only for a preset."""
  if options.init_from:
    config = models.read_config(options.init_from)
  elif files.isfile(options.config):
    config = models.RobertaConfig.load(options.config)
  else:
    config = models.preset(options.config, **preset_sizes)
  if options.dropout >= 0:
    config = config.replace(dropout=options.dropout, attention_dropout=options.dropout)
  return config
