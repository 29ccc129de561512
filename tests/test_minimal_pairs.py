"""Minimal pairs (BLiMP): the reader, pseudo-log-likelihood against a brute-force scorer,
`evaluate --minimal_pairs` end to end, and the SavedModel's `score` signature against an
independent NumPy scorer that only uses the `mlm_logits` signature."""

import gzip
import json
import os
import uuid

import keras
import numpy as np
import pytest
import tensorflow as tf

from roberta_tf import models
from roberta_tf.common import files
from roberta_tf.data import minimal_pairs
from roberta_tf.models.pseudo_log_likelihood import pll_scores
from tests import finetune_fixtures as fx
from tests.conftest import REPO
from tests.harness import call_module, tiny_config

SAMPLE = os.path.join(REPO, "tests", "testdata", "blimp", "blimp_sample.jsonl")


def test_reader_keeps_blimps_fields_and_names_bad_lines(tmp_path):
  pairs = minimal_pairs.read(SAMPLE)
  assert len(pairs) == 134 and len({p.paradigm for p in pairs}) == 67
  assert len({p.phenomenon for p in pairs}) == 13
  assert pairs[0] == minimal_pairs.MinimalPair(
      "Who should Derek hug after shocking Richard?", "Who should Derek hug Richard after "
      "shocking?", "adjunct_island", "island_effects")
  gz = tmp_path / "pairs.jsonl.gz"
  with open(SAMPLE, "rb") as src, gzip.open(gz, "wb") as dst:
    dst.write(src.read())
  assert minimal_pairs.read(str(gz)) == pairs
  bad = tmp_path / "bad.jsonl"
  bad.write_text('{"sentence_good": "a", "sentence_bad": "b"}\n{"sentence_good": "a"}\n')
  with pytest.raises(minimal_pairs.MinimalPairsError, match=r"bad.jsonl:2: no text in "
                                                             r"'sentence_bad'"):
    minimal_pairs.read(str(bad))
  bad.write_text('{"sentence_good": "a", "sentence_bad": "b"}\nnot json\n')
  with pytest.raises(minimal_pairs.MinimalPairsError, match=r"bad.jsonl:2: invalid JSON"):
    minimal_pairs.read(str(bad))
  with pytest.raises(minimal_pairs.MinimalPairsError, match="no such file"):
    minimal_pairs.read(str(tmp_path / "missing.jsonl"))


def test_reader_on_a_url():
  """A file, a gzipped file and a directory of them on TF's in-memory ram:// (a URL, as
  gs://... is) read as the local file does; errors name the URL."""
  pairs = minimal_pairs.read(SAMPLE)
  root = f"ram://minimal-pairs-{uuid.uuid4().hex[:8]}"
  try:
    files.makedirs(files.join(root, "dir"))
    files.copy(SAMPLE, files.join(root, "dir", "a.jsonl"))
    with files.open(files.join(root, "dir", "b.jsonl.gz"), "wb") as f:
      f.write(gzip.compress(files.read_bytes(SAMPLE)))
    with files.open(files.join(root, "dir", "notes.txt"), "w") as f:
      f.write("not read")
    assert minimal_pairs.read(files.join(root, "dir", "a.jsonl")) == pairs
    assert minimal_pairs.read(files.join(root, "dir", "b.jsonl.gz")) == pairs
    assert minimal_pairs.read(files.join(root, "dir")) == pairs + pairs
    assert minimal_pairs.read(files.join(root, "dir"), per_paradigm=1) == minimal_pairs.sample(
        pairs + pairs, 1)
    with pytest.raises(minimal_pairs.MinimalPairsError, match=f"{root}/none.jsonl: no such file"):
      minimal_pairs.read(files.join(root, "none.jsonl"))
    with files.open(files.join(root, "bad.jsonl"), "w") as f:
      f.write('{"sentence_good": "a", "sentence_bad": "b"}\nnot json\n')
    with pytest.raises(minimal_pairs.MinimalPairsError, match=f"{root}/bad.jsonl:2: invalid"):
      minimal_pairs.read(files.join(root, "bad.jsonl"))
  finally:
    files.rmtree(root, ignore_errors=True)


def test_a_fixed_sample_per_paradigm():
  pairs = minimal_pairs.read(SAMPLE)  # 2 pairs of each of 67 paradigms
  one = minimal_pairs.read(SAMPLE, per_paradigm=1)
  assert len(one) == 67 and {p.paradigm for p in one} == {p.paradigm for p in pairs}
  assert one == minimal_pairs.read(SAMPLE, per_paradigm=1)  # the same pairs every time
  assert [p for p in pairs if p in one] == one  # in file order
  others = [minimal_pairs.read(SAMPLE, per_paradigm=1, seed=s) for s in range(1, 6)]
  assert any(o != one for o in others)
  assert minimal_pairs.read(SAMPLE, per_paradigm=5) == pairs  # fewer than asked: all
  # A paradigm's draw does not depend on the other paradigms in the file.
  first = [p for p in pairs if p.paradigm == pairs[0].paradigm]
  assert minimal_pairs.sample(first, 1) == [p for p in one if p.paradigm == pairs[0].paradigm]


def test_summary_counts_a_tie_as_wrong():
  pairs = [minimal_pairs.MinimalPair("g", "b", "p1", "x"),
           minimal_pairs.MinimalPair("g", "b", "p1", "x"),
           minimal_pairs.MinimalPair("g", "b", "p2", "y")]
  result = minimal_pairs.summarize(pairs, [-1.0, -2.0, -3.0], [-2.0, -2.0, -1.0])
  assert result == {"accuracy": 1 / 3, "pairs": 3, "by_phenomenon": {"x": 0.5, "y": 0.0},
                    "by_paradigm": {"p1": 0.5, "p2": 0.0}}


def _brute_force_pll(model, ids, mask, mask_id):
  totals = []
  for b in range(len(ids)):
    total, length = 0.0, int(mask[b].sum())
    for j in range(1, length - 1):
      copy = ids[b:b + 1].copy()
      copy[0, j] = mask_id
      logits = model.full_logits(copy, mask[b:b + 1]).numpy()[0, j].astype(np.float64)
      total += logits[ids[b, j]] - np.log(np.exp(logits - logits.max()).sum()) - logits.max()
    totals.append(total)
  return np.array(totals)


@pytest.mark.parametrize("rows_per_pass", [256, 2])
def test_pll_is_the_sum_of_each_token_masked_in_turn(rows_per_pass):
  keras.utils.set_random_seed(0)
  model = models.RobertaPretrainer(tiny_config(vocab_size=60, max_seq_len=16))
  ids = np.array([[0, 5, 6, 7, 2, 1], [0, 9, 2, 1, 1, 1], [0, 2, 1, 1, 1, 1]], np.int32)
  mask = (ids != 1).astype(np.int32)
  pll, n = pll_scores(model, ids, mask, mask_id=59, rows_per_pass=rows_per_pass)
  np.testing.assert_allclose(pll.numpy(), _brute_force_pll(model, ids, mask, 59), atol=1e-4)
  assert n.numpy().tolist() == [3, 1, 0] and pll.numpy()[2] == 0.0


@pytest.fixture(scope="module")
def model_dir(hf_tiny_dir, tmp_path_factory):
  return fx.pretrained_model_dir(hf_tiny_dir, str(tmp_path_factory.mktemp("blimp") / "model"))


@pytest.mark.slow
def test_evaluate_minimal_pairs_end_to_end_and_the_score_signature(model_dir, tmp_path):
  r = call_module("roberta_tf.evaluate", f"--model_dir={model_dir}", f"--minimal_pairs={SAMPLE}")
  assert r.returncode == 0, r.stderr[-3000:]
  result = json.loads(r.stdout.strip().splitlines()[-1])
  assert result["pairs"] == 134 and 0.0 <= result["accuracy"] <= 1.0
  assert len(result["by_phenomenon"]) == 13 and len(result["by_paradigm"]) == 67
  # TensorBoard got the accuracy (its own reader).
  from tensorboard.backend.event_processing import event_accumulator  # pylint: disable=import-outside-toplevel
  acc = event_accumulator.EventAccumulator(os.path.join(model_dir, "eval"),
                                           size_guidance={"tensors": 0})
  acc.Reload()
  value = tf.make_ndarray(acc.Tensors("blimp/accuracy")[-1].tensor_proto)
  assert float(value) == pytest.approx(result["accuracy"])
  r = call_module("roberta_tf.evaluate", f"--model_dir={model_dir}", f"--minimal_pairs={SAMPLE}",
                  "--pairs_per_paradigm=1", "--json")
  assert r.returncode == 0, r.stderr[-3000:]
  sampled = json.loads(r.stdout.strip().splitlines()[-1])
  assert sampled["pairs"] == 67 and len(sampled["by_paradigm"]) == 67

  export_dir = str(tmp_path / "saved_model")
  r = call_module("roberta_tf.export", f"--model_dir={model_dir}", f"--export_dir={export_dir}")
  assert r.returncode == 0, r.stderr[-3000:]
  loaded = tf.saved_model.load(export_dir)
  pairs = minimal_pairs.read(SAMPLE)[::4]  # 34 pairs: the independent scorer is slow
  texts = [p.good for p in pairs] + [p.bad for p in pairs]
  scored = loaded.signatures["score"](text=tf.constant(texts))
  ids = loaded.signatures["tokenize"](text=tf.constant(texts))
  mask_id = json.load(open(os.path.join(model_dir, "vocab.json"), encoding="utf-8"))["<mask>"]
  independent = []
  for row, mask in zip(ids["input_ids"].numpy(), ids["padding_mask"].numpy(), strict=True):
    n = int(mask.sum())
    copies = np.repeat(row[None, :n], n - 2, axis=0)
    copies[np.arange(n - 2), np.arange(1, n - 1)] = mask_id
    logits = loaded.signatures["mlm_logits"](
        input_ids=tf.constant(copies), padding_mask=tf.ones_like(copies))["logits"].numpy()
    picked = logits[np.arange(n - 2), np.arange(1, n - 1)].astype(np.float64)
    logp = picked - np.log(np.exp(picked - picked.max(-1, keepdims=True)).sum(-1,
                                                                          keepdims=True))
    logp -= picked.max(-1, keepdims=True)
    independent.append(logp[np.arange(n - 2), row[1:n - 1]].sum())
  np.testing.assert_allclose(scored["pll"].numpy(), independent, atol=2e-3)
  k = len(pairs)
  mine = minimal_pairs.summarize(pairs, scored["pll"].numpy()[:k], scored["pll"].numpy()[k:])
  theirs = minimal_pairs.summarize(pairs, independent[:k], independent[k:])
  by_uid = {p.paradigm: result["by_paradigm"][p.paradigm] for p in pairs}
  assert abs(mine["accuracy"] - theirs["accuracy"]) <= 0.02, (mine, theirs, by_uid)
