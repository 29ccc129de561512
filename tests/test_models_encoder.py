"""The functional encoder: shapes, RoBERTa positions, padding, config round trip, precision."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from roberta_tf.models.roberta.embeddings import roberta_position_ids
from roberta_tf.models.roberta.encoder import build_encoder
from tests.harness import tiny_config

# Smaller than the tests' model, 4 heads; dropout on (test_dropout_only_in_training).
CONFIG = tiny_config(vocab_size=300, max_seq_len=32, hidden_size=32, intermediate_size=64,
                     num_heads=4, dropout=0.1, attention_dropout=0.1)


@pytest.fixture(scope="module")
def encoder():
  keras.utils.set_random_seed(0)
  return build_encoder(CONFIG)


def _batch(lengths, seq_len, seed=0):
  rng = np.random.default_rng(seed)
  ids = rng.integers(5, CONFIG.vocab_size, (len(lengths), seq_len)).astype(np.int32)
  mask = (np.arange(seq_len)[None, :] < np.array(lengths)[:, None]).astype(np.int32)
  ids[:, 0] = CONFIG.bos_id
  ids[mask == 0] = CONFIG.pad_id
  return ids, mask


def test_position_ids_follow_the_mask():
  mask = tf.constant([[1, 1, 1, 0, 0], [0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
  np.testing.assert_array_equal(roberta_position_ids(mask, pad_id=1),
                                [[2, 3, 4, 1, 1], [1, 1, 2, 3, 4], [2, 3, 4, 5, 6]])


def test_inputs_outputs_and_dynamic_length(encoder):
  assert sorted(encoder.input) == ["input_ids", "padding_mask"]
  assert sorted(encoder.output) == ["pooled_output", "sequence_output"]
  assert [layer.name for layer in encoder.layers[2:]] == [
      "embeddings", "transformer_layer_0", "transformer_layer_1"]
  for seq_len in (5, 32):  # One model, two lengths: S is dynamic.
    ids, mask = _batch([seq_len, 3], seq_len)
    out = encoder({"input_ids": ids, "padding_mask": mask})
    assert out["sequence_output"].shape == (2, seq_len, 32)
    assert out["sequence_output"].dtype == tf.float32
    np.testing.assert_array_equal(out["pooled_output"], out["sequence_output"][:, 0])


def test_too_long_input_is_refused(encoder):
  ids, mask = _batch([33], 33)
  with pytest.raises(ValueError, match="sequence length 33 exceeds max_seq_len = 32"):
    encoder({"input_ids": ids, "padding_mask": mask})


def test_real_positions_ignore_padding(encoder):
  ids, mask = _batch([6, 4], 6)
  short = encoder({"input_ids": ids, "padding_mask": mask})["sequence_output"].numpy()
  # More padding, and garbage ids under the pads, change nothing at real positions.
  long_ids, long_mask = _batch([6, 4], 10)
  long_ids[:, :6] = ids
  long_ids[1, 4:] = 77
  long = encoder({"input_ids": long_ids, "padding_mask": long_mask})["sequence_output"].numpy()
  np.testing.assert_allclose(long[0, :6], short[0], atol=1e-5)
  np.testing.assert_allclose(long[1, :4], short[1, :4], atol=1e-5)
  # Left padding gives the same vectors: positions count along the mask, not the index.
  left_ids = np.full_like(ids[1:], CONFIG.pad_id)
  left_ids[0, 2:] = ids[1, :4]
  left_mask = np.array([[0, 0, 1, 1, 1, 1]], np.int32)
  left = encoder({"input_ids": left_ids, "padding_mask": left_mask})["sequence_output"].numpy()
  np.testing.assert_allclose(left[0, 2:], short[1, :4], atol=1e-5)


def test_dropout_only_in_training(encoder):
  ids, mask = _batch([8, 8], 8)
  inputs = {"input_ids": ids, "padding_mask": mask}
  a, b = (encoder(inputs, training=False)["sequence_output"] for _ in range(2))
  np.testing.assert_array_equal(a, b)
  c = encoder(inputs, training=True)["sequence_output"]
  assert np.abs(c - a).max() > 1e-3


def test_get_config_from_config_rebuilds_the_same_model(encoder):
  clone = keras.Model.from_config(encoder.get_config())
  assert [w.path for w in clone.weights] == [w.path for w in encoder.weights]
  clone.set_weights(encoder.get_weights())
  ids, mask = _batch([7, 2], 7)
  inputs = {"input_ids": ids, "padding_mask": mask}
  np.testing.assert_array_equal(clone(inputs)["sequence_output"],
                                encoder(inputs)["sequence_output"])


def test_weight_names_are_stable(encoder):
  paths = [w.path for w in encoder.weights]
  assert paths[:5] == ["embeddings/token_embedding/embeddings",
                       "embeddings/position_embedding/embeddings",
                       "embeddings/layer_norm/gamma", "embeddings/layer_norm/beta",
                       "embeddings/token_type_embedding/embeddings"]  # the shared row, last
  assert "transformer_layer_1/intermediate_dense/kernel" in paths
  assert len(paths) == len(set(paths)) == 5 + 16 * CONFIG.num_layers


@pytest.mark.parametrize("policy,atol", [("mixed_bfloat16", 2e-3), ("mixed_float16", 3e-4)])
def test_mixed_precision_matches_float32(encoder, policy, atol):
  mixed = build_encoder(CONFIG, dtype=policy)
  assert keras.config.dtype_policy().name == "float32"  # The argument, not a global.
  assert mixed.get_layer("transformer_layer_0").query.compute_dtype == policy.split("_")[1]
  mixed.set_weights(encoder.get_weights())
  ids, mask = _batch([9, 5], 9)
  inputs = {"input_ids": ids, "padding_mask": mask}
  out = mixed(inputs)["sequence_output"]
  assert out.dtype == tf.float32 and all(w.dtype == "float32" for w in mixed.weights)
  diff = np.abs(out.numpy() - encoder(inputs)["sequence_output"].numpy())[mask == 1]
  assert 0 < diff.max() < atol  # > 0: the matmuls really ran in half precision.
