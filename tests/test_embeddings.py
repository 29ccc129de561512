"""`RobertaEmbeddings` on its own: the harness's checks, RoBERTa positions, the zero pad rows."""

import numpy as np
import pytest

from roberta_tf.models.roberta.embeddings import RobertaEmbeddings, roberta_position_ids
from tests.layer_testing import run_layer_test

V, H, PAD = 50, 16, 1
KWARGS = {"vocab_size": V, "hidden_size": H, "max_positions": 12, "pad_id": PAD}


def _inputs(lengths=(6, 3), seq_len=6, seed=0):
  rng = np.random.default_rng(seed)
  mask = (np.arange(seq_len)[None, :] < np.array(lengths)[:, None]).astype(np.int32)
  ids = np.where(mask == 1, rng.integers(4, V, mask.shape), PAD).astype(np.int32)
  return {"input_ids": ids, "padding_mask": mask}


def test_layer_contract():
  # token and position tables, LayerNorm gamma and beta (+ the type table with segments).
  run_layer_test(RobertaEmbeddings, KWARGS, _inputs(), expected_output_shape=(2, 6, H),
                 expected_num_trainable_weights=4)
  run_layer_test(RobertaEmbeddings, {**KWARGS, "type_vocab_size": 2}, _inputs(),
                 expected_output_shape=(2, 6, H), expected_num_trainable_weights=5)


def test_sum_of_token_and_offset_position_rows_then_layer_norm():
  inputs = _inputs(seed=1)
  layer = RobertaEmbeddings(**KWARGS)
  out = np.asarray(layer(**inputs))
  tokens = np.asarray(layer.token_embedding.embeddings)
  positions = np.asarray(layer.position_embedding.embeddings)
  pos_ids = np.asarray(roberta_position_ids(inputs["padding_mask"], PAD))
  np.testing.assert_array_equal(pos_ids, [[2, 3, 4, 5, 6, 7], [2, 3, 4, 1, 1, 1]])
  x = tokens[inputs["input_ids"]] + positions[pos_ids]
  x = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
  np.testing.assert_allclose(out, x, atol=1e-5)


def test_pad_rows_start_at_zero():
  layer = RobertaEmbeddings(**KWARGS)
  layer(**_inputs())
  for table in (layer.token_embedding.embeddings, layer.position_embedding.embeddings):
    table = np.asarray(table)
    np.testing.assert_array_equal(table[PAD], 0)
    assert 0.015 < table[PAD + 1:].std() < 0.025  # N(0, 0.02) elsewhere


def test_too_long_input_is_refused():
  with pytest.raises(ValueError, match="sequence length 11 exceeds max_seq_len = 10"):
    RobertaEmbeddings(**KWARGS)(**_inputs(lengths=(11, 2), seq_len=11))
