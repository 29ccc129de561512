"""Models: RoBERTa's config, encoder, tied MLM head and pretrainer; the families' registry
(`build_pretrainer`, models/registry.py: RoBERTa and models/modernbert/); model directories.

`flops` counts a training step's FLOPs (for MFU) from what a config's `flop_terms()` says its
layers compute. Checkpoint converters (Hugging Face safetensors, keras-hub RobertaBackbone) live
in `hf_weights` and `keras_hub_weights`; import them explicitly.
"""

from roberta_tf.models.config import PRESET_NAMES, ConfigError, RobertaConfig, preset
from roberta_tf.models.encoder import build_encoder
from roberta_tf.models.mlm_head import MaskedLMHead, build_mlm_head
from roberta_tf.models.model_dir import ModelDirError, load, read_config, save
from roberta_tf.models.pretrainer import RobertaPretrainer
from roberta_tf.models.registry import build_pretrainer

__all__ = [
    "PRESET_NAMES", "ConfigError", "MaskedLMHead", "ModelDirError", "RobertaConfig",
    "RobertaPretrainer", "build_encoder", "build_mlm_head", "build_pretrainer", "load", "preset",
    "read_config",
    "save",
]
