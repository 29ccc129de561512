"""Reading masked pretraining batches back as the sequences they were made from."""


def restore(batch):
  """The unmasked, unpadded rows of a batch (predictions put back) as tuples of ids; empty rows
  (eval padding) dropped."""
  ids = batch["input_ids"].numpy().copy()
  pos, orig, w = (batch[k].numpy() for k in ("mask_positions", "mask_ids", "mask_weights"))
  rows = []
  for b in range(ids.shape[0]):
    filled = w[b] > 0
    ids[b, pos[b, filled]] = orig[b, filled]
    real = ids[b][batch["padding_mask"].numpy()[b] == 1]
    if real.size:
      rows.append(tuple(real.tolist()))
  return rows
