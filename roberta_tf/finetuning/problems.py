"""Fine-tuning problems, one class per problem type: their data, their loss and dev metrics.

A `Problem` is the downstream data set and what is scored on it (the FineTuningTask in task.py
drives it through the loop); it gives the train step everything data-specific:
  train_dataset(batch_size, seed, update_size) -> tf.data of (inputs, labels), one shuffled
                                     epoch, batched as `batching` says (bucketing.py)
  eval_dataset(batch_size)        -> tf.data of inputs, the dev set(s) in file order
  loss_sum(outputs, labels)       -> float32 scalar, the SUM of per-example losses
  evaluate(batch_outputs)         -> an Evaluation: the dev metrics from the model outputs of
                                     eval_dataset (extractive QA: and the decoded answers)
A problem is whole when built: problem_loading.load_problem reads a run's data and passes
everything in (the batching, a GLUE preset and its test sets). What a fine-tuned model must
remember of its problem to be used again is its `ProblemInfo` (problem_info.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from roberta_tf.finetuning import bucketing, featurize, glue, metrics, problem_data, problem_types
from roberta_tf.finetuning.problem_info import ProblemInfo
from roberta_tf.finetuning.squad import decode as squad_decode
from roberta_tf.finetuning.squad import eval as squad_eval
from roberta_tf.finetuning.squad import features as squad_features
from roberta_tf.finetuning.squad import read as squad_read
from roberta_tf.tokenization import tokenizer as tokenizer_lib

# Metrics where lower is better; every other metric is maximized.
LOWER_IS_BETTER = ("mse",)
DEFAULT_METRIC = {problem_types.CLASSIFICATION: "accuracy", problem_types.REGRESSION: "pearson",
                  problem_types.MULTIPLE_CHOICE: "accuracy", problem_types.EXTRACTIVE_QA: "f1",
                  problem_types.TOKEN_CLASSIFICATION: "f1", problem_types.EMBEDDING: "ndcg_at_10"}


def is_better(metric: str, value: float, best: float | None) -> bool:
  if best is None:
    return True
  return value < best if metric in LOWER_IS_BETTER else value > best


@dataclasses.dataclass(frozen=True)
class Evaluation:
  """What scoring the dev set gives: `metrics`, name -> value (the names of metric_names());
  extractive QA also `answers`, the decoded answers (squad_decode.Answers: what
  squad_write.write_predictions writes); token classification `tags`, each sentence's
  predicted tags (what tag_write.write_predictions writes)."""
  metrics: dict[str, float]
  answers: squad_decode.Answers | None = None
  tags: list[list[str]] | None = None


def ragged_dataset(ids: tf.RaggedTensor, labels, pad_id: int) -> tf.data.Dataset:
  """(ids [N, None] or [N, C, None], labels) -> elements ({"input_ids", "padding_mask"}, label)
  with dense [L] or [C, L] inputs (the mask marks real tokens, whatever their id)."""
  def dense(x, y):
    if isinstance(x, tf.RaggedTensor):  # [C, None] rows of a multiple-choice example
      return {"input_ids": x.to_tensor(pad_id),
              "padding_mask": tf.ones_like(x, tf.int32).to_tensor(0)}, y
    return {"input_ids": x, "padding_mask": tf.ones_like(x, tf.int32)}, y
  return tf.data.Dataset.from_tensor_slices((ids, labels)).map(dense)


def _lengths(ids: tf.RaggedTensor) -> np.ndarray:
  """int [N]: each example's length in tokens (multiple choice: its longest option)."""
  if ids.ragged_rank == 2:
    return tf.reduce_max(ids.row_lengths(axis=2), axis=1).numpy()
  return ids.row_lengths().numpy()


class Problem:
  """Base class; see the module docstring. A subclass sets `_train` and `_eval` to
  (ids: int32 ragged [N, None] or [N, C, None], labels: a nest of [N] arrays).

  `batching` is how training batches are formed (bucketing.py; a run's --batching);
  `glue_preset` and `test_sets` are a GLUE preset's (glue.GluePreset, and its test sets:
  (leaderboard file, examples, indices), for the predictions of the kept model; else None, ()).
  """

  def __init__(self, info: ProblemInfo, pad_id: int, batching: str = bucketing.RANDOM,
               glue_preset: glue.GluePreset | None = None,
               test_sets: Sequence[tuple[str, list, list[str]]] = ()):
    self.info = info
    self.pad_id = pad_id
    self.batching = batching
    self.glue_preset, self.test_sets = glue_preset, list(test_sets)
    self._train = self._eval = None
    self.num_train = self.num_eval = 0

  def _padded_length(self) -> int | None:
    return self.info.max_seq_len if self.batching == bucketing.MAX_SEQ_LEN else None

  def train_dataset(self, batch_size: int, seed: int, update_size: int = 0) -> tf.data.Dataset:
    """One epoch in micro-batches of batch_size; update_size (default batch_size) examples
    make an update, the unit length buckets group (so the updates are the same whatever the
    split into micro-batches)."""
    ids, labels = self._train
    ladder = bucketing.length_ladder(self.info.max_seq_len)
    order = bucketing.train_order(_lengths(ids), update_size or batch_size, seed, self.batching,
                                  ladder)
    ds = ragged_dataset(tf.gather(ids, order),
                         tf.nest.map_structure(lambda a: np.asarray(a)[order], labels),
                         self.pad_id)
    return bucketing.batch(ds, batch_size, self.pad_id, self._padded_length(), ladder)

  def eval_dataset(self, batch_size: int) -> tf.data.Dataset:
    ds = ragged_dataset(*self._eval, self.pad_id)
    return bucketing.batch(ds, batch_size, self.pad_id, self._padded_length()).map(
        lambda inputs, labels: inputs)

  def metric_names(self) -> tuple[str, ...]:
    """The names evaluate() returns (the choices of --metric)."""
    return self.info.metric_names()

  def loss_sum(self, outputs, labels):
    raise NotImplementedError

  def loss_count(self, inputs, labels) -> tf.Tensor:
    """float32: what loss_sum sums over in a batch (here its examples); the train step divides
    the summed loss by the global batch's count."""
    del labels
    return tf.cast(tf.shape(inputs["input_ids"])[0], tf.float32)

  def evaluate(self, batch_outputs: list[dict[str, np.ndarray]]) -> Evaluation:
    raise NotImplementedError


def _cross_entropy_sum(labels, logits):
  return tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.cast(labels, tf.int32), logits=logits))


class SequenceProblem(Problem):
  """Classification or regression of single texts or text pairs.

  `extra_dev` adds dev sets scored beside the main one, their metric names prefixed (MNLI's
  mismatched set: "mismatched_accuracy", ...); the main dev set's metrics keep their names.
  """

  def __init__(self, info: ProblemInfo, tokenizer, train: Sequence[problem_data.TextExample],
               dev: Sequence[problem_data.TextExample], train_path: str = "",
               dev_path: str = "",
               extra_dev: Sequence[tuple[str, Sequence[problem_data.TextExample]]] = (), *,
               batching: str = bucketing.RANDOM, glue_preset: glue.GluePreset | None = None,
               test_sets: Sequence[tuple[str, list, list[str]]] = ()):
    super().__init__(info, tokenizer.pad_id, batching, glue_preset, test_sets)
    self._tokenizer = tokenizer
    self._train, self.num_train = self._features(train, train_path), len(train)
    dev_sets = [("", dev, dev_path), *((p, e, f"{p}dev") for p, e in extra_dev)]
    parts = [self._features(examples, path) for _, examples, path in dev_sets]
    self._eval = (tf.concat([ids for ids, _ in parts], axis=0),
                  np.concatenate([labels for _, labels in parts]))
    self.num_eval = sum(len(examples) for _, examples, _ in dev_sets)
    self._dev_sets = [(prefix, len(examples), labels)
                      for (prefix, examples, _), (_, labels) in zip(dev_sets, parts, strict=True)]

  def _labels(self, examples, path):
    if self.info.task_type == problem_types.REGRESSION:
      return np.asarray([e.label for e in examples], np.float32)
    return np.asarray(problem_data.label_ids(examples, self.info.labels, path), np.int32)

  def _ids(self, examples) -> tf.RaggedTensor:
    ids_a = featurize.tokenize(self._tokenizer, [e.text_a for e in examples])
    ids_b = (featurize.tokenize(self._tokenizer, [e.text_b for e in examples])
             if len(self.info.text_fields) == 2 else None)
    return featurize.build_inputs(ids_a, ids_b, self.info.max_seq_len, self._tokenizer.template)

  def _features(self, examples, path):
    return self._ids(examples), self._labels(examples, path)

  def predict_dataset(self, examples: Sequence[problem_data.TextExample],
                      batch_size: int) -> tf.data.Dataset:
    """Inputs of (unlabeled) examples in their order, batched like the dev set."""
    ids = self._ids(examples)
    dtype = np.float32 if self.info.task_type == problem_types.REGRESSION else np.int32
    ds = ragged_dataset(ids, np.zeros(len(examples), dtype), self.pad_id)
    return bucketing.batch(ds, batch_size, self.pad_id, self._padded_length()).map(
        lambda inputs, labels: inputs)

  def metric_names(self):
    return tuple(f"{prefix}{name}" for prefix, _, _ in self._dev_sets
                 for name in self.info.metric_names())

  def loss_sum(self, outputs, labels):
    if self.info.task_type == problem_types.REGRESSION:
      return tf.reduce_sum(tf.square(outputs["logits"] - tf.cast(labels, tf.float32)))
    return _cross_entropy_sum(labels, outputs["logits"])

  def evaluate(self, batch_outputs):
    logits = np.concatenate([b["logits"] for b in batch_outputs])
    out, start = {}, 0
    for prefix, count, labels in self._dev_sets:
      part = logits[start:start + count]
      start += count
      if self.info.task_type == problem_types.REGRESSION:
        scores = metrics.regression_metrics(labels, part)
      else:
        scores = metrics.classification_metrics(labels, part.argmax(-1), len(self.info.labels))
      out.update({f"{prefix}{k}": v for k, v in scores.items()})
    return Evaluation(out)


class MultipleChoiceProblem(Problem):
  """One `passage, question+option` pair per option (`<s> A </s></s> B </s>` with RoBERTa's
  files: the vocabulary's pair template), softmax over options."""

  def __init__(self, info: ProblemInfo, tokenizer, train: Sequence[problem_data.ChoiceExample],
               dev: Sequence[problem_data.ChoiceExample], batching: str = bucketing.RANDOM):
    super().__init__(info, tokenizer.pad_id, batching)
    for name, examples in (("training", train), ("dev", dev)):
      if len(examples[0].options) != info.num_choices:
        raise problem_data.ProblemDataError(
            f"the {name} questions have {len(examples[0].options)} options, the task "
            f"{info.num_choices}")
    self._train, self.num_train = self._features(tokenizer, train), len(train)
    self._eval, self.num_eval = self._features(tokenizer, dev), len(dev)
    self._dev_labels = np.asarray([e.label for e in dev], np.int32)

  def _features(self, tokenizer, examples) -> tf.data.Dataset:
    contexts = [e.context for e in examples for _ in e.options]
    seconds = [problem_data.option_text(e.question, o) for e in examples for o in e.options]
    ids = featurize.build_inputs(featurize.tokenize(tokenizer, contexts),
                                 featurize.tokenize(tokenizer, seconds), self.info.max_seq_len,
                                 tokenizer.template)
    ids = tf.RaggedTensor.from_uniform_row_length(ids, self.info.num_choices)  # [N, C, None]
    return ids, np.asarray([e.label for e in examples], np.int32)

  def loss_sum(self, outputs, labels):
    return _cross_entropy_sum(labels, outputs["logits"])

  def evaluate(self, batch_outputs):
    logits = np.concatenate([b["logits"] for b in batch_outputs])
    return Evaluation({"accuracy": metrics.accuracy(self._dev_labels, logits.argmax(-1))})


class ExtractiveQAProblem(Problem):
  """SQuAD: start/end logits over the feature's tokens, decoded back to context text."""

  def __init__(self, info: ProblemInfo, tokenizer, train: Sequence[squad_read.SquadExample],
               dev: Sequence[squad_read.SquadExample], batching: str = bucketing.RANDOM):
    super().__init__(info, tokenizer.pad_id, batching)
    self.byte_lengths = tokenizer_lib.token_byte_lengths(tokenizer.get_vocabulary())
    self._train, self.num_train, self.unlocated = self._features(tokenizer, train)[:3]
    self._eval, self.num_eval, _, self._dev_features, self._dev_contexts = self._features(
        tokenizer, dev)
    self._dev = list(dev)

  def _features(self, tokenizer, examples):
    features, contexts, unlocated = squad_features.featurize(
        examples, tokenizer, max_seq_len=self.info.max_seq_len,
        max_query_len=self.info.max_query_len, doc_stride=self.info.doc_stride,
        byte_lengths=self.byte_lengths)
    ids = tf.RaggedTensor.from_row_lengths(
        np.concatenate(features.input_ids), [len(x) for x in features.input_ids])
    labels = {"start_positions": features.start_positions,
              "end_positions": features.end_positions}
    return (ids, labels), len(features.input_ids), unlocated, features, contexts

  def metric_names(self):
    names = ("exact_match", "f1")
    return names + (squad_eval.V2_KEYS if self.info.version_2 else ())

  def loss_sum(self, outputs, labels):
    """BERT's span loss (the mean of the start and end cross-entropies; a window without the
    answer points at `<s>`), plus with the answerability classifier the paper's joint loss:
    the sigmoid cross-entropy of "this window holds the answer", summed with the span loss."""
    loss = 0.5 * (_cross_entropy_sum(labels["start_positions"], outputs["start_logits"]) +
                  _cross_entropy_sum(labels["end_positions"], outputs["end_logits"]))
    if "answerable_logits" in outputs:
      answerable = tf.cast(labels["start_positions"] > 0, tf.float32)
      loss += tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(
          labels=answerable, logits=outputs["answerable_logits"]))
    return loss

  def evaluate(self, batch_outputs):
    starts = [row for b in batch_outputs for row in b["start_logits"]]
    ends = [row for b in batch_outputs for row in b["end_logits"]]
    answerable = (np.concatenate([b["answerable_logits"] for b in batch_outputs])
                  if "answerable_logits" in batch_outputs[0] else None)
    answers = squad_decode.decode(
        self._dev, self._dev_features, self._dev_contexts, starts, ends,
        version_2=self.info.version_2, n_best_size=self.info.n_best_size,
        max_answer_len=self.info.max_answer_len,
        null_score_threshold=self.info.null_score_threshold, answerable_logits=answerable)
    predictions, nbest, null_scores = answers
    best_spans = {qid: cands[0].text if cands else "" for qid, cands in nbest.items()}
    # The score the threshold is compared with (squad_decode), for the best-threshold search.
    na_scores = null_scores if answerable is not None else {
        qid: null - (nbest[qid][0].score if nbest[qid] else -np.inf)
        for qid, null in null_scores.items()}
    scores = squad_eval.evaluate(squad_read.gold_answers(self._dev), predictions,
                                 self.info.version_2, na_scores=na_scores,
                                 span_predictions=best_spans)
    return Evaluation(scores, answers)
