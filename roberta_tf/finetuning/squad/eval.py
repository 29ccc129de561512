"""Exact match and F1 exactly as the official SQuAD evaluation scripts define them.

v1.1 (`evaluate-v1.1.py`): both answers normalized (lower case, punctuation and the articles
a/an/the removed, whitespace collapsed); EM = normalized strings equal; F1 = harmonic mean of
token precision and recall (bag of tokens), 0 when no token is shared; each question scores the
maximum over its gold answers; totals are percentages.

v2.0 (`evaluate-v2.0.py`): the same normalization; gold answers that normalize to "" are
dropped and a question with none left has the single gold answer "" (unanswerable); F1 is
1 when both sides have no tokens, 0 when only one side has none. The keys are the script's:
exact, f1, total, HasAns_exact/f1/total (answerable questions), NoAns_exact/f1/total
(unanswerable ones) and, given each question's no-answer score (its --na-prob-file),
best_exact, best_exact_thresh, best_f1, best_f1_thresh: the scores at the best no-answer
threshold (questions whose score exceeds it answer "", the others their best span).
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


# v2 scores (percent) a dev metric may be chosen from, besides exact_match and f1.
V2_KEYS = ("exact", "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1", "best_exact",
           "best_f1")


def best_threshold(span_scores: Mapping[str, float], has_answer: Mapping[str, bool],
                   span_predictions: Mapping[str, str], na_scores: Mapping[str, float]
                   ) -> tuple[float, float]:
  """evaluate-v2.0.py's find_best_thresh: (best score in percent, its threshold). Questions in
  increasing no-answer score are answered with their span one by one; the running score counts
  unanswerable questions as right until answered (a non-empty span costs 1)."""
  score = best = sum(1 for q in span_scores if not has_answer[q])
  threshold = 0.0
  for qid in sorted(na_scores, key=lambda q: na_scores[q]):
    if qid not in span_scores:
      continue
    if has_answer[qid]:
      score += span_scores[qid]
    elif span_predictions[qid]:
      score -= 1
    if score > best:
      best, threshold = score, na_scores[qid]
  return 100.0 * best / len(span_scores), float(threshold)


def evaluate(gold: Mapping[str, Sequence[str]], predictions: Mapping[str, str],
             version_2: bool, na_scores: Mapping[str, float] | None = None,
             span_predictions: Mapping[str, str] | None = None) -> dict[str, float]:
  """Scores predictions against gold answers.

  Args:
    gold: question id -> its gold answer texts (empty for an unanswerable v2 question).
    predictions: question id -> predicted text ("" = no answer). A question without a
      prediction scores 0 (the scripts print a warning and do the same).
    version_2: use the v2.0 rules (no-answer) instead of v1.1's.
    na_scores: v2: question id -> its no-answer score (higher: more likely unanswerable).
    span_predictions: v2, with na_scores: question id -> its best non-empty span.
  Returns:
    v1.1: {"exact_match", "f1", "total"} in percent / count, as evaluate-v1.1.py prints them.
    v2.0: evaluate-v2.0.py's keys in its order (see the module docstring; HasAns_*/NoAns_* for
    the subsets that are non-empty, best_* with na_scores), then "exact_match" = "exact".
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

  def summary(ids, prefix="", exact_key="exact"):
    return {f"{prefix}{exact_key}": 100.0 * sum(exact[q] for q in ids) / len(ids),
            f"{prefix}f1": 100.0 * sum(f1[q] for q in ids) / len(ids),
            f"{prefix}total": float(len(ids))}

  if not version_2:
    return summary(list(gold), exact_key="exact_match")
  out = summary(list(gold))
  has_answer = {q: any(normalize_answer(a) for a in answers) for q, answers in gold.items()}
  has = [q for q in gold if has_answer[q]]
  no = [q for q in gold if not has_answer[q]]
  if has:
    out.update(summary(has, "HasAns_"))
  if no:
    out.update(summary(no, "NoAns_"))
  if na_scores is not None and span_predictions is not None:
    for name, score in (("exact", lambda p, a: float(exact_match(p, a))), ("f1", f1_v2)):
      raw = {q: max(score(span_predictions.get(q, ""), a)
                    for a in [a for a in gold[q] if normalize_answer(a)] or [""])
             for q in gold}
      out[f"best_{name}"], out[f"best_{name}_thresh"] = best_threshold(
          raw, has_answer, span_predictions, na_scores)
  out["exact_match"] = out["exact"]
  return out
