"""Reading masked pretraining batches back as the sequences they were made from."""

import numpy as np

from roberta_tf.data.masking import unmask


def restore(batch):
  """The unmasked, unpadded rows of a batch (predictions put back) as tuples of ids; empty rows
  (eval padding) dropped."""
  ids, real = unmask(batch), np.asarray(batch["padding_mask"]) == 1
  return [tuple(ids[b][real[b]].tolist()) for b in range(ids.shape[0]) if real[b].any()]
