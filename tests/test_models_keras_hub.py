"""keras-hub RobertaBackbone ↔ our encoder: same outputs after copying weights either way."""

import keras
import numpy as np
import pytest

from roberta_tf.models.roberta import keras_hub_weights
from roberta_tf.models.roberta.encoder import build_encoder
from roberta_tf.models.roberta.keras_hub_weights import KerasHubWeightsError
from tests.harness import tiny_config

# Smaller than the tests' model, 4 heads; dropout 0.1 (keras-hub's one rate must come back
# as both of ours).
CONFIG = tiny_config(vocab_size=150, max_seq_len=12, hidden_size=32, intermediate_size=64,
                     num_heads=4, dropout=0.1, attention_dropout=0.1)


def _right_padded_batch():
  ids = np.array([[0, 10, 11, 12, 13, 14, 2, 1, 1], [0, 20, 21, 22, 23, 24, 25, 26, 2]],
                 np.int32)
  return ids, (ids != CONFIG.pad_id).astype(np.int32)


def _randomize(model, seed):
  """Non-trivial weights everywhere (LayerNorm 1/0 and zero biases would hide mapping bugs)."""
  rng = np.random.default_rng(seed)
  for w in model.weights:
    w.assign(rng.normal(0.0, 0.2, w.shape).astype(np.float32) + (1.0 if "gamma" in w.path else 0))


def _assert_same_outputs(encoder, backbone):
  ids, mask = _right_padded_batch()
  ours = encoder({"input_ids": ids, "padding_mask": mask})["sequence_output"].numpy()
  theirs = keras.ops.convert_to_numpy(backbone({"token_ids": ids, "padding_mask": mask}))
  real = mask.astype(bool)
  err = np.abs(ours - theirs)[real].max()
  print(f"keras-hub parity max abs {err:.3g}")
  assert err < 1e-5, err


@pytest.mark.parametrize("overrides", [{}, {"type_vocab_size": 0}, {"use_bias": False}],
                         ids=["shared_row", "fairseq_shape", "no_linear_biases"])
def test_ours_to_keras_hub(overrides):
  # The shared token-type row (randomized, non-zero) travels inside keras-hub's positions; a
  # bias-free encoder becomes zero biases.
  encoder = build_encoder(CONFIG.replace(**overrides))
  _randomize(encoder, 0)
  backbone = keras_hub_weights.build_backbone(CONFIG)
  keras_hub_weights.copy_to_backbone(encoder, backbone)
  _assert_same_outputs(encoder, backbone)


def test_keras_hub_to_ours():
  backbone = keras_hub_weights.build_backbone(CONFIG)
  _randomize(backbone, 1)
  config = keras_hub_weights.config_from_backbone(backbone)
  assert config == CONFIG.replace(type_vocab_size=0)  # keras-hub has no token-type table
  encoder = build_encoder(config)
  keras_hub_weights.copy_from_backbone(backbone, encoder)
  _assert_same_outputs(encoder, backbone)
  # Into an encoder with the shared row: the row is zeroed, the outputs are the same.
  with_row = build_encoder(CONFIG)
  _randomize(with_row, 2)
  keras_hub_weights.copy_from_backbone(backbone, with_row)
  _assert_same_outputs(with_row, backbone)
  # Back again: the backbone's weights survive the round trip exactly.
  other = keras_hub_weights.build_backbone(CONFIG)
  keras_hub_weights.copy_to_backbone(encoder, other)
  for a, b in zip(backbone.weights, other.weights, strict=True):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_dimension_mismatch_is_named():
  backbone = keras_hub_weights.build_backbone(CONFIG.replace(intermediate_size=48))
  with pytest.raises(KerasHubWeightsError, match=r"transformer_layer_0/intermediate_dense/kernel"
                                                 r": shape \(32, 64\) cannot become \(32, 48\)"):
    keras_hub_weights.copy_to_backbone(build_encoder(CONFIG), backbone)
  backbone = keras_hub_weights.build_backbone(CONFIG.replace(max_seq_len=10))
  with pytest.raises(KerasHubWeightsError, match="position tables disagree"):
    keras_hub_weights.copy_from_backbone(backbone, build_encoder(CONFIG))
