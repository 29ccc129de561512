"""roberta_tf.inspect_data: decoded masked sequences and masking statistics, library and CLI."""

import json
import os
import re
import shutil
import uuid

import pytest
import tensorflow as tf
import tokenizers

from data_prep.shard_builder import build_shards
from data_prep.shard_settings import ShardSettings
from roberta_tf import inspect_data as inspect_lib
from roberta_tf.common import files
from roberta_tf.data import dataset_info, example_spec
from roberta_tf.data.masking import MaskingConfig
from tests.conftest import HF_TINY, REPO, TESTDATA
from tests.harness import call_module


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
  out = str(tmp_path_factory.mktemp("shards"))
  build_shards(ShardSettings(
      input=os.path.join(TESTDATA, "python_docs_small.jsonl.gz"), vocab_dir=HF_TINY,
      output_dir=out, max_seq_len=64, num_shards=2, validation_fraction=0.0, encoder="hf",
      overwrite=True, progress=False))
  return out


def hf_decoded_records(data_dir):
  """Every train record decoded by Hugging Face tokenizers (the peer), specials kept."""
  hf = tokenizers.ByteLevelBPETokenizer(os.path.join(HF_TINY, "vocab.json"),
                                        os.path.join(HF_TINY, "merges.txt"))
  hf.add_special_tokens(["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
  info = dataset_info.read(data_dir)
  return {hf.decode(example_spec.parse(r).numpy().tolist(), skip_special_tokens=False)
          for f in dataset_info.split_files(data_dir, info, "train")
          for r in tf.data.TFRecordDataset(f)}


def test_report_decodes_like_the_peer_and_measures_the_masking(shards):
  report = inspect_lib.inspect_data(shards, num_batches=6, batch_size=8, seed=1,
                                    masking=MaskingConfig(whole_word=True), num_examples=4)
  st = report["statistics"]
  assert st["sequences"] == 48 and report["max_predictions_per_seq"] == 16
  assert 0.10 < st["selection_rate"] < 0.20
  assert abs(st["mask_fraction"] + st["random_fraction"] + st["keep_fraction"] - 1) < 1e-9
  assert 0 < st["padding_fraction"] < 0.5
  assert st["tokens_per_sequence"] == pytest.approx(st["tokens"] / 48)
  assert st["max_predictions_used"] <= 16
  assert len(report["examples"]) == 4
  originals = hf_decoded_records(shards)
  for ex in report["examples"]:
    assert ex["original"] in originals  # the vocab_dir recorded by data_prep was found
    assert ex["masked"].startswith("<s>") and ex["masked"].endswith("</s>")
    shown_as_mask = sum(p["input"] == "<mask>" for p in ex["predictions"])
    assert ex["masked"].count("<mask>") == shown_as_mask
  assert any("<mask>" in ex["masked"] for ex in report["examples"])


def test_decodes_with_the_vocab_copied_beside_the_shards(tmp_path):
  """The recorded vocab_dir gone (or changed), the copy data_prep put beside the shards decodes."""
  vocab_dir = tmp_path / "vocab"
  vocab_dir.mkdir()
  for name in ("vocab.json", "merges.txt"):
    shutil.copy(os.path.join(HF_TINY, name), vocab_dir)
  out = str(tmp_path / "shards")
  build_shards(ShardSettings(
      input=os.path.join(TESTDATA, "python_docs_small.jsonl.gz"), vocab_dir=str(vocab_dir),
      output_dir=out, max_seq_len=64, num_shards=1, validation_fraction=0.0, encoder="hf",
      progress=False))
  shutil.rmtree(vocab_dir)
  report = inspect_lib.inspect_data(out, num_batches=1, batch_size=2, num_examples=1)
  assert report["decoder"] == os.path.join(out, "vocab.json")
  assert report["examples"][0]["original"] in hf_decoded_records(out)


def run_cli(*args):
  return call_module("roberta_tf.inspect_data", *args)


@pytest.mark.slow
def test_cli_prints_json_and_fails_clearly_on_bad_data(shards, tmp_path):
  done = run_cli(f"--data={shards}", "--num_batches=3", "--seed=2", "--json",
                 f"--vocab_dir={HF_TINY}", "--num_examples=1")
  assert done.returncode == 0, done.stderr
  report = json.loads(done.stdout)
  assert report["batches"] == 3 and report["seed"] == 2
  assert report["statistics"]["sequences"] == 24
  assert len(report["examples"]) == 1
  bad = run_cli(f"--data={tmp_path}")
  assert bad.returncode != 0
  assert f"{tmp_path}/dataset_info.json not found" in bad.stderr
  # A truncated shard: a one-line error naming it, no traceback.
  damaged = tmp_path / "damaged"
  shutil.copytree(shards, damaged)
  shard = damaged / "train-00000-of-00002.tfrecord"
  shard.write_bytes(shard.read_bytes()[:shard.stat().st_size // 2])
  bad = run_cli(f"--data={damaged}", "--num_batches=100")
  assert bad.returncode != 0
  assert f"error: shard {shard} is truncated or corrupt:" in bad.stderr, bad.stderr[-2000:]
  assert "Traceback" not in bad.stderr


def test_cli_on_a_url_reports_what_it_reports_on_disk(shards):
  """--data and --vocab_dir on TF's in-memory ram:// (a URL, as gs://... is): the same report
  as for the local shards (the vocab copied beside them found there too), naming the URLs."""
  repo_before = set(os.listdir(REPO))
  root = f"ram://inspect-{uuid.uuid4().hex[:8]}"
  try:
    files.copy_tree(shards, files.join(root, "shards"))
    files.makedirs(files.join(root, "vocab"))
    for name in ("vocab.json", "merges.txt"):
      files.copy(os.path.join(HF_TINY, name), files.join(root, "vocab", name))
    args = ("--num_batches=2", "--batch_size=4", "--seed=3", "--json", "--num_examples=1")
    reports = []
    for data, vocab in ((f"{root}/shards", f"{root}/vocab"), (shards, HF_TINY)):
      done = run_cli(f"--data={data}", f"--vocab_dir={vocab}", *args)
      assert done.returncode == 0, done.stderr[-3000:]
      report = json.loads(done.stdout)
      assert report.pop("data") == data
      assert report.pop("decoder") == files.join(vocab, "vocab.json")
      reports.append(report)
    assert reports[0] == reports[1]
    beside = inspect_lib.inspect_data(f"{root}/shards", num_batches=1, batch_size=2,
                                      num_examples=1)  # the vocab data_prep copied there
    assert beside["decoder"] == f"{root}/shards/vocab.json" and beside["examples"]
  finally:
    files.rmtree(root, ignore_errors=True)
  assert set(os.listdir(REPO)) <= repo_before | {".pytest_cache"}


@pytest.mark.parametrize("flag", ["--data", "--vocab_dir"])
def test_an_unknown_scheme_is_one_error_line_naming_the_flag(flag, shards):
  given = {"--data": shards, "--vocab_dir": HF_TINY, flag: "nosuch://bucket/x"}
  bad = run_cli(*(f"{k}={v}" for k, v in given.items()))
  assert bad.returncode == 1
  assert re.fullmatch(rf"error: {flag}=nosuch://bucket/x: no file system handles 'nosuch://' "
                      r"here \(registered: .*ram://.*\n", bad.stderr), bad.stderr
