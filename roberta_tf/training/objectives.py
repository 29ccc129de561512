"""What the one train step minimizes: an objective per kind of training.

An objective is a callable `objective(model, batch) -> (loss_sum, count, correct, tokens)`:
float32 scalars of one replica's micro-batch (the loss SUM, the number of predictions it is
normalized by, the correct predictions, the real input tokens). The Trainer (trainer.py) sums
them over replicas and micro-batches and divides the gradient by the global count, so an
objective never normalizes by its own batch.
"""

from __future__ import annotations

import tensorflow as tf

from roberta_tf.training.losses import mlm_sums

MODEL_INPUTS = ("input_ids", "padding_mask", "mask_positions")


class MlmObjective:
  """Pretraining: the MLM loss at the masked positions of a pipeline batch (count = targets)."""

  def __call__(self, model, batch):
    logits = model({k: batch[k] for k in MODEL_INPUTS}, training=True)
    loss_sum, count, correct = mlm_sums(logits, batch["mask_ids"], batch["mask_weights"])
    tokens = tf.reduce_sum(tf.cast(batch["padding_mask"], tf.float32))
    return loss_sum, count, correct, tokens


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
    return loss_sum, examples, tf.constant(0.0), tokens
