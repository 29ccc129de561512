"""Shared pytest fixtures: paths to the copied reference data, quiet TF logs."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The checked-out workspace itself, through this file's real path. The same as REPO outside
# Bazel; under it, REPO is the runfiles tree (declared inputs only), and the tests that read
# files in place (every BUILD file, pyproject.toml, the requirements) use this.
SOURCE_TREE = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
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


# The longest test files (seconds, measured on 2 cores under `.ci/run`'s `-n 2 --dist loadfile`
# with `--junitxml`, summed per file: finetune_train 157, ablate 154, faults_across_processes 120,
# finetune_docs_sections 114, finetune_export 113, reliability 102, finetune_glue 78, quickstart
# 75, export 62, train_step 58, preemption_multi_worker 47, train_step_distributed 47) run
# first, so that no worker starts one of them last while the other sits idle. The order of tests
# inside a file is kept.
LONGEST_FIRST = ("test_storage_journey", "test_finetune_train", "test_ablate",
                 "test_faults_across_processes", "test_worker_share", "test_tpu_readiness",
                 "test_continued_pretraining",
                 "test_finetune_docs_sections", "test_finetune_export", "test_reliability",
                 "test_finetune_glue", "test_quickstart", "test_export", "test_train_step",
                 "test_preemption_multi_worker", "test_train_step_distributed")


def pytest_configure(config):
  # pytest-xdist's --dist loadfile otherwise hands out files by their number of tests, most
  # first, which put the one-test quickstart and docs_sections files last: one worker then ran
  # ~2 min alone (measured). Off, xdist keeps the collection order that
  # pytest_collection_modifyitems sets (the same as passing --no-loadscope-reorder).
  if hasattr(config.option, "loadscopereorder"):
    config.option.loadscopereorder = False


def pytest_collection_modifyitems(items):
  def rank(item):
    name = os.path.splitext(os.path.basename(str(item.path)))[0]
    return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)
  items.sort(key=rank)  # stable: the collection order otherwise
