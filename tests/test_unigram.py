"""The unigram baseline: exact counts from the shards, the evaluator's unigram perplexity, and
the plateau rule that training warns with."""

import math
import uuid

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf.common import files
from roberta_tf.data import dataset_info, unigram
from roberta_tf.pretraining import mlm_evaluation

SPECIAL = (0, 1, 2, 3, 7999)


def _all_ids(shards):
  info = dataset_info.read(shards)
  ids = []
  for path in dataset_info.split_files(shards, info, "train"):
    for record in tf.data.TFRecordDataset(path):
      example = tf.train.Example.FromString(record.numpy())
      ids.extend(example.features.feature["input_ids"].int64_list.value)
  return np.array(ids)


def test_counts_are_exact_and_skip_special_ids(train_shards):
  ids = _all_ids(train_shards)
  counts = unigram.token_counts(train_shards, 8000, SPECIAL)
  expected = np.bincount(ids, minlength=8000)
  expected[list(SPECIAL)] = 0
  np.testing.assert_array_equal(counts, expected)
  assert counts.sum() == np.isin(ids, SPECIAL, invert=True).sum()


def test_bounded_sample_stops_within_one_read_batch_of_the_cap(train_shards):
  full = unigram.token_counts(train_shards, 8000, SPECIAL).sum()
  counts = unigram.token_counts(train_shards, 8000, SPECIAL, max_tokens=1000)
  # Reads 256 records (<= 64 ids each, 2 of them special) at a time.
  assert 1000 - 2 * 256 <= counts.sum() <= 256 * 62 < full


def test_shards_on_a_url(train_shards):
  """dataset_info.json and the shards on TF's in-memory ram:// (a URL, as gs://... is): the
  same info and counts as on disk; the shard paths and a missing shard's message stay URLs."""
  root = f"ram://unigram-{uuid.uuid4().hex[:8]}/shards"
  try:
    files.copy_tree(train_shards, root)
    info = dataset_info.read(root)
    assert info == dataset_info.read(train_shards)
    shards = dataset_info.split_files(root, info, "train")
    assert shards == [f"{root}/{s['file']}" for s in info["splits"]["train"]["shards"]]
    np.testing.assert_array_equal(unigram.token_counts(root, 8000, SPECIAL, max_tokens=5000),
                                  unigram.token_counts(train_shards, 8000, SPECIAL,
                                                       max_tokens=5000))
    files.remove(shards[0])
    with pytest.raises(dataset_info.DatasetInfoError, match=f"shard {shards[0]} listed in "
                                                            f"{root}/dataset_info.json is missing"):
      dataset_info.split_files(root, info, "train")
    with pytest.raises(dataset_info.DatasetInfoError, match=f"{root}/none/dataset_info.json "
                                                            "not found"):
      dataset_info.read(files.join(root, "none"))
  finally:
    files.rmtree(files.dirname(root), ignore_errors=True)


def test_log_probs_are_add_one_smoothed_over_non_special_ids():
  counts = np.array([0, 0, 5, 3, 0, 1])
  logp = unigram.log_probs(counts, special_ids=(0, 1))
  expected = np.array([6, 4, 1, 2]) / 13  # ids 2..5: counts + 1, special ids get nothing
  np.testing.assert_allclose(np.exp(logp[2:]), expected, rtol=1e-6)
  assert np.exp(logp[:2]).max() < 1e-20




def test_evaluator_scores_the_same_targets_by_their_unigram_probability():
  vocab = 6
  logp = np.log(np.array([1e-9, 1e-9, 0.5, 0.25, 0.125, 0.125])).astype(np.float32)

  def model(inputs, training=False):
    del training
    batch, preds = inputs["mask_positions"].shape
    return tf.zeros([batch, preds, vocab])  # uniform: perplexity == vocab

  evaluator = mlm_evaluation.Evaluator(tf.distribute.get_strategy(), model, unigram_log_probs=logp)
  batch = {"input_ids": tf.zeros([2, 4], tf.int32), "padding_mask": tf.ones([2, 4], tf.int32),
           "mask_positions": tf.zeros([2, 2], tf.int32),
           "mask_ids": tf.constant([[2, 3], [4, 5]], tf.int32),
           "mask_weights": tf.constant([[1.0, 1.0], [1.0, 0.0]])}
  metrics = evaluator([batch])
  assert metrics["perplexity"] == pytest.approx(vocab, rel=1e-5)
  # Targets 2, 3, 4 (the fourth slot is empty): mean NLL = (ln 2 + ln 4 + ln 8) / 3.
  assert metrics["unigram_perplexity"] == pytest.approx(math.exp(math.log(64) / 3), rel=1e-5)
  line = mlm_evaluation.eval_line("eval step 5", metrics)
  assert line.endswith("| unigram perplexity 4.00 (1.50x unigram)"), line


@pytest.mark.parametrize("ppl, step, warmup, expected", [
    (1000.0, 300, 60, True),    # within 5% of 1040, long after warmup
    (980.0, 300, 60, False),    # 0.94x: has left the plateau
    (1000.0, 150, 60, False),   # too early: before step 200
    (1000.0, 2000, 1000, False),  # too early: before 3 x warmup
    (1000.0, 3000, 1000, True),
])
def test_plateau_rule(ppl, step, warmup, expected):
  metrics = {"perplexity": ppl, "unigram_perplexity": 1040.0}
  assert mlm_evaluation.on_unigram_plateau(metrics, step, warmup) is expected
  assert not mlm_evaluation.on_unigram_plateau({"perplexity": ppl}, step, warmup)
