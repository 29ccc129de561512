"""RobertaConfig: presets, JSON round trip, clear errors."""

import json

import pytest

from roberta_tf.models.roberta.config import PRESET_NAMES, ConfigError, RobertaConfig, preset


def test_defaults_are_roberta_base():
  config = RobertaConfig()
  assert (config.vocab_size, config.max_positions, config.max_seq_len) == (50265, 514, 512)
  assert (config.num_layers, config.hidden_size, config.num_heads,
          config.intermediate_size) == (12, 768, 12, 3072)
  assert config.layer_norm_eps == 1e-5
  assert (config.bos_id, config.pad_id, config.eos_id) == (0, 1, 2)


@pytest.mark.parametrize("name,dims", [
    ("tiny", (2, 128, 2, 512)), ("small", (4, 256, 4, 1024)), ("medium", (6, 512, 8, 2048)),
    ("base", (12, 768, 12, 3072)), ("large", (24, 1024, 16, 4096))])
def test_presets(name, dims):
  config = preset(name)
  assert (config.num_layers, config.hidden_size, config.num_heads,
          config.intermediate_size) == dims
  assert config.vocab_size == 50265 and config.max_positions == 514
  assert name in PRESET_NAMES


def test_preset_overrides_and_max_seq_len():
  config = preset("tiny", vocab_size=8000, max_seq_len=128)
  assert config.vocab_size == 8000 and config.max_positions == 130 and config.max_seq_len == 128
  assert config.replace(max_seq_len=64).max_positions == 66


def test_json_round_trip(tmp_path):
  config = preset("small", vocab_size=8000, max_positions=66, dropout=0.0)
  assert RobertaConfig.from_json(config.to_json()) == config
  assert RobertaConfig.from_dict(config.to_dict()) == config
  path = str(tmp_path / "config.json")
  config.save(path)
  assert RobertaConfig.load(path) == config
  with open(path) as f:
    assert json.load(f)["vocab_size"] == 8000


def test_unknown_preset_names_the_choices():
  with pytest.raises(ConfigError, match=r"unknown model preset 'huge'.*tiny"):
    preset("huge")


def test_unknown_field_is_named():
  with pytest.raises(ConfigError, match="hidden_sise"):
    preset("tiny", hidden_sise=3)
  with pytest.raises(ConfigError, match="num_hedas"):
    RobertaConfig.from_json('{"num_hedas": 3}')


@pytest.mark.parametrize("overrides,message", [
    ({"hidden_size": 100, "num_heads": 3}, "not divisible"),
    ({"vocab_size": 0}, "vocab_size must be a positive int"),
    ({"dropout": 1.0}, "dropout"),
    ({"max_positions": 2}, "max_positions"),
    ({"max_seq_len": 64, "max_positions": 100}, "max_seq_len=64 disagrees"),
    ({"vocab_size": 2}, "eos_id=2 is outside"),
])
def test_inconsistent_values(overrides, message):
  with pytest.raises(ConfigError, match=message):
    preset("tiny", **overrides)


def test_bad_json_and_missing_file(tmp_path):
  with pytest.raises(ConfigError, match="malformed"):
    RobertaConfig.from_json("{")
  with pytest.raises(ConfigError, match="must be an object"):
    RobertaConfig.from_json("[1]")
  with pytest.raises(ConfigError, match="nope.json"):
    RobertaConfig.load(str(tmp_path / "nope.json"))
