"""Task heads on the RoBERTa encoder, and `FinetuneModel` (encoder + one head).

On a ModernBERT encoder (`model_config` of that family) classification, regression, multiple
choice, token tagging and extractive QA use HF ModernBERT's head instead (models/modernbert/
modernbert_task_heads.py: pooling as config.classifier_pooling for the sequence tasks, dense,
GELU, LayerNorm, dropout at config.classifier_dropout, classifier), so that the fine-tuned model
exports as ModernBertFor{Sequence,Token}Classification, ForMultipleChoice or
ForQuestionAnswering; embeddings (no head) pool either family's tokens as below, and SQuAD v2's
answerability classifier (HF has none) is the `ClassificationHead` below on the first token.

Heads (the sublayer names are checkpoint keys):
- `ClassificationHead`: RoBERTa's (fairseq `RobertaClassificationHead`, HF
  `RobertaClassificationHead`): dropout -> dense H, tanh -> dropout -> dense K, on the `<s>`
  vector. K = the number of classes; 1 for regression and for multiple choice (one score per
  option).
- `SpanHead`: dense 2 on every token vector -> start and end logits (HF `qa_outputs`).
- `TokenHead`: dropout -> dense K on every token vector -> each piece's tag logits (HF
  `RobertaForTokenClassification`'s `dropout` + `classifier`).
- Text embeddings have no head: `pool` (mean over the tokens, or `<s>`), then L2-normalized
  (sentence-transformers' Pooling + Normalize modules).
- SQuAD v2's answerability classifier (the paper's, trained jointly with the spans): a
  `ClassificationHead` with one output on the `<s>` vector, "answer_head".
"""

from __future__ import annotations

import keras
import tensorflow as tf

from roberta_tf.finetuning.problem_types import (
  CLASSIFICATION,
  CLS,
  EMBEDDING,
  EXTRACTIVE_QA,
  MEAN,
  MULTIPLE_CHOICE,
  PROBLEM_TYPES,
  REGRESSION,
  TOKEN_CLASSIFICATION,
)
from roberta_tf.models import model_dir as model_dir_lib
from roberta_tf.models import registry
from roberta_tf.models.initializers import normal
from roberta_tf.models.roberta.encoder import encoder_inputs

# Added to the logits of pad positions so that no span starts or ends there (float32-safe).
_PAD_LOGIT = -1e9


class _OutputHead(keras.layers.Layer):
  """A head of `num_outputs` outputs after dropout (the constructor and config the
  classification and token heads share)."""

  def __init__(self, num_outputs: int, dropout: float = 0.1, initializer_range: float = 0.02,
               **kwargs):
    super().__init__(**kwargs)
    self.num_outputs = num_outputs
    self.dropout_rate = dropout
    self.initializer_range = initializer_range

  def get_config(self):
    return {**super().get_config(), "num_outputs": self.num_outputs,
            "dropout": self.dropout_rate, "initializer_range": self.initializer_range}


@keras.saving.register_keras_serializable(package="roberta_tf")
class ClassificationHead(_OutputHead):
  """[B, H] `<s>` vectors -> float32 [B, num_outputs]."""

  def build(self, input_shape):
    hidden = input_shape[-1]
    init = normal(self.initializer_range)
    self.dense = keras.layers.Dense(hidden, activation="tanh", kernel_initializer=init,
                                    dtype=self.dtype_policy, name="dense")
    self.dense.build((None, hidden))
    self.out_proj = keras.layers.Dense(self.num_outputs, kernel_initializer=init,
                                       dtype=self.dtype_policy, name="out_proj")
    self.out_proj.build((None, hidden))
    self.dropout = keras.layers.Dropout(self.dropout_rate, dtype=self.dtype_policy)
    self.built = True

  def call(self, x, training=None):
    x = self.dropout(x, training=training)
    x = self.dropout(self.dense(x), training=training)
    return tf.cast(self.out_proj(x), tf.float32)


@keras.saving.register_keras_serializable(package="roberta_tf")
class SpanHead(keras.layers.Layer):
  """[B, S, H] token vectors, padding_mask [B, S] -> float32 start and end logits [B, S]
  (pad positions get -1e9)."""

  def __init__(self, initializer_range: float = 0.02, **kwargs):
    super().__init__(**kwargs)
    self.initializer_range = initializer_range

  def build(self, x_shape, padding_mask_shape=None):  # named as call's args: Keras maps them
    self.qa_outputs = keras.layers.Dense(2, kernel_initializer=normal(
        self.initializer_range), dtype=self.dtype_policy, name="qa_outputs")
    self.qa_outputs.build((None, None, x_shape[-1]))
    self.built = True

  def call(self, x, padding_mask):
    logits = tf.cast(self.qa_outputs(x), tf.float32)
    pad = (1.0 - tf.cast(padding_mask, tf.float32)) * _PAD_LOGIT
    return logits[..., 0] + pad, logits[..., 1] + pad

  def get_config(self):
    return {**super().get_config(), "initializer_range": self.initializer_range}


@keras.saving.register_keras_serializable(package="roberta_tf")
class TokenHead(_OutputHead):
  """[B, S, H] token vectors -> float32 [B, S, num_outputs] tag logits."""

  def build(self, input_shape):
    self.classifier = keras.layers.Dense(self.num_outputs, kernel_initializer=normal(
        self.initializer_range), dtype=self.dtype_policy, name="classifier")
    self.classifier.build((None, None, input_shape[-1]))
    self.dropout = keras.layers.Dropout(self.dropout_rate, dtype=self.dtype_policy)
    self.built = True

  def call(self, x, training=None):
    return tf.cast(self.classifier(self.dropout(x, training=training)), tf.float32)


def pool(sequence_output, padding_mask, pooling: str = MEAN):
  """float [B, S, H] token vectors, int padding_mask [B, S] -> float32 [B, H] L2-normalized
  embeddings: the mean over real tokens (`MEAN`, sentence-transformers' mean pooling: <s> and
  </s> count, pads do not) or the `<s>` vector (`CLS`)."""
  x = tf.cast(sequence_output, tf.float32)
  if pooling == CLS:
    pooled = x[:, 0]
  else:
    mask = tf.cast(padding_mask, tf.float32)[:, :, None]
    pooled = tf.reduce_sum(x * mask, axis=1) / tf.maximum(tf.reduce_sum(mask, axis=1), 1e-9)
  return tf.math.l2_normalize(pooled, axis=-1, epsilon=1e-24)  # torch's F.normalize: eps 1e-12


class FinetuneModel(keras.Model):
  """The encoder and a task head.

  Called on {"input_ids", "padding_mask"}: int32 [B, S] ([B, C, S] for multiple choice, C
  options) it returns float32
    classification:  {"logits": [B, K]}
    regression:      {"logits": [B]}
    multiple_choice: {"logits": [B, C]} (one score per option; softmax over C)
    extractive_qa:   {"start_logits": [B, S], "end_logits": [B, S]}, and with
                     `answer_classifier` "answerable_logits": [B] (the window holds the answer)
    token_classification: {"logits": [B, S, K]} (K tags; every position, pads included)
    embedding:       {"embeddings": [B, H]}, L2-normalized (`pool`); inputs [B, T, S] (T texts
                     of a training row: anchor, positive[, negative]) give [B, T, H]
  Checkpoint layout: `tf.train.Checkpoint(model=...)` with children "encoder" and "head" (and
  "answer_head"). `model_config` (the encoder's config) picks the family's head (module
  docstring); None: RoBERTa's.
  Built on construction, so a checkpoint can be restored into it straight away.
  """

  def __init__(self, encoder: keras.Model, task_type: str, num_outputs: int = 1,
               dropout: float = 0.1, initializer_range: float = 0.02, dtype=None,
               answer_classifier: bool = False, pooling: str = MEAN, model_config=None,
               **kwargs):
    if task_type not in PROBLEM_TYPES:
      raise ValueError(f"unknown task type {task_type!r}; expected one of {PROBLEM_TYPES}")
    super().__init__(dtype=dtype, name=kwargs.pop("name", f"roberta_{task_type}"), **kwargs)
    self.encoder = encoder
    self.task_type = task_type
    hidden = encoder.output["pooled_output"].shape[-1]
    self.answer_head = None
    self.pooling = pooling
    mb_head = family_head(model_config, task_type, num_outputs, dtype)
    self.on_sequence = mb_head is not None  # the head takes (sequence_output, padding_mask)
    if mb_head is not None:
      self.head = mb_head
      if answer_classifier:
        self.answer_head = ClassificationHead(1, dropout, initializer_range, dtype=dtype,
                                              name="answer_head")
        self.answer_head.build((None, hidden))
    elif task_type == EMBEDDING:
      self.head = None  # pooling has no weights
    elif task_type == EXTRACTIVE_QA:
      self.head = SpanHead(initializer_range, dtype=dtype, name="span_head")
      self.head.build((None, None, hidden))
      if answer_classifier:
        self.answer_head = ClassificationHead(1, dropout, initializer_range, dtype=dtype,
                                              name="answer_head")
        self.answer_head.build((None, hidden))
    elif task_type == TOKEN_CLASSIFICATION:
      self.head = TokenHead(num_outputs, dropout, initializer_range, dtype=dtype,
                            name="token_head")
      self.head.build((None, None, hidden))
    else:
      outputs = num_outputs if task_type == CLASSIFICATION else 1
      self.head = ClassificationHead(outputs, dropout, initializer_range, dtype=dtype,
                                     name="classification_head")
      self.head.build((None, hidden))
    self.built = True

  def call(self, inputs, training=None):
    input_ids = tf.convert_to_tensor(inputs["input_ids"], tf.int32)
    padding_mask = tf.convert_to_tensor(inputs["padding_mask"], tf.int32)
    grouped = input_ids.shape.rank == 3  # [B, C, S]: options, or a training row's texts
    if grouped:
      shape = tf.shape(input_ids)
      input_ids = tf.reshape(input_ids, [-1, shape[2]])
      padding_mask = tf.reshape(padding_mask, [-1, shape[2]])
    encoded = self.encoder(encoder_inputs(self.encoder, input_ids, padding_mask),
                           training=training)
    if self.task_type == EMBEDDING:
      embeddings = pool(encoded["sequence_output"], padding_mask, self.pooling)
      return {"embeddings": tf.reshape(embeddings, tf.concat([shape[:2], [-1]], 0))
              if grouped else embeddings}
    if self.task_type == EXTRACTIVE_QA:
      if self.on_sequence:  # HF ModernBERT's QA head: [B, S, 2], pads masked as SpanHead does
        both = self.head(encoded["sequence_output"], padding_mask, training=training)
        pad = (1.0 - tf.cast(padding_mask, tf.float32)) * _PAD_LOGIT
        start, end = both[..., 0] + pad, both[..., 1] + pad
      else:
        start, end = self.head(encoded["sequence_output"], padding_mask)
      if self.answer_head is None:
        return {"start_logits": start, "end_logits": end}
      answerable = self.answer_head(encoded["pooled_output"], training=training)[:, 0]
      return {"start_logits": start, "end_logits": end, "answerable_logits": answerable}
    if self.on_sequence:
      logits = self.head(encoded["sequence_output"], padding_mask, training=training)
      if self.task_type == TOKEN_CLASSIFICATION:
        return {"logits": logits}
    elif self.task_type == TOKEN_CLASSIFICATION:
      return {"logits": self.head(encoded["sequence_output"], training=training)}
    else:
      logits = self.head(encoded["pooled_output"], training=training)
    if self.task_type == CLASSIFICATION:
      return {"logits": logits}
    if self.task_type == REGRESSION:
      return {"logits": logits[:, 0]}
    return {"logits": tf.reshape(logits, shape[:2])}


def family_head(model_config, task_type: str, num_outputs: int, dtype=None):
  """The built HF ModernBERT head of a ModernBERT `model_config` for task_type (num_outputs
  labels; 1 for regression and multiple choice, 2 for extractive QA), or None: RoBERTa's heads
  apply (another family, no config, embeddings)."""
  if model_config is None or registry.family_of(model_config).name == registry.DEFAULT_FAMILY:
    return None
  if task_type == EMBEDDING:
    return None
  # pylint: disable=import-outside-toplevel
  from roberta_tf.models.modernbert import modernbert_task_heads as mb_heads
  task, outputs = {
      TOKEN_CLASSIFICATION: (mb_heads.TOKEN_CLASSIFICATION, num_outputs),
      EXTRACTIVE_QA: (mb_heads.QUESTION_ANSWERING, 2),
      MULTIPLE_CHOICE: (mb_heads.MULTIPLE_CHOICE, 1),
      CLASSIFICATION: (mb_heads.SEQUENCE_CLASSIFICATION, num_outputs),
  }.get(task_type, (mb_heads.SEQUENCE_CLASSIFICATION, 1))
  return mb_heads.build_task_head(model_config, task, outputs, dtype=dtype)


def dropout_of(model_config) -> float:
  """The dropout rate of the RoBERTa-style heads on model_config's encoder."""
  if hasattr(model_config, "dropout"):
    return model_config.dropout
  return model_config.classifier_dropout


def pretrained_encoder(config, dtype=None,
                       init_from: str = "") -> keras.Model:
  """The encoder of `config`: random init, or the weights of model dir `init_from`'s latest
  checkpoint (its MLM head is dropped). `config` may differ from init_from's config.json only in
  dropout (fine-tuning may change it)."""
  if not init_from:
    return registry.build_encoder(config, dtype=dtype)
  pretrainer = registry.build_pretrainer(config, dtype=dtype)
  model_dir_lib.restore(pretrainer, model_dir_lib.latest_checkpoint(init_from))
  return pretrainer.encoder
