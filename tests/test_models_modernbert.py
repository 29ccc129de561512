"""ModernBERT (roberta_tf/models/modernbert/): parity with transformers' ModernBertForMaskedLM on
the committed fixture (tests/testdata/modernbert_tiny, made by its make_model_fixture.py),
both config dialects, HF import/export round trips, mixed precision."""

import json
import os

import numpy as np
import pytest

from roberta_tf.models.modernbert import modernbert_hf_weights
from tests.conftest import REPO

FIXTURE = os.path.join(REPO, "tests", "testdata", "modernbert_tiny")


@pytest.fixture(scope="module")
def expected():
  return dict(np.load(os.path.join(FIXTURE, "expected.npz")))


@pytest.fixture(scope="module")
def imported():
  return modernbert_hf_weights.load_hf(FIXTURE)


def _batch_outputs(pretrainer, expected):
  ids, mask = expected["batch_input_ids"], expected["batch_attention_mask"]
  hidden = pretrainer.encoder({"input_ids": ids, "padding_mask": mask})["sequence_output"]
  real = mask.astype(bool)
  return pretrainer.full_logits(ids, mask).numpy()[real], hidden.numpy()[real]


def test_padded_batch_matches_transformers(imported, expected):
  logits, hidden = _batch_outputs(imported, expected)
  logits_err = np.abs(logits - expected["batch_logits"]).max()
  hidden_err = np.abs(hidden - expected["batch_last_hidden_state"]).max()
  print(f"padded batch max |diff|: logits {logits_err:.3g}, last_hidden_state {hidden_err:.3g}")
  assert logits_err < 1e-4 and hidden_err < 1e-4
