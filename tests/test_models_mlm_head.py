"""`MaskedLMHead` on its own: the harness's layer checks, at tiny dimensions."""

import keras
import keras_hub
import numpy as np

from roberta_tf.models.roberta.mlm_head import MaskedLMHead
from tests.layer_testing import run_layer_test

B, S, H, V = 2, 6, 16, 50


def _token_embedding():
  """The table the decoder is tied to: float32, as RobertaEmbeddings keeps it (so under a mixed
  policy only the head's dense runs in the compute dtype here)."""
  keras.utils.set_random_seed(1)
  table = keras_hub.layers.ReversibleEmbedding(V, H, tie_weights=True, dtype="float32",
                                               name="token_embedding")
  table.build((None, None))
  return table


def _inputs(seed=0):
  rng = np.random.default_rng(seed)
  return {"inputs": rng.normal(size=(B, S, H)).astype(np.float32),
          "mask_positions": np.array([[1, 3, 0], [2, 5, 5]], np.int32)}


def test_layer_contract():
  # dense kernel + bias, LayerNorm gamma + beta, the output bias, and the tied table (once).
  # Mixed precision: the next test.
  run_layer_test(MaskedLMHead, {"token_embedding": _token_embedding()}, _inputs(),
                 expected_output_shape=(B, 3, V), expected_num_trainable_weights=6,
                 run_precision_test=False)


def test_mixed_precision_on_its_own():
  # output_bias is added to float32 logits: autocast=False keeps it float32 under a mixed
  # policy when the head is called on its own, not only inside RobertaPretrainer.
  run_layer_test(MaskedLMHead, {"token_embedding": _token_embedding()}, _inputs(),
                 expected_output_shape=(B, 3, V), expected_num_trainable_weights=6)
