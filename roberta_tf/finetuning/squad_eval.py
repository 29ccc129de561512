"""Exact match and F1 exactly as the official SQuAD evaluation scripts define them.

v1.1 (`evaluate-v1.1.py`): both answers normalized (lower case, punctuation and the articles
a/an/the removed, whitespace collapsed); EM = normalized strings equal; F1 = harmonic mean of
token precision and recall (bag of tokens), 0 when no token is shared; each question scores the
maximum over its gold answers; totals are percentages.

v2.0 (`evaluate-v2.0.py`): the same normalization; gold answers that normalize to "" are
dropped and a question with none left has the single gold answer "" (unanswerable); F1 is
1 when both sides have no tokens, 0 when only one side has none. Also reported per subset:
HasAns_* (answerable questions) and NoAns_* (unanswerable ones).
"""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Mapping, Sequence

_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(s: str) -> str:
  """Lower text and remove punctuation, articles and extra whitespace (the scripts' order)."""
  s = s.lower()
  s = "".join(ch for ch in s if ch not in _PUNCTUATION)
  s = _ARTICLES.sub(" ", s)
  return " ".join(s.split())


def exact_match(prediction: str, ground_truth: str) -> int:
  return int(normalize_answer(prediction) == normalize_answer(ground_truth))


def f1_v1(prediction: str, ground_truth: str) -> float:
  """v1.1 token F1 (0 when nothing is shared, including an empty prediction)."""
  pred, gold = normalize_answer(prediction).split(), normalize_answer(ground_truth).split()
  same = sum((collections.Counter(pred) & collections.Counter(gold)).values())
  if same == 0:
    return 0.0
  precision, recall = same / len(pred), same / len(gold)
  return 2 * precision * recall / (precision + recall)


def f1_v2(prediction: str, ground_truth: str) -> float:
  """v2.0 token F1: an empty side scores 1 only if both are empty."""
  pred = normalize_answer(prediction).split() if prediction else []
  gold = normalize_answer(ground_truth).split() if ground_truth else []
  if not pred or not gold:
    return float(pred == gold)
  same = sum((collections.Counter(pred) & collections.Counter(gold)).values())
  if same == 0:
    return 0.0
  precision, recall = same / len(pred), same / len(gold)
  return 2 * precision * recall / (precision + recall)


def evaluate(gold: Mapping[str, Sequence[str]], predictions: Mapping[str, str],
             version_2: bool) -> dict[str, float]:
  """Scores predictions against gold answers.

  Args:
    gold: question id -> its gold answer texts (empty for an unanswerable v2 question).
    predictions: question id -> predicted text ("" = no answer). A question without a
      prediction scores 0 (the scripts print a warning and do the same).
    version_2: use the v2.0 rules (no-answer) instead of v1.1's.
  Returns:
    {"exact_match", "f1", "total"} in percent / count; v2 adds HasAns_exact, HasAns_f1,
    HasAns_total, NoAns_exact, NoAns_f1, NoAns_total (for the subsets that are non-empty).
  """
  if not gold:
    raise ValueError("SQuAD evaluation needs at least one question")
  exact, f1 = {}, {}
  for qid, answers in gold.items():
    prediction = predictions.get(qid)
    if version_2:
      answers = [a for a in answers if normalize_answer(a)] or [""]
    if prediction is None or not answers:
      exact[qid], f1[qid] = 0, 0.0
      continue
    score_f1 = f1_v2 if version_2 else f1_v1
    exact[qid] = max(exact_match(prediction, a) for a in answers)
    f1[qid] = max(score_f1(prediction, a) for a in answers)

  def summary(ids, prefix=""):
    return {f"{prefix}exact_match" if not prefix else f"{prefix}exact":
            100.0 * sum(exact[q] for q in ids) / len(ids),
            f"{prefix}f1": 100.0 * sum(f1[q] for q in ids) / len(ids),
            f"{prefix}total": float(len(ids))}

  out = summary(list(gold))
  if version_2:
    has = [q for q, answers in gold.items() if any(normalize_answer(a) for a in answers)]
    has_set = set(has)
    no = [q for q in gold if q not in has_set]
    if has:
      out.update(summary(has, "HasAns_"))
    if no:
      out.update(summary(no, "NoAns_"))
  return out
