"""Token classification as a fine-tuning problem: tag every word (NER, POS, slots).

Data: tag_read.py (CoNLL or JSON lines); features: tag_features.py (HF's word encoding,
windows over long sentences); the loss: cross-entropy of each tagged piece's tag, the mean over
the global batch's tagged pieces (HF's CrossEntropyLoss(ignore_index=-100)); dev metrics:
seqeval's (tag_scores.py) on each word's tag read at its first piece. A test file, when
given, is scored by each run's best epoch (`score_test`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from roberta_tf.finetuning import bucketing
from roberta_tf.finetuning.problem_info import ProblemInfo
from roberta_tf.finetuning.problems import Evaluation, Problem
from roberta_tf.finetuning.tagging import tag_features, tag_read, tag_scores

IGNORED = tag_features.IGNORED


@dataclasses.dataclass
class TaggedSet:
  """A dev or test set: its sentences and their windows."""
  sentences: list[tag_read.TaggedSentence]
  features: tag_features.TaggingFeatures


def _ragged(rows: Sequence[np.ndarray]) -> tf.RaggedTensor:
  return tf.RaggedTensor.from_row_lengths(np.concatenate(rows).astype(np.int32),
                                          [len(r) for r in rows])


class TokenClassificationProblem(Problem):
  """Windows of tagged sentences in, a tag per word out (see the module docstring)."""

  def __init__(self, info: ProblemInfo, tokenizer, train, dev, test=(),
               batching: str = bucketing.RANDOM):
    super().__init__(info, tokenizer.pad_id, batching)
    self._tokenizer = tokenizer
    train_set = self._tagged_set(train)
    self._train = (_ragged(train_set.features.input_ids), _ragged(train_set.features.labels))
    self.num_train = len(train_set.features.input_ids)
    self.dev = self._tagged_set(dev)
    self._eval = (_ragged(self.dev.features.input_ids), _ragged(self.dev.features.labels))
    self.num_eval = len(self.dev.features.input_ids)
    self.test = self._tagged_set(test) if test else None

  def _tagged_set(self, sentences) -> TaggedSet:
    info = self.info
    pieces = tag_features.encode_words(self._tokenizer, [s.words for s in sentences])
    continuation = (tag_features.continuation_ids(info.labels) if info.label_all_pieces
                    else None)
    features = tag_features.featurize_sentences(
        pieces, tag_read.tag_ids(sentences, info.labels), max_seq_len=info.max_seq_len,
        doc_stride=info.doc_stride, template=self._tokenizer.template,
        continuation=continuation)
    return TaggedSet(list(sentences), features)

  def _dataset(self, ids: tf.RaggedTensor, labels: tf.RaggedTensor, batch_size: int,
               ladder=None) -> tf.data.Dataset:
    ds = tf.data.Dataset.from_tensor_slices((ids, labels)).map(
        lambda x, y: ({"input_ids": x, "padding_mask": tf.ones_like(x)}, y))
    return bucketing.batch(ds, batch_size, self.pad_id, self._padded_length(), ladder,
                           token_label_pad=IGNORED)

  def train_dataset(self, batch_size: int, seed: int, update_size: int = 0) -> tf.data.Dataset:
    ids, labels = self._train
    ladder = bucketing.length_ladder(self.info.max_seq_len)
    order = bucketing.train_order(ids.row_lengths().numpy(), update_size or batch_size, seed,
                                  self.batching, ladder)
    return self._dataset(tf.gather(ids, order), tf.gather(labels, order), batch_size, ladder)

  def eval_dataset(self, batch_size: int) -> tf.data.Dataset:
    return self._dataset(*self._eval, batch_size).map(lambda inputs, labels: inputs)

  def test_dataset(self, batch_size: int) -> tf.data.Dataset:
    features = self.test.features
    return self._dataset(_ragged(features.input_ids), _ragged(features.labels),
                         batch_size).map(lambda inputs, labels: inputs)

  def loss_sum(self, outputs, labels):
    labels = tf.cast(labels, tf.int32)
    tagged = labels != IGNORED
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.where(tagged, labels, 0), logits=outputs["logits"])
    return tf.reduce_sum(tf.where(tagged, losses, 0.0))

  def loss_count(self, inputs, labels):
    del inputs
    return tf.reduce_sum(tf.cast(tf.not_equal(tf.cast(labels, tf.int32), IGNORED), tf.float32))

  def _score(self, batch_outputs, tagged: TaggedSet) -> Evaluation:
    logits = [row for b in batch_outputs for row in b["logits"]]
    ids, _ = tag_features.word_predictions(logits, tagged.features)
    names = self.info.labels
    predicted = [[names[i] for i in row] for row in ids]
    scores = tag_scores.score([s.tags for s in tagged.sentences], predicted, names,
                              self.info.tag_scheme)
    return Evaluation(scores, tags=predicted)

  def evaluate(self, batch_outputs):
    return self._score(batch_outputs, self.dev)

  def score_test(self, batch_outputs) -> Evaluation:
    """The test set's metrics and tags from the model outputs of test_dataset."""
    return self._score(batch_outputs, self.test)


def load(cfg, tokenizer) -> TokenClassificationProblem:
  """A run's tagging problem (cfg: a FinetuneConfig): its train, dev (and test) files, the label
  set (--labels, else the training tags in first-appearance order) and their scheme."""
  tags_field = "" if cfg.label_field == "label" else cfg.label_field  # "label": the default
  read = lambda path: tag_read.read_tagged(path, cfg.labels, tags_field)
  train, dev = read(cfg.train_file), read(cfg.eval_file)
  test = read(cfg.test_file) if cfg.test_file else []
  labels = tuple(tag_read.tag_names(train, cfg.labels))
  info = ProblemInfo(cfg.task, cfg.data.max_seq_len, labels=labels, doc_stride=cfg.doc_stride,
                     tag_scheme=tag_scores.detect_scheme([s.tags for s in train]),
                     label_all_pieces=cfg.label_all_pieces)
  return TokenClassificationProblem(info, tokenizer, train, dev, test, batching=cfg.batching)
