"""The shard record format: one tf.train.Example per packed sequence.

A record holds `input_ids`: an int64 list, unpadded, at most `max_seq_len` ids, `<s>` first and
`</s>` last (data_prep writes them; see dataset_info.py). `serialize` and `parse` are inverses;
`parse_batch` + `is_valid` read and check many records at once (the pipeline's way).

Shards of the pair packings (dataset_info "packing" in packings.PAIR_PACKINGS,
data_prep/pair_packing.py: the NSP ablation formats) add two int64 scalars per record:
`first_segment_length` (ids of `<s> A </s>`: token type 0 before it, 1 from it on) and
`next_sentence_label` (0: B follows A, 1: B is random).

Shards of the document packings (packings.DOCUMENT_PACKINGS: `separate_documents`,
data_prep/packing.py) add `document_starts`: an int64 list, the index of each document
segment's `<s>` in `input_ids` (0 first, strictly increasing, each start after the first
preceded by `</s>`). A record is then `<s> a </s> <s> b </s> ...`; a reader turns the starts
into per-token document ids (`document_ids`), from which the model masks attention across
documents and restarts rotary positions. Records without the feature are one document.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

FEATURE = "input_ids"
FIRST_LENGTH = "first_segment_length"
NSP_LABEL = "next_sentence_label"
DOCUMENT_STARTS = "document_starts"
_SPEC = {FEATURE: tf.io.RaggedFeature(tf.int64)}
_PAIR_SPEC = {**_SPEC, FIRST_LENGTH: tf.io.FixedLenFeature([], tf.int64),
              NSP_LABEL: tf.io.FixedLenFeature([], tf.int64)}
_DOCUMENTS_SPEC = {**_SPEC, DOCUMENT_STARTS: tf.io.RaggedFeature(tf.int64)}



def _int64s(values) -> tf.train.Feature:
  return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def serialize(ids: Sequence[int] | np.ndarray, first_length: int | None = None,
              label: int | None = None, document_starts=None) -> bytes:
  """One sequence of ids (ints or an int array [L]) → a serialized tf.train.Example; with
  ``first_length`` and ``label``, a pair record; with ``document_starts`` (ints), a record of
  a document packing."""
  # One numpy conversion, not a Python int() per id: data_prep calls this for every block.
  feature = {FEATURE: _int64s(np.asarray(ids, np.int64).tolist())}
  if (first_length is None) != (label is None):
    raise ValueError("a pair record needs both first_length and label")
  if first_length is not None:
    feature[FIRST_LENGTH] = _int64s([int(first_length)])
    feature[NSP_LABEL] = _int64s([int(label)])
  if document_starts is not None:
    feature[DOCUMENT_STARTS] = _int64s(np.asarray(document_starts, np.int64).tolist())
  # deterministic: the features map in one order in every process, so pair shards (three
  # features) are byte-for-byte reproducible, as one-feature shards always were.
  example = tf.train.Example(features=tf.train.Features(feature=feature))
  return example.SerializeToString(deterministic=True)


def serialize_block(block) -> bytes:
  """A packer's output: an id array, a pair (anything with ids, first_length, label) or a
  document block (ids, starts)."""
  if hasattr(block, "first_length"):
    return serialize(block.ids, block.first_length, block.label)
  if hasattr(block, "starts"):
    return serialize(block.ids, document_starts=block.starts)
  return serialize(block)


def parse(serialized: tf.Tensor) -> tf.Tensor:
  """A scalar tf.string record → int32 [length] ids."""
  return tf.cast(tf.io.parse_single_example(serialized, _SPEC)[FEATURE], tf.int32)


def parse_batch(serialized: tf.Tensor) -> tf.RaggedTensor:
  """tf.string [N] records → int32 ragged [N, None] ids (vectorized: one op for N records)."""
  ids = tf.io.parse_example(serialized, _SPEC)[FEATURE]
  return tf.cast(ids, tf.int32)


def parse_pair_batch(serialized: tf.Tensor) -> tuple[tf.RaggedTensor, tf.Tensor, tf.Tensor]:
  """Pair records → (ids int32 ragged [N, None], first_length int32 [N], label int32 [N])."""
  x = tf.io.parse_example(serialized, _PAIR_SPEC)
  return (tf.cast(x[FEATURE], tf.int32), tf.cast(x[FIRST_LENGTH], tf.int32),
          tf.cast(x[NSP_LABEL], tf.int32))


def parse_documents_batch(serialized: tf.Tensor) -> tuple[tf.RaggedTensor, tf.RaggedTensor]:
  """Records of a document packing → (ids int32 ragged [N, None], starts int32 ragged
  [N, None])."""
  x = tf.io.parse_example(serialized, _DOCUMENTS_SPEC)
  return tf.cast(x[FEATURE], tf.int32), tf.cast(x[DOCUMENT_STARTS], tf.int32)


def documents_are_valid(ids: tf.RaggedTensor, starts: tf.RaggedTensor, bos_id: int,
                        eos_id: int) -> tf.Tensor:
  """bool [N]: the document fields' contract on top of `is_valid`'s: starts begin at 0,
  increase strictly, lie inside the row, each holds `<s>` and each after the first follows a
  `</s>`."""
  n = tf.cast(ids.row_lengths(), tf.int32)
  k = tf.cast(starts.row_lengths(), tf.int32)
  first_zero = tf.equal(tf.gather(tf.concat([starts.flat_values, [-1]], 0),
                                  tf.where(k > 0, tf.cast(starts.row_starts(), tf.int32),
                                           tf.size(starts.flat_values))), 0)
  rows = starts.value_rowids()
  later = starts[:, 1:]
  increasing = tf.reduce_all(later > starts[:, :-1], axis=1)
  in_row = starts.flat_values < tf.gather(n, rows)
  # Clamped reads (rows with bad starts are invalid anyway): the id at and before each start.
  flat_at = tf.cast(tf.gather(ids.row_starts(), rows), tf.int32) + tf.clip_by_value(
      starts.flat_values, 0, tf.maximum(tf.gather(n, rows) - 1, 0))
  safe = tf.concat([ids.flat_values, [-1]], 0)
  at = tf.gather(safe, tf.where(tf.gather(n, rows) > 0, flat_at, tf.size(ids.flat_values)))
  before = tf.gather(safe, tf.where(starts.flat_values > 0, flat_at - 1,
                                    tf.size(ids.flat_values)))
  good = in_row & tf.equal(at, bos_id) & ((starts.flat_values == 0) | tf.equal(before, eos_id))
  all_good = tf.reduce_all(tf.RaggedTensor.from_value_rowids(good, rows, tf.shape(n)[0]),
                           axis=1)
  return (k > 0) & first_zero & increasing & all_good


def document_ids(starts: tf.RaggedTensor, length: int) -> tf.Tensor:
  """int32 [N, length]: each position's document index in its row (0, 0, .., 1, 1, ..):
  the number of starts at or before it, minus 1. Positions past the row (padding) belong to
  its last document: the ids are non-decreasing along every row."""
  dense = starts.to_tensor(default_value=length)  # [N, K], padded past every position
  positions = tf.broadcast_to(tf.range(length, dtype=tf.int32)[None, :],
                              [tf.shape(dense)[0], length])
  ids = tf.searchsorted(dense, positions, side="right", out_type=tf.int32) - 1
  return tf.maximum(ids, 0)


def pair_is_valid(ids: tf.RaggedTensor, first_length: tf.Tensor, label: tf.Tensor,
                  eos_id: int) -> tf.Tensor:
  """bool [N]: the pair fields' contract on top of `is_valid`'s: `<s> A </s>` then `B </s>`
  with A and B non-empty (3 <= first_length <= length - 2, `</s>` at first_length - 1),
  label 0 or 1."""
  n = tf.cast(ids.row_lengths(), tf.int32)
  in_range = (first_length >= 3) & (first_length <= n - 2)
  # Clamped read (out-of-range rows are invalid anyway): the first segment's closing </s>.
  at = tf.cast(ids.row_starts(), tf.int32) + tf.clip_by_value(first_length - 1, 0,
                                                              tf.maximum(n - 1, 0))
  safe = tf.concat([ids.flat_values, [-1]], 0)
  closes = tf.equal(tf.gather(safe, tf.where(n > 0, at, tf.size(ids.flat_values))), eos_id)
  return in_range & closes & ((label == 0) | (label == 1))


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
