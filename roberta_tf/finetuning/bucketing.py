"""Fine-tuning batches without wasted padding: length buckets and a bounded set of shapes.

Fine-tuning examples are short and vary in length (GLUE's CoLA/SST-2 sentences are ~10-20
tokens), so a batch padded to `max_seq_len` spends most of its compute on pad tokens, and a
batch padded to its own longest example has a new shape almost every step -- each new shape
retraces the `tf.function` train step (seconds each). Three batchings (`--batching`):

  length_buckets  (default) every example belongs to the bucket of the smallest rung of
                  `length_ladder` that holds it; the epoch's seeded permutation is grouped by
                  bucket (keeping its random order inside each), cut into updates (global
                  batches), and the updates are shuffled (the last, partial one stays last). A
                  micro-batch is padded to its bucket's rung (at a bucket's edge: the higher),
                  so the train step is traced at most once per rung (and once more for the
                  partial batch). Inside a bucket the examples stay in random order -- not
                  sorted by exact length (HF's group_by_length), which gains nothing once a
                  batch is padded to a rung, and would tie a batch's labels to its length
                  wherever length and label go together (in the tests' synthetic sentiment
                  task every 28-token example is positive).
  random          the epoch's seeded permutation cut into micro-batches (no grouping), each
                  padded to the ladder rung of its longest example: the same updates as
                  `max_seq_len` (the model ignores pad positions), a bounded number of shapes.
  max_seq_len     the same batches as `random`, every one padded to max_seq_len: one shape (what
                  XLA/TPU need), the most padding. The reference the others are tested against.

Dev and test batches keep the file order and are padded to their longest example (their
prediction function is traced once, for any length), or to max_seq_len under `max_seq_len`.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from roberta_tf.finetuning.problem_types import BATCHINGS, LENGTH_BUCKETS, MAX_SEQ_LEN, RANDOM

__all__ = ["BATCHINGS", "LENGTH_BUCKETS", "MAX_SEQ_LEN", "RANDOM", "batch", "length_ladder",
           "pad_to_rung", "train_order"]


def length_ladder(max_seq_len: int) -> list[int]:
  """The padded lengths a batch may have: 16, 32, 48, 64, then x1.5 steps (96, 128, 192, 256,
  384, 512, 768, ...), capped by and ending with max_seq_len. A batch wastes at most a third of
  its slots to the rounding, and there are ~2 log2(max_seq_len) rungs (10 for 512)."""
  rungs, step = [16, 32, 48], 64
  while step < max_seq_len:
    rungs += [step, step * 3 // 2]
    step *= 2
  return sorted({r for r in rungs if r < max_seq_len} | {max_seq_len})


def train_order(lengths: np.ndarray, batch_size: int, seed: int, batching: str,
                ladder: list[int]) -> np.ndarray:
  """The epoch's example order; consecutive slices of batch_size are its updates.

  Args:
    lengths: int [N], each training example's length in tokens (<= ladder[-1]).
    batch_size: examples per update (length buckets group and shuffle whole updates, so an
      update holds the same examples however it is split into micro-batches).
    seed: the epoch's seed (the order is a function of it).
    batching: one of BATCHINGS.
    ladder: length_ladder(max_seq_len), the buckets of length_buckets.
  Returns:
    int64 [N], a permutation of range(N).
  """
  if batching not in BATCHINGS:
    raise ValueError(f"batching={batching!r}: expected one of {', '.join(BATCHINGS)}")
  rng = np.random.default_rng(seed)
  order = rng.permutation(len(lengths))
  if batching != LENGTH_BUCKETS:
    return order
  bucket = np.searchsorted(np.asarray(ladder), np.asarray(lengths))
  order = order[np.argsort(bucket[order], kind="stable")]  # by bucket, random inside each
  full = len(order) // batch_size
  batches = order[:full * batch_size].reshape(full, batch_size)[rng.permutation(full)]
  return np.concatenate([batches.reshape(-1), order[full * batch_size:]])


def pad_to_rung(ladder: list[int], pad_id: int, token_label_pad: int | None = None):
  """A tf.data map function: ({"input_ids", "padding_mask"} [B, L] or [B, C, L], labels) ->
  the same with L raised to the smallest rung >= L (pad_id / 0 fill the new positions; per-token
  labels [B, L], when token_label_pad is given, are padded with it)."""
  rungs = tf.constant(ladder, tf.int32)

  def pad(inputs, labels):
    length = tf.shape(inputs["input_ids"])[-1]
    target = tf.gather(rungs, tf.minimum(tf.searchsorted(rungs, [length])[0], len(ladder) - 1))
    rank = inputs["input_ids"].shape.rank
    paddings = [[0, 0]] * (rank - 1) + [[0, tf.maximum(target - length, 0)]]
    if token_label_pad is not None:
      labels = tf.pad(labels, paddings, constant_values=token_label_pad)
    return {"input_ids": tf.pad(inputs["input_ids"], paddings, constant_values=pad_id),
            "padding_mask": tf.pad(inputs["padding_mask"], paddings)}, labels
  return pad


def batch(ds: tf.data.Dataset, batch_size: int, pad_id: int, padded_length: int | None,
          ladder: list[int] | None = None, token_label_pad: int | None = None
          ) -> tf.data.Dataset:
  """Batches (inputs, labels) elements ({"input_ids", "padding_mask"} int32 [L] or [C, L]).

  padded_length: pad every batch to this length (max_seq_len); None: to the batch's longest,
  then up to the next rung of `ladder` if one is given.
  token_label_pad: labels are per token (int32 [L], token classification), padded like the
  inputs with this value; None: labels are per example.
  """
  spec = ds.element_spec
  rank = spec[0]["input_ids"].shape.rank
  shape = [None] * (rank - 1) + [padded_length]
  if token_label_pad is None:
    label_shapes = tf.nest.map_structure(lambda s: s.shape, spec[1])
    labels = tf.nest.map_structure(lambda s: tf.zeros([], s.dtype), spec[1])
  else:
    label_shapes, labels = shape, tf.constant(token_label_pad, spec[1].dtype)
  padded_shapes = ({"input_ids": shape, "padding_mask": shape}, label_shapes)
  ds = ds.padded_batch(batch_size, padded_shapes=padded_shapes, padding_values=(
      {"input_ids": tf.constant(pad_id, tf.int32), "padding_mask": tf.constant(0, tf.int32)},
      labels))
  if padded_length is None and ladder:
    ds = ds.map(pad_to_rung(ladder, pad_id, token_label_pad),
                num_parallel_calls=tf.data.AUTOTUNE)
  return ds.prefetch(tf.data.AUTOTUNE)
