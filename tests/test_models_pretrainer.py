"""RobertaPretrainer: gathered MLM logits, tied decoder, precision policies, config round trip."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from roberta_tf.models.roberta.pretrainer import RobertaPretrainer
from tests.harness import tiny_config
from tests.layer_testing import run_layer_test

# Smaller than the tests' model; dropout on (the training=True pass runs it under each policy).
CONFIG = tiny_config(vocab_size=200, max_seq_len=16, hidden_size=32, intermediate_size=64,
                     num_heads=2, dropout=0.1, attention_dropout=0.1)


@pytest.fixture(scope="module")
def pretrainer():
  keras.utils.set_random_seed(1)
  return RobertaPretrainer(CONFIG)


def _batch():
  ids = np.array([[0, 11, 12, 13, 14, 2, 1, 1], [0, 21, 22, 23, 24, 25, 26, 2]], np.int32)
  mask = (ids != 1).astype(np.int32)
  positions = np.array([[1, 3, 0], [2, 6, 7]], np.int32)
  return {"input_ids": ids, "padding_mask": mask, "mask_positions": positions}


def test_logits_are_the_gathered_full_logits(pretrainer):
  batch = _batch()
  logits = pretrainer(batch)
  assert logits.shape == (2, 3, CONFIG.vocab_size) and logits.dtype == tf.float32
  full = pretrainer.full_logits(batch["input_ids"], batch["padding_mask"])
  assert full.shape == (2, 8, CONFIG.vocab_size) and full.dtype == tf.float32
  expected = np.take_along_axis(full.numpy(), batch["mask_positions"][:, :, None], axis=1)
  np.testing.assert_allclose(logits, expected, atol=1e-5)
  # The pipeline's whole batch (with mask_ids / mask_weights) can be passed as is.
  batch.update(mask_ids=np.zeros((2, 3), np.int32), mask_weights=np.ones((2, 3), np.float32))
  np.testing.assert_array_equal(pretrainer(batch), logits)


def test_head_is_dense_gelu_layernorm_tied_decoder(pretrainer):
  # Every head weight random (a fresh gamma=1, beta=0, bias=0 would hide a head that skips one).
  rng = np.random.default_rng(3)
  for v in pretrainer.mlm_head.trainable_variables:
    if not v.path.startswith("embeddings"):
      v.assign(rng.normal(0.5, 0.3, v.shape).astype(np.float32))
  batch = _batch()
  hidden = pretrainer.encoder(
      {k: batch[k] for k in ("input_ids", "padding_mask")})["sequence_output"].numpy()
  head = pretrainer.mlm_head
  x = np.take_along_axis(hidden, batch["mask_positions"][:, :, None], axis=1)
  x = x @ head.intermediate_dense.kernel.numpy() + head.intermediate_dense.bias.numpy()
  x = 0.5 * x * (1.0 + tf.math.erf(x / np.sqrt(2.0)).numpy())  # Exact GELU.
  x = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + CONFIG.layer_norm_eps)
  x = x * head.intermediate_layer_norm.gamma.numpy() + head.intermediate_layer_norm.beta.numpy()
  embeddings = pretrainer.encoder.get_layer("embeddings").token_embedding.embeddings.numpy()
  expected = x @ embeddings.T + head.output_bias.numpy()
  np.testing.assert_allclose(pretrainer(batch), expected, atol=1e-4)


def test_decoder_is_tied_and_counted_once(pretrainer):
  shapes = [tuple(v.shape) for v in pretrainer.trainable_variables]
  assert shapes.count((CONFIG.vocab_size, CONFIG.hidden_size)) == 1
  h, f, v, layers = CONFIG.hidden_size, CONFIG.intermediate_size, CONFIG.vocab_size, 2
  per_layer = 4 * (h * h + h) + 2 * h * f + f + h + 4 * h
  expected = ((v + CONFIG.max_positions + CONFIG.type_vocab_size) * h + 2 * h + layers * per_layer
              + (h * h + h + 2 * h + v))
  assert pretrainer.count_params() == expected
  # A gradient step on the embedding moves the decoder too: the logits at a masked slot change.
  batch = _batch()
  embedding = pretrainer.encoder.get_layer("embeddings").token_embedding.embeddings
  before = pretrainer(batch).numpy()
  saved = embedding.numpy()
  embedding.assign(saved * 2.0)
  try:
    assert np.abs(pretrainer(batch).numpy() - before).max() > 1e-3
  finally:
    embedding.assign(saved)


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16", "mixed_float16"])
def test_forward_backward_under_each_policy(policy):
  keras.utils.set_random_seed(2)
  model = RobertaPretrainer(CONFIG, dtype=policy)
  batch = _batch()
  labels = np.array([[11, 13, 0], [22, 26, 2]], np.int32)
  with tf.GradientTape() as tape:
    logits = model(batch, training=True)
    loss = tf.reduce_mean(
        tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))
  grads = tape.gradient(loss, model.trainable_variables)
  assert logits.dtype == tf.float32 and loss.dtype == tf.float32
  assert all(g is not None and np.isfinite(tf.convert_to_tensor(g).numpy()).all() for g in grads)
  assert np.isfinite(loss.numpy()) and abs(loss.numpy() - np.log(CONFIG.vocab_size)) < 1.0
  assert all(v.dtype == "float32" for v in model.trainable_variables)


def test_layer_contract():
  # The encoder's 5 embedding weights (the type row included) and 16 per layer; the MLM head's
  # dense kernel + bias, LayerNorm gamma + beta and output bias (its decoder is the token table).
  run_layer_test(RobertaPretrainer, {"config": CONFIG}, (_batch(),),
                 expected_output_shape=(2, 3, CONFIG.vocab_size),
                 expected_num_trainable_weights=5 + 16 * CONFIG.num_layers + 5)


def test_get_config_round_trip(pretrainer):
  clone = RobertaPretrainer.from_config(pretrainer.get_config())
  assert clone.config == CONFIG
  clone.set_weights(pretrainer.get_weights())
  batch = _batch()
  np.testing.assert_array_equal(clone(batch), pretrainer(batch))
