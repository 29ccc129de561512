"""`NextSentenceHead` on its own: the harness's layer checks, at tiny dimensions."""

import numpy as np

from roberta_tf.models.roberta.nsp_head import NextSentenceHead
from tests.layer_testing import run_layer_test

B, H = 3, 16


def test_layer_contract():
  # The pooler and the 2-way classifier, kernel + bias each.
  pooled = np.random.default_rng(0).normal(size=(B, H)).astype(np.float32)
  run_layer_test(NextSentenceHead, {"hidden_size": H}, (pooled,), expected_output_shape=(B, 2),
                 expected_num_trainable_weights=4)
