"""The reference's init scheme (HF `_init_weights`): what decides whether training leaves the
unigram plateau at high learning rates (see roberta_tf/models/initializers.py)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from roberta_tf.models.initializers import NormalWithZeroRow
from roberta_tf.models.roberta.config import preset
from roberta_tf.models.roberta.pretrainer import RobertaPretrainer

CONFIG = preset("small", vocab_size=3000, max_seq_len=126)


@pytest.fixture(scope="module")
def weights():
  keras.utils.set_random_seed(7)
  model = RobertaPretrainer(CONFIG)
  return model, {v.path: v.numpy() for v in model.trainable_variables}


def _random(weights):
  return {k: v for k, v in weights.items() if k.endswith(("kernel", "embeddings"))}


def test_every_kernel_and_table_is_normal_with_std_0_02(weights):
  _, values = weights
  random = _random(values)
  # 4 layers x 6 kernels + the head's dense + 3 tables (token, position, the 1-row type table).
  assert len(random) == 4 * 6 + 1 + 3
  row = random.pop("embeddings/token_type_embedding/embeddings")
  assert row.shape == (1, 256)  # 256 draws: std within ~5 standard errors (0.02 / sqrt(512))
  assert abs(row.std() - 0.02) < 4.5e-3 and abs(row.mean()) < 6e-3
  for path, v in random.items():
    drawn = v[np.arange(len(v)) != CONFIG.pad_id] if path.endswith("embeddings") else v
    # A truncated normal(0.02) has std 0.0176: the tolerance is ~6 standard errors at 65K draws.
    assert abs(drawn.std() - 0.02) < 4e-4, (path, drawn.std())
    assert abs(drawn.mean()) < 4e-4, path
    # Not truncated at 2 sigma: a normal puts ~1.2% of its draws beyond 2.5 sigma.
    assert (np.abs(drawn) > 0.05).mean() > 0.005, path


def _mean_pairwise_cosine(config, seed=3):
  keras.utils.set_random_seed(seed)
  model = RobertaPretrainer(config)
  ids = np.random.default_rng(seed).integers(4, config.vocab_size, size=(1, 64)).astype(np.int32)
  x = model.encoder.get_layer("embeddings")(ids, np.ones_like(ids)).numpy()[0]
  x /= np.linalg.norm(x, axis=-1, keepdims=True)
  cos = x @ x.T
  return cos[~np.eye(len(cos), dtype=bool)].mean()


def test_shared_row_gives_every_token_one_common_component():
  # HF's init: token + position + one shared N(0, 0.02) row -> after the LayerNorm every pair
  # of token vectors has cosine ~ 1/3 (var 0.02^2 shared of 3 x 0.02^2); fairseq's: ~ 0.
  with_row = _mean_pairwise_cosine(CONFIG)
  without = _mean_pairwise_cosine(CONFIG.replace(type_vocab_size=0))
  print(f"mean pairwise cosine after the embedding LayerNorm: {with_row:.3f} with the shared "
        f"row, {without:.3f} without")
  assert 0.2 < with_row < 0.5 and abs(without) < 0.05


def test_padding_rows_of_both_tables_are_zero(weights):
  _, values = weights
  for path in ("embeddings/token_embedding/embeddings",
               "embeddings/position_embedding/embeddings"):
    table = values[path]
    np.testing.assert_array_equal(table[CONFIG.pad_id], 0.0)
    assert np.all(np.abs(table[np.arange(len(table)) != CONFIG.pad_id]).sum(-1) > 0), path


def test_biases_zero_layer_norms_identity(weights):
  _, values = weights
  for path, v in values.items():
    if path.endswith(("bias", "beta")):
      np.testing.assert_array_equal(v, 0.0, err_msg=path)
    elif path.endswith("gamma"):
      np.testing.assert_array_equal(v, 1.0, err_msg=path)
    else:
      assert path.endswith(("kernel", "embeddings")), path


def test_no_two_weights_share_values(weights):
  _, values = weights
  heads = {}
  for path, v in _random(values).items():
    key = v.ravel()[v.shape[-1]:v.shape[-1] + 16].tobytes()  # skips a zeroed pad row 0
    assert key not in heads, (path, heads.get(key))
    heads[key] = path


def test_initial_mlm_loss_is_log_vocab(weights):
  model, _ = weights
  rng = np.random.default_rng(0)
  ids = rng.integers(4, CONFIG.vocab_size - 1, size=(8, 64)).astype(np.int32)
  positions = np.tile(np.arange(64, dtype=np.int32), (8, 1))
  logits = model({"input_ids": ids, "padding_mask": np.ones_like(ids),
                  "mask_positions": positions})
  targets = np.take_along_axis(ids, positions, 1)
  loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(targets, logits))
  # Logits = LayerNorm output (unit variance) . N(0, 0.02) rows: std s = 0.02 sqrt(H), so the
  # expected loss of an untrained model is ln V + s^2 / 2.
  spread = 0.02**2 * CONFIG.hidden_size / 2
  assert float(loss) == pytest.approx(np.log(CONFIG.vocab_size) + spread, abs=0.04)


def test_same_seed_same_init_and_config_round_trip():
  init = NormalWithZeroRow(0.02, zero_row=1, seed=3)
  again = NormalWithZeroRow.from_config(init.get_config())
  np.testing.assert_array_equal(init((5, 4)), again((5, 4)))
  np.testing.assert_array_equal(init((5, 4))[1], 0.0)
