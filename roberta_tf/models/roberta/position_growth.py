"""A longer position table for a trained model (Longformer's recipe, Beltagy et al. 2020 §5).

RoBERTa's position ids start at pad_id + 1 = 2: rows 0 .. pad_id are never used by a real token
(pads read row pad_id). A table of P rows grown to P' > P keeps its first P rows as they are
and fills rows P .. P' - 1 by tiling the learned rows pad_id + 1 .. P - 1 (Longformer copied
roberta's 512 learned rows over and over up to 4,096; the offset rows are not copied), so

    new[k] = old[k]                                     for k < P
    new[k] = old[o + (k - o) mod (P - o)],  o = pad_id + 1,  for k >= P

and a model on inputs within the old length computes exactly what it did.
"""

from __future__ import annotations

import numpy as np


def grown_positions(old: np.ndarray, new_rows: int, pad_id: int) -> np.ndarray:
  """The position table [P, H] grown to [new_rows, H] (new_rows >= P) as above."""
  rows = old.shape[0]
  offset = pad_id + 1
  if new_rows < rows:
    raise ValueError(f"a position table cannot shrink ({rows} -> {new_rows} rows)")
  if rows <= offset:
    raise ValueError(f"a position table of {rows} rows has no learned position to copy "
                     f"(positions start at pad_id + 1 = {offset})")
  learned = rows - offset
  index = np.arange(new_rows)
  source = np.where(index < rows, index, offset + (index - offset) % learned)
  return old[source]
