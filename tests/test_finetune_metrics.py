"""Fine-tuning metrics and the official SQuAD EM/F1, against hand-computed values."""

import math

import numpy as np
import pytest

from roberta_tf.finetuning import metrics
from roberta_tf.finetuning.squad import eval as squad_eval


def test_accuracy_and_binary_f1():
  assert metrics.accuracy([0, 1, 1, 0], [0, 1, 0, 0]) == 0.75
  # tp=2 fp=1 fn=1: F1 = 2*2 / (2*2 + 1 + 1)
  assert metrics.f1([1, 1, 0, 0, 1], [1, 0, 0, 1, 1]) == pytest.approx(4 / 6)
  assert metrics.f1([0, 0], [0, 0]) == 0.0  # no positive anywhere


def test_binary_mcc():
  # tp=2 tn=1 fp=1 fn=1: (2*1 - 1*1) / sqrt(3*3*2*2) = 1/6
  got = metrics.matthews_corrcoef([1, 1, 0, 0, 1], [1, 0, 0, 1, 1], 2)
  assert got == pytest.approx(1 / 6)
  assert metrics.matthews_corrcoef([1, 0, 1], [1, 0, 1], 2) == pytest.approx(1.0)
  assert metrics.matthews_corrcoef([1, 0, 1], [0, 1, 0], 2) == pytest.approx(-1.0)
  assert metrics.matthews_corrcoef([1, 0, 1], [1, 1, 1], 2) == 0.0  # constant prediction


def test_multiclass_mcc_and_macro_f1():
  labels, preds = [0, 0, 1, 1, 2, 2], [0, 1, 1, 1, 2, 0]
  # C = [[1,1,0],[0,2,0],[1,0,1]]: t=[2,2,2] p=[2,3,1] s=6 c=4
  # (4*6 - (2*2+3*2+1*2)) / sqrt((36-14) * (36-12)) = 12 / sqrt(528)
  assert metrics.matthews_corrcoef(labels, preds, 3) == pytest.approx(12 / math.sqrt(528))
  # per class F1: 2/4, 4/5, 2/3
  assert metrics.macro_f1(labels, preds, 3) == pytest.approx((0.5 + 0.8 + 2 / 3) / 3)
  out = metrics.classification_metrics(labels, preds, 3)
  assert sorted(out) == ["accuracy", "macro_f1", "mcc"]
  assert out["accuracy"] == pytest.approx(4 / 6)


def test_pearson_and_spearman_with_ties():
  # dx=[-1.5,-.5,.5,1.5] dy=[-3,-1,0,4]: 11 / sqrt(5 * 26)
  assert metrics.pearson([1, 2, 3, 4], [2, 4, 5, 9]) == pytest.approx(11 / math.sqrt(130))
  np.testing.assert_allclose(metrics.rankdata([1, 2, 2, 3]), [1, 2.5, 2.5, 4])
  # ranks x=[1,2.5,2.5,4] y=[1,3,2,4]: 4.5 / sqrt(4.5 * 5)
  assert metrics.spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(4.5 / math.sqrt(22.5))
  assert metrics.spearman([1, 2, 3, 4], [1, 4, 9, 16]) == pytest.approx(1.0)  # monotone
  assert metrics.pearson([1, 1, 1], [1, 2, 3]) == 0.0
  out = metrics.regression_metrics([0.0, 1.0, 2.0], [0.0, 1.0, 4.0])
  assert out["mse"] == pytest.approx(4 / 3)


def test_metrics_reject_mismatched_inputs():
  with pytest.raises(ValueError, match="same length"):
    metrics.accuracy([1, 2], [1])
  with pytest.raises(ValueError, match="non-empty"):
    metrics.accuracy([], [])


def test_squad_normalization_em_and_f1():
  assert squad_eval.normalize_answer("The  Quick, brown fox!") == "quick brown fox"
  assert squad_eval.exact_match("The Cat", "cat") == 1
  # pred [cat, sat], gold [cat, sat, down]: P=1, R=2/3
  assert squad_eval.f1_v1("the cat sat", "a cat sat down") == pytest.approx(0.8)
  assert squad_eval.f1_v1("", "cat") == 0.0
  assert squad_eval.f1_v1("dog", "cat") == 0.0
  assert squad_eval.f1_v2("", "") == 1.0
  assert squad_eval.f1_v2("the", "") == 1.0  # normalizes to no tokens on both sides
  assert squad_eval.f1_v2("cat", "") == 0.0


def test_squad_v2_evaluate_with_unanswerable_and_missing():
  gold = {"q1": ["cat", "a cat"], "q2": ["dog house"], "q3": [], "q4": ["x"]}
  preds = {"q1": "Cat", "q2": "house", "q3": ""}  # q4 unpredicted: scores 0
  out = squad_eval.evaluate(gold, preds, version_2=True)
  # q1: 1/1; q2: EM 0, F1 2*(1*.5)/1.5 = 2/3; q3: 1/1; q4: 0/0
  assert out["exact_match"] == pytest.approx(100 * 2 / 4)
  assert out["f1"] == pytest.approx(100 * (1 + 2 / 3 + 1) / 4)
  assert out["HasAns_total"] == 3 and out["NoAns_total"] == 1
  assert out["HasAns_f1"] == pytest.approx(100 * (1 + 2 / 3) / 3)
  assert out["NoAns_exact"] == 100.0


def test_squad_v1_evaluate_takes_the_best_gold_answer():
  gold = {"a": ["Denver Broncos", "the Broncos"], "b": ["1990"]}
  out = squad_eval.evaluate(gold, {"a": "Broncos", "b": "in 1990"}, version_2=False)
  # a: EM 1 (vs "the Broncos"); b: EM 0, F1 2*(.5*1)/1.5
  assert out == pytest.approx({"exact_match": 50.0, "f1": 100 * (1 + 2 / 3) / 2, "total": 2.0})


def test_squad_v2_keys_and_best_threshold_as_the_official_script():
  gold = {"q1": ["cat"], "q2": ["dog"], "q3": [], "q4": [""]}
  spans = {"q1": "cat", "q2": "bird", "q3": "x", "q4": "y"}   # each question's best span
  na_scores = {"q1": -2.0, "q2": 0.5, "q3": 1.0, "q4": -1.0}  # higher: more likely no answer
  predictions = {"q1": "cat", "q2": "", "q3": "", "q4": "y"}  # after the model's own decision
  out = squad_eval.evaluate(gold, predictions, version_2=True, na_scores=na_scores,
                            span_predictions=spans)
  assert list(out) == ["exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total",
                       "NoAns_exact", "NoAns_f1", "NoAns_total", "best_exact",
                       "best_exact_thresh", "best_f1", "best_f1_thresh", "exact_match"]
  assert out["exact"] == out["exact_match"] == 50.0 and out["NoAns_exact"] == 50.0
  # find_best_thresh: start at 2 (the unanswerable ones right); by na score: q1 +1 (3, best,
  # threshold -2), q4 answered "y" -1, q2 wrong +0, q3 answered "x" -1.
  assert out["best_exact"] == 75.0 and out["best_exact_thresh"] == -2.0
  assert out["best_f1"] == 75.0 and out["best_f1_thresh"] == -2.0
