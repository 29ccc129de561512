"""What fine-tuning minimizes: a problem's loss over a batch of (inputs, labels), as the `Sums`
of one replica's micro-batch (training/task.py's `Objective`)."""

from __future__ import annotations

import tensorflow as tf

from roberta_tf.training.task import Sums


class ProblemObjective:
  """A fine-tuning problem (problems.py): its `loss_sum(outputs, labels)` over a batch of
  (inputs, labels); count = its `loss_count` (examples; token classification: tagged pieces),
  correct = 0 (problems score themselves on dev)."""

  extra_sums = ()

  def __init__(self, problem):
    self.problem = problem

  def __call__(self, model, batch):
    inputs, labels = batch
    outputs = model(inputs, training=True)
    loss_sum = tf.cast(self.problem.loss_sum(outputs, labels), tf.float32)
    count = tf.cast(self.problem.loss_count(inputs, labels), tf.float32)
    tokens = tf.reduce_sum(tf.cast(inputs["padding_mask"], tf.float32))
    return Sums(loss_sum, count, tf.constant(0.0), tokens)
