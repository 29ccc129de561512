"""What the one train step minimizes: an objective per kind of training.

An objective is a callable `objective(model, batch) -> Sums`: float32 scalars of one replica's
micro-batch (the loss SUM, the number of predictions it is normalized by, the correct
predictions, the real input tokens). The Trainer (trainer.py) sums them over replicas and
micro-batches and divides the gradient by the global count, so an objective never normalizes by
its own batch. `Sums.extras` holds further float32 sums named by the objective's `extra_sums`
(reported, summed the same way, not differentiated).
"""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf

from roberta_tf.training.losses import mlm_sums, nsp_sums

MODEL_INPUTS = ("input_ids", "padding_mask", "mask_positions")
OPTIONAL_INPUTS = ("token_type_ids",)  # pair-packing batches (the NSP ablation)


class Sums(NamedTuple):
  """What an objective returns for one replica's micro-batch (float32 scalars)."""
  loss_sum: tf.Tensor  # the loss summed over the predictions (not normalized)
  count: tf.Tensor     # predictions: masked tokens (MLM) or examples (tasks)
  correct: tf.Tensor   # correct argmax predictions (0 where a task scores itself on dev)
  tokens: tf.Tensor    # real (non-pad) input tokens
  extras: dict | None = None  # {name in the objective's extra_sums: sum}


def model_inputs(batch: dict) -> dict:
  """The pretrainer's inputs from a pipeline batch."""
  return {k: batch[k] for k in MODEL_INPUTS + OPTIONAL_INPUTS if k in batch}


class MlmObjective:
  """Pretraining: the MLM loss at the masked positions of a pipeline batch (count = targets).

  With ``next_sentence`` (pair-packing shards and a model with an NSP head) the loss is BERT's
  MLM mean + NSP mean. The trainer divides the summed loss by the global masked-token count,
  so the NSP sum is weighted by this micro-batch's masked tokens per sequence: exactly BERT's
  sum of means when every micro-batch holds as many masked tokens per sequence, and close to
  it otherwise (15% of a micro-batch's tokens). The parts are reported as extra sums.
  """

  def __init__(self, next_sentence: bool = False):
    self.next_sentence = next_sentence
    self.extra_sums = ("mlm_loss", "nsp_loss", "nsp_correct", "nsp_count") if next_sentence else ()

  def __call__(self, model, batch):
    inputs = model_inputs(batch)
    tokens = tf.reduce_sum(tf.cast(batch["padding_mask"], tf.float32))
    if not self.next_sentence:
      logits = model(inputs, training=True)
      loss_sum, count, correct = mlm_sums(logits, batch["mask_ids"], batch["mask_weights"])
      return Sums(loss_sum, count, correct, tokens)
    logits, nsp_logits = model(inputs, training=True, with_nsp=True)
    loss_sum, count, correct = mlm_sums(logits, batch["mask_ids"], batch["mask_weights"])
    nsp_loss, nsp_count, nsp_correct = nsp_sums(nsp_logits, batch["next_sentence_labels"],
                                                batch["next_sentence_weights"])
    weight = tf.stop_gradient(count / tf.maximum(nsp_count, 1.0))
    extras = {"mlm_loss": loss_sum, "nsp_loss": nsp_loss, "nsp_correct": nsp_correct,
              "nsp_count": nsp_count}
    return Sums(loss_sum + weight * nsp_loss, count, correct, tokens, extras)


class TaskObjective:
  """A fine-tuning task (finetuning/tasks.py): its `loss_sum(outputs, labels)` over a batch of
  (inputs, labels); count = examples, correct = 0 (tasks score themselves on dev)."""

  def __init__(self, task):
    self.task = task

  def __call__(self, model, batch):
    inputs, labels = batch
    outputs = model(inputs, training=True)
    loss_sum = tf.cast(self.task.loss_sum(outputs, labels), tf.float32)
    examples = tf.cast(tf.shape(inputs["input_ids"])[0], tf.float32)
    tokens = tf.reduce_sum(tf.cast(inputs["padding_mask"], tf.float32))
    return Sums(loss_sum, examples, tf.constant(0.0), tokens)
