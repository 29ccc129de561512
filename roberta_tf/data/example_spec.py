"""The shard record format: one tf.train.Example per packed sequence.

A record holds `input_ids`: an int64 list, unpadded, at most `max_seq_len` ids, `<s>` first and
`</s>` last (data_prep writes them; see dataset_info.py). `serialize` and `parse` are inverses;
`parse_batch` + `is_valid` read and check many records at once (the pipeline's way).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

FEATURE = "input_ids"
_SPEC = {FEATURE: tf.io.RaggedFeature(tf.int64)}


def serialize(ids: Sequence[int] | np.ndarray) -> bytes:
  """One sequence of ids (ints or an int array [L]) → a serialized tf.train.Example."""
  # One numpy conversion, not a Python int() per id: data_prep calls this for every block.
  feature = tf.train.Feature(int64_list=tf.train.Int64List(
      value=np.asarray(ids, np.int64).tolist()))
  return tf.train.Example(
      features=tf.train.Features(feature={FEATURE: feature})).SerializeToString()


def parse(serialized: tf.Tensor) -> tf.Tensor:
  """A scalar tf.string record → int32 [length] ids."""
  return tf.cast(tf.io.parse_single_example(serialized, _SPEC)[FEATURE], tf.int32)


def parse_batch(serialized: tf.Tensor) -> tf.RaggedTensor:
  """tf.string [N] records → int32 ragged [N, None] ids (vectorized: one op for N records)."""
  ids = tf.io.parse_example(serialized, _SPEC)[FEATURE]
  return tf.cast(ids, tf.int32)


def is_valid(ids: tf.RaggedTensor, *, max_seq_len: int, vocab_size: int, bos_id: int,
             eos_id: int) -> tf.Tensor:
  """bool [N] for ragged ids [N, None]: the record contract (see the module docstring).

  2 <= length <= max_seq_len, every id in [0, vocab_size), `<s>` first and `</s>` last.
  """
  n = tf.cast(ids.row_lengths(), tf.int64)
  starts = tf.cast(ids.row_starts(), tf.int64)
  values = ids.flat_values
  # Reads of the first/last id, clamped so that empty rows do not fail (they are invalid anyway):
  # index size(values) is the -1 sentinel.
  safe = tf.concat([values, [-1]], 0)
  first_id = tf.gather(safe, starts)
  last_id = tf.gather(safe, tf.where(n > 0, starts + n - 1, tf.size(values, out_type=tf.int64)))
  out_of_range = tf.logical_or(values < 0, values >= vocab_size)
  bad_ids = tf.RaggedTensor.from_row_lengths(out_of_range, n)
  return (tf.logical_and(n >= 2, n <= max_seq_len) & tf.equal(first_id, bos_id)
          & tf.equal(last_id, eos_id) & tf.logical_not(tf.reduce_any(bad_ids, axis=1)))
