"""What a fine-tuned model remembers of its problem (`ProblemInfo`, in the model dir's
config.json under "task": the key keeps its name, as the --task flag does).

TF-free: the model dir's readers and the SavedModel's export need it, not the problems' data.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from roberta_tf.finetuning import problem_types
from roberta_tf.finetuning.tagging import tag_scores


@dataclasses.dataclass(frozen=True)
class ProblemInfo:
  """What using a fine-tuned model needs besides its weights.

  Attributes:
    task_type: one of problem_types.PROBLEM_TYPES.
    max_seq_len: the longest input, special tokens included.
    labels: classification: the class names in id order.
    text_fields: classification/regression: the input fields (1: single texts, 2: pairs).
    num_choices: multiple choice: options per question.
    max_query_len, doc_stride, max_answer_len, n_best_size, version_2,
    null_score_threshold: extractive QA (see squad/features.py and squad/decode.py).
    answer_classifier: SQuAD v2: the paper's answerability classifier on `<s>` (trained jointly,
      its loss summed with the span loss) decides "no answer"; False: BERT's null span score.
    tag_scheme: token classification: the tags' scheme (tag_scores.SCHEMES: IOB1, IOB2,
      IOBES, BILOU, or plain: tags without prefixes, e.g. parts of speech), which entity
      scoring uses; labels: the tags in id order.
    label_all_pieces: token classification: every piece of a word carries its tag in training
      (HF's label_all_tokens); False: only the first piece (the others are ignored by the loss).
    doc_stride also spaces a long sentence's windows (token classification).
    pooling: embedding: problem_types.MEAN or CLS (heads.pool).
  """
  task_type: str
  max_seq_len: int
  labels: tuple[str, ...] = ()
  text_fields: tuple[str, ...] = ()
  num_choices: int = 0
  max_query_len: int = 64
  doc_stride: int = 128
  max_answer_len: int = 30
  n_best_size: int = 20
  version_2: bool = False
  null_score_threshold: float = 0.0
  answer_classifier: bool = False
  tag_scheme: str = ""
  label_all_pieces: bool = False
  pooling: str = problem_types.MEAN

  @property
  def num_outputs(self) -> int:
    if self.task_type in (problem_types.CLASSIFICATION, problem_types.TOKEN_CLASSIFICATION):
      return len(self.labels)
    return 1

  def metric_names(self) -> tuple[str, ...]:
    if self.task_type == problem_types.CLASSIFICATION:
      return ("accuracy", "mcc", "f1" if len(self.labels) == 2 else "macro_f1")
    if self.task_type == problem_types.REGRESSION:
      return ("pearson", "spearman", "mse")
    if self.task_type == problem_types.MULTIPLE_CHOICE:
      return ("accuracy",)
    if self.task_type == problem_types.EMBEDDING:
      return ("ndcg_at_10", "mrr_at_10", "recall_at_100")
    if self.task_type == problem_types.TOKEN_CLASSIFICATION:
      return tag_scores.metric_names(self.labels, self.tag_scheme)
    return ("exact_match", "f1")

  def to_dict(self) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v
            for k, v in dataclasses.asdict(self).items()}

  @classmethod
  def from_dict(cls, values: dict[str, Any]) -> ProblemInfo:
    values = dict(values)
    for key in ("labels", "text_fields"):
      values[key] = tuple(values.get(key, ()))
    return cls(**values)
