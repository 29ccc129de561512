"""The model's start/end logits over SQuAD features decoded into each question's answer.

Decoding a question: every feature's spans (start <= end, at most `max_answer_len` tokens,
inside the window, starting at a token whose "max context" window this is -- the window where
it has the most context on both sides, the first on a tie) score start_logit + end_logit; the
n-best come from all windows. v2 decides "no answer" one of two ways:
- BERT's null span: the no-answer score is the lowest `<s>` start+end score over the windows,
  and "" is predicted when it beats the best span's by more than the threshold;
- the paper's answerability classifier (RoBERTa, Sec. 5.2; `answerable_logits`, one logit per
  window from the `<s>` vector, trained jointly): the no-answer score is minus the highest
  window logit (the window most sure to hold the answer decides), and "" is predicted when it
  exceeds the threshold (0: the classifier's probability of an answer is below 1/2).
The features and the token -> text mapping are features.py's; tf_ops.py decodes the
same way in TF ops for the SavedModel.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from roberta_tf.finetuning.squad.features import SquadFeatures, TokenizedContext
from roberta_tf.finetuning.squad.read import SquadExample


@dataclasses.dataclass(frozen=True)
class Candidate:
  text: str
  score: float
  start_char: int
  end_char: int


class Answers(NamedTuple):
  """`decode`'s result, per question id: `predictions` the answer text ("" for no answer),
  `nbest` the candidates best first (distinct texts), `null_scores` the no-answer score."""
  predictions: dict[str, str]
  nbest: dict[str, list[Candidate]]
  null_scores: dict[str, float]


def best_spans(start_logits: np.ndarray, end_logits: np.ndarray, max_context: np.ndarray,
               max_answer_len: int, n: int) -> list[tuple[float, int, int]]:
  """The n best (score, first, last) spans of one window's context tokens.

  Args:
    start_logits, end_logits: float [window_len], the logits at the window's context tokens.
    max_context: bool [window_len] (spans must start at a max-context token).
  Returns:
    Up to n (start_logit + end_logit, first, last) with first <= last < first + max_answer_len,
    best first; indices are window-relative.
  """
  length = len(start_logits)
  if length == 0:
    return []
  scores = start_logits[:, None].astype(np.float64) + end_logits[None, :]
  i, j = np.meshgrid(np.arange(length), np.arange(length), indexing="ij")
  valid = (j >= i) & (j - i < max_answer_len) & max_context[:, None]
  flat = np.where(valid, scores, -np.inf).ravel()
  count = min(n, int(valid.sum()))
  if count == 0:
    return []
  top = np.argpartition(-flat, count - 1)[:count]
  top = top[np.lexsort((top, -flat[top]))]  # best first; ties: the earlier span
  return [(float(flat[t]), int(t // length), int(t % length)) for t in top]


def decode(examples: Sequence[SquadExample], features: SquadFeatures,
           contexts: Sequence[TokenizedContext], start_logits: Sequence[np.ndarray],
           end_logits: Sequence[np.ndarray], *, version_2: bool, n_best_size: int = 20,
           max_answer_len: int = 30, null_score_threshold: float = 0.0,
           answerable_logits: Sequence[float] | None = None) -> Answers:
  """Logits of every feature -> each question's answer (see the module docstring).

  Args:
    start_logits, end_logits: F float arrays (each at least the feature's length).
    answerable_logits: v2 with the answerability classifier: F floats (see the module
      docstring); None: BERT's null span score decides.
  """
  by_example: dict[int, list[int]] = {}
  for f, e in enumerate(features.example_index):
    by_example.setdefault(int(e), []).append(f)
  answers = Answers({}, {}, {})
  for e, example in enumerate(examples):
    candidates, null = [], np.inf
    for f in by_example.get(e, []):
      start, end = np.asarray(start_logits[f]), np.asarray(end_logits[f])
      null = min(null, float(start[0]) + float(end[0]) if answerable_logits is None
                 else -float(answerable_logits[f]))
      candidates += _window_candidates(features, f, start, end, max_answer_len, n_best_size)
    best = _distinct_best(candidates, contexts[e], example.context, n_best_size)
    answers.nbest[example.id] = best
    answers.null_scores[example.id] = null
    top_score = best[0].score if best else -np.inf
    margin = null - top_score if answerable_logits is None else null
    no_answer = not best or (version_2 and margin > null_score_threshold)
    answers.predictions[example.id] = "" if no_answer else best[0].text
  return answers


def _window_candidates(features: SquadFeatures, f: int, start: np.ndarray, end: np.ndarray,
                       max_answer_len: int, n: int) -> list[tuple[float, int, int]]:
  """Feature f's n best (score, first, last) spans, in context token positions."""
  lo, length = int(features.context_offset[f]), int(features.window_len[f])
  base = int(features.window_start[f])
  return [(score, base + first, base + last)
          for score, first, last in best_spans(start[lo:lo + length], end[lo:lo + length],
                                               features.max_context[f], max_answer_len, n)]


def _distinct_best(candidates: list[tuple[float, int, int]], context: TokenizedContext,
                   text: str, n: int) -> list[Candidate]:
  """The n best candidates with distinct texts, best first (a stable sort: on a tie, the
  earlier window's)."""
  candidates = sorted(candidates, key=lambda c: -c[0])
  seen, best = set(), []
  for score, first, last in candidates:
    s, t = context.char_span(first, last, text)
    answer = text[s:t]
    if answer not in seen:
      seen.add(answer)
      best.append(Candidate(answer, score, s, t))
    if len(best) == n:
      break
  return best
