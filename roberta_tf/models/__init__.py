"""Models: one folder per encoder family (models/roberta/, models/modernbert/), and beside them
what the families share: the registry (models/registry.py: family -> config, presets,
pretrainer, HF converters, parameter count; `build_pretrainer`, THE constructor), model
directories (model_dir: `load` builds through the registry), checkpoint_files, initializers,
fused_ops, flops (a training step's FLOPs from a config's `flop_terms()`), growth,
pseudo_log_likelihood. RoBERTa's config, encoder, MLM head and pretrainer are re-exported here
for the callers that predate families. Checkpoint converters (roberta/hf_weights,
roberta/keras_hub_weights, modernbert/modernbert_hf_weights) are imported explicitly.
"""

from roberta_tf.models.model_dir import ModelDirError, load, read_config, save
from roberta_tf.models.registry import build_pretrainer
from roberta_tf.models.roberta.config import PRESET_NAMES, ConfigError, RobertaConfig, preset
from roberta_tf.models.roberta.encoder import build_encoder
from roberta_tf.models.roberta.mlm_head import MaskedLMHead, build_mlm_head
from roberta_tf.models.roberta.pretrainer import RobertaPretrainer

__all__ = [
    "PRESET_NAMES", "ConfigError", "MaskedLMHead", "ModelDirError", "RobertaConfig",
    "RobertaPretrainer", "build_encoder", "build_mlm_head", "build_pretrainer", "load", "preset",
    "read_config", "save",
]
