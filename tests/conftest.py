"""Shared pytest fixtures: paths to the copied reference data, quiet TF logs."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTDATA = os.path.join(REPO, "tests", "testdata")
HF_TINY = os.path.join(TESTDATA, "hf_roberta_tiny")


@pytest.fixture(scope="session")
def hf_tiny_dir():
  """The Hugging Face tiny RoBERTa fixture (vocab.json, merges.txt, checkpoint, expected.npz)."""
  return HF_TINY
