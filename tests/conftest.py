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


@pytest.fixture(scope="session")
def train_shards(tmp_path_factory):
  """Pretraining shards of the test corpus, encoded with the project's tokenizer.

  max_seq_len 64, ONE train shard (443 sequences) and one validation shard (22). One train
  file matters: with fewer files than input pipelines the pipeline splits by record, so 2
  workers x B/2 read exactly the sequences 1 worker x B reads (the multi-worker parity test).
  Built by the binary in a subprocess (its absl flags stay out of this process).
  """
  import subprocess  # pylint: disable=import-outside-toplevel
  import sys  # pylint: disable=import-outside-toplevel
  out = str(tmp_path_factory.mktemp("train_shards"))
  subprocess.run([sys.executable, "-m", "data_prep.build_shards",
                  f"--input={os.path.join(TESTDATA, 'python_docs_small.jsonl.gz')}",
                  f"--vocab_dir={HF_TINY}", f"--output_dir={out}", "--max_seq_len=64",
                  "--num_shards=1", "--validation_fraction=0.1", "--overwrite", "--noprogress"],
                 cwd=REPO, check=True, capture_output=True)
  return out
