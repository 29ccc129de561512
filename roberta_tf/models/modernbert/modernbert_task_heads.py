"""HF ModernBERT's task heads (ModernBertFor{SequenceClassification, MultipleChoice,
TokenClassification, QuestionAnswering}) and `ModernBertTaskModel`, the encoder with one of them.

HF (modernbert.md 1.9; transformers 5.23 modeling_modernbert): sequence classification and
multiple choice pool the final hidden states ("cls": the first column -- HF's multiple choice
takes the first non-pad one, the same column for right-padded inputs; "mean": the mean over real
tokens, from config.classifier_pooling), token classification and question answering take every
token; then all apply `head` (dense [bias iff classifier_bias], exact GELU, LayerNorm), dropout
(classifier_dropout) and `classifier`, a Linear to num_labels (multiple choice: 1 score per
option; question answering: 2, start and end) that always has a bias, initialised with std
hidden_size ** -0.5.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from roberta_tf.models.modernbert.modernbert_config import ModernBertConfig
from roberta_tf.models.modernbert.modernbert_encoder import build_modernbert_encoder
from roberta_tf.models.modernbert.modernbert_init import TruncatedNormalCutoff
from roberta_tf.models.modernbert.modernbert_mlm_head import PredictionHead

SEQUENCE_CLASSIFICATION = "sequence_classification"
TOKEN_CLASSIFICATION = "token_classification"
MULTIPLE_CHOICE = "multiple_choice"
QUESTION_ANSWERING = "question_answering"
TASKS = (SEQUENCE_CLASSIFICATION, TOKEN_CLASSIFICATION, MULTIPLE_CHOICE, QUESTION_ANSWERING)
POOLED_TASKS = (SEQUENCE_CLASSIFICATION, MULTIPLE_CHOICE)  # one vector a sequence


def pool(sequence_output, padding_mask, pooling: str):
  """float32 [B, S, H] -> [B, H]: the first column ("cls", whatever the padding, as HF) or the
  mean over the real tokens ("mean")."""
  x = tf.cast(sequence_output, tf.float32)
  if pooling == "cls":
    return x[:, 0]
  mask = tf.cast(padding_mask, tf.float32)[:, :, None]
  return tf.reduce_sum(x * mask, axis=1) / tf.reduce_sum(mask, axis=1)


@keras.saving.register_keras_serializable(package="roberta_tf")
class ModernBertTaskHead(keras.layers.Layer):
  """sequence_output float32 [B, S, H], padding_mask [B, S] -> float32 logits [B, K]
  (sequence_classification; multiple_choice: K = 1, B = examples x options) or [B, S, K]
  (token_classification; question_answering: K = 2). Sublayers: `head` (PredictionHead: dense,
  norm), `classifier`."""

  def __init__(self, task, num_labels, hidden_size, pooling="cls", head_bias=False,
               norm_eps=1e-5, norm_bias=False, dropout=0.0, head_std=0.02, classifier_std=0.02,
               cutoff=2.0, **kwargs):
    super().__init__(autocast=False, **kwargs)
    if task not in TASKS:
      raise ValueError(f"unknown ModernBERT task {task!r}; expected one of {TASKS}")
    self.task = task
    self.num_labels = num_labels
    self.hidden_size = hidden_size
    self.pooling = pooling
    self.head_bias = bool(head_bias)
    self.norm_eps = norm_eps
    self.norm_bias = bool(norm_bias)
    self.dropout_rate = dropout
    self.head_std = head_std
    self.classifier_std = classifier_std
    self.cutoff = cutoff
    self.head = PredictionHead(hidden_size, bias=head_bias, norm_eps=norm_eps,
                               norm_bias=norm_bias, std=head_std, cutoff=cutoff,
                               dtype=self.dtype_policy, name="head")
    self.dropout = keras.layers.Dropout(dropout, dtype="float32", name="dropout")
    self.classifier = keras.layers.Dense(
        num_labels, kernel_initializer=TruncatedNormalCutoff(classifier_std, cutoff),
        dtype=self.dtype_policy, name="classifier")

  def build(self, x_shape, padding_mask_shape=None):
    self.head.build((None, self.hidden_size))
    self.classifier.build((None, self.hidden_size))
    self.built = True

  def call(self, sequence_output, padding_mask, training=None):
    x = sequence_output
    if self.task in POOLED_TASKS:
      x = pool(x, padding_mask, self.pooling)
    x = self.dropout(self.head(x, training=training), training=training)
    return tf.cast(self.classifier(x), tf.float32)

  def get_config(self):
    config = super().get_config()
    config.update(task=self.task, num_labels=self.num_labels, hidden_size=self.hidden_size,
                  pooling=self.pooling, head_bias=self.head_bias, norm_eps=self.norm_eps,
                  norm_bias=self.norm_bias, dropout=self.dropout_rate, head_std=self.head_std,
                  classifier_std=self.classifier_std, cutoff=self.cutoff)
    return config


def build_task_head(config: ModernBertConfig, task: str, num_labels: int,
                    dtype=None) -> ModernBertTaskHead:
  """A built task head of `config` (pooling, biases, dropout and inits from it)."""
  head = ModernBertTaskHead(
      task, num_labels, config.hidden_size, pooling=config.classifier_pooling,
      head_bias=config.classifier_bias, norm_eps=config.norm_eps, norm_bias=config.norm_bias,
      dropout=config.classifier_dropout, head_std=config.init_std("out"),
      classifier_std=config.init_std("final_out"), cutoff=config.initializer_cutoff_factor,
      dtype=dtype, name=f"{task}_head")
  head.build((None, None, config.hidden_size))
  return head


class ModernBertTaskModel(keras.Model):
  """The ModernBERT encoder and one task head (HF's ModernBertFor<task>, as TASKS).

  Called on {"input_ids", "padding_mask"} int32 [B, S] ([B, C, S] for multiple_choice):
  sequence_classification {"logits": float32 [B, K]}; multiple_choice {"logits": [B, C]};
  token_classification {"logits": [B, S, K]}; question_answering {"start_logits",
  "end_logits": [B, S]} (every position, pads included: meaningless there, as HF's).
  Attributes: config, task, num_labels, encoder, head.
  """

  def __init__(self, config: ModernBertConfig, task: str, num_labels: int, dtype=None,
               **kwargs):
    super().__init__(dtype=dtype, name=kwargs.pop("name", f"modernbert_{task}"), **kwargs)
    self.config = config
    self.task = task
    self.num_labels = num_labels
    self.encoder = build_modernbert_encoder(config, dtype=dtype)
    self.head = build_task_head(config, task, num_labels, dtype=dtype)
    self.built = True

  def call(self, inputs, training=None):
    input_ids = tf.convert_to_tensor(inputs["input_ids"], tf.int32)
    padding_mask = tf.convert_to_tensor(inputs["padding_mask"], tf.int32)
    options = None
    if self.task == MULTIPLE_CHOICE:
      options = tf.shape(input_ids)[:2]
      input_ids = tf.reshape(input_ids, [-1, tf.shape(input_ids)[2]])
      padding_mask = tf.reshape(padding_mask, tf.shape(input_ids))
    encoded = self.encoder({"input_ids": input_ids, "padding_mask": padding_mask},
                           training=training)
    logits = self.head(encoded["sequence_output"], padding_mask, training=training)
    if self.task == MULTIPLE_CHOICE:
      return {"logits": tf.reshape(logits, options)}
    if self.task == QUESTION_ANSWERING:
      return {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}
    return {"logits": logits}
