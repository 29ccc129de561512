"""What pretraining minimizes: the MLM loss (and BERT's NSP loss for the pair-packing
ablation), as the `Sums` of one replica's micro-batch (training/task.py's `Objective`)."""

from __future__ import annotations

import tensorflow as tf

from roberta_tf.pretraining.losses import mlm_sums, nsp_sums
from roberta_tf.training.task import Sums

MODEL_INPUTS = ("input_ids", "padding_mask", "mask_positions")
# Pair-packing batches (the NSP ablation); document-packing batches (ModernBERT's packing).
OPTIONAL_INPUTS = ("token_type_ids", "document_ids")


def model_inputs(batch: dict) -> dict:
  """The pretrainer's inputs from a pipeline batch."""
  return {k: batch[k] for k in MODEL_INPUTS + OPTIONAL_INPUTS if k in batch}


class MlmObjective:
  """Pretraining: the MLM loss at the masked positions of a pipeline batch (count = targets).

  With ``next_sentence`` (pair-packing shards and a model with an NSP head) the loss is BERT's
  MLM mean + NSP mean. The train step divides the summed loss by the global masked-token count,
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
