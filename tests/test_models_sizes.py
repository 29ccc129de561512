"""Parameter counts: the built models match the config arithmetic and roberta-base/-large."""

import json
import os

import pytest
from safetensors.numpy import load_file

from roberta_tf.models.roberta import hf_weights
from roberta_tf.models.roberta.config import count_parameters, preset
from roberta_tf.models.roberta.pretrainer import RobertaPretrainer
from tests.harness import tiny_config


def test_hf_count_is_ours_with_the_token_type_row(hf_tiny_dir):
  """What HF counts (the fixture's tensors; the decoder is tied, so not stored) vs. ours: equal
  with the shared row (the default), one row more than fairseq's shape."""
  with open(os.path.join(hf_tiny_dir, "config.json")) as f:
    config = hf_weights.config_from_hf(json.load(f))
  tensors = load_file(os.path.join(hf_tiny_dir, "model.safetensors"))
  assert sum(t.size for t in tensors.values()) == count_parameters(config)
  assert count_parameters(config.replace(type_vocab_size=0)) == (
      count_parameters(config) - config.hidden_size)


def test_tiny_built_count_matches_formula():
  config = tiny_config(vocab_size=500, max_seq_len=30)
  model = RobertaPretrainer(config)
  assert model.count_params() == count_parameters(config)
  assert model.encoder.count_params() == count_parameters(config, include_head=False)


def test_base_is_roberta_base():
  """roberta-base's RobertaForMaskedLM has 124,697,433 weights, its 768-wide type row included
  (fairseq's shape, without it: 124,696,665)."""
  config = preset("base")
  model = RobertaPretrainer(config)  # ~2.5 s, 1.4 GB RSS on CPU.
  assert model.count_params() == count_parameters(config) == 124_697_433
  assert count_parameters(config.replace(type_vocab_size=0)) == 124_696_665
  assert model.encoder.count_params() == 124_055_040
  assert abs(model.count_params() - 124.6e6) <= 0.1e6


def test_large_is_roberta_large():
  """Arithmetic only (building 355M float32 weights takes ~3 GB); base checks the arithmetic."""
  config = preset("large")
  assert count_parameters(config) == 355_412_057  # 355,411,033 + the 1024-wide type row
  assert abs(count_parameters(config) - 355e6) <= 1e6


@pytest.mark.parametrize("name,millions", [("tiny", 6.96), ("small", 16.28), ("medium", 45.23)])
def test_small_presets(name, millions):
  assert abs(count_parameters(preset(name)) / 1e6 - millions) < 0.01


@pytest.mark.parametrize("recipe", [{"pre_layer_norm": True}, {"use_bias": False},
                                    {"gated_ffn": True},
                                    {"pre_layer_norm": True, "use_bias": False, "gated_ffn": True}],
                         ids=str)
def test_recipe_options_built_count_matches_formula(recipe):
  config = tiny_config(vocab_size=500, max_seq_len=30, **recipe)
  model = RobertaPretrainer(config)
  assert model.count_params() == count_parameters(config)
  assert model.encoder.count_params() == count_parameters(config, include_head=False)
