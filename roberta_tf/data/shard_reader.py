"""The source of the pretraining pipeline: one shard's records, validated, indexed and seeded.

`read_shard(source, shard, epoch, start)` reads a TFRecord shard from record `start` on, parses
and checks its records `_CHUNK` at a time, pads them to [S], counts them against the number
dataset_info.json lists, and gives each its mask seed [shard_key(seed, mask copy of the epoch,
shard), record index] (masking.py). pipeline.py and training_stream.py decide which shards are
read in which order; this module only reads one.

Damage (a read or parse error, or an invalid record) ends the shard before its chunk; the
records counted then fall short of the listed count, which fails the read at the shard's end
(or, with `skip_corrupt_shards`, warns on stderr and counts the shard in `skipped_shards`).
"""

from __future__ import annotations

import dataclasses
import functools
import sys

import tensorflow as tf

from roberta_tf.data import dataset_info, example_spec, packings
from roberta_tf.data.masking import MaskingConfig, shard_key
from roberta_tf.data.vocab_info import VocabInfo

# Records parsed and validated per op. In skip mode a damaged shard is used up to the start of
# the chunk holding the damage, so up to _CHUNK - 1 good records before it are lost too.
_CHUNK = 64


@dataclasses.dataclass(frozen=True, eq=False)
class ShardSource:
  """The shards of one split and what reading one of them needs.

  Attributes:
    files: tf.string [N], the split's shard paths.
    counts: int64 [N], each shard's num_sequences in dataset_info.json (-1: not recorded).
    num_sequences: the same counts as Python ints (training_stream.py plans with them).
    compression: the TFRecord compression type ("" or "GZIP").
    pairs: the records carry the pair fields (a pair packing, packings.PAIR_PACKINGS).
    documents: the records carry document starts (packings.DOCUMENT_PACKINGS); read as
      per-token `document_ids`.
    max_seq_len: S; records are checked against it and padded to it.
    vocab: the ids records are checked against; its pad id pads them.
    seed, masking: what a record's mask seed derives from (the data seed, the mask copy).
    skip_corrupt_shards, skipped_shards: see InputConfig and build_pretraining_dataset.
  """
  files: tf.Tensor
  counts: tf.Tensor
  num_sequences: tuple[int, ...]
  compression: str
  pairs: bool
  max_seq_len: int
  vocab: VocabInfo
  seed: int
  masking: MaskingConfig
  skip_corrupt_shards: bool = False
  skipped_shards: tf.Variable | None = None
  documents: bool = False

  @classmethod
  def for_split(cls, data_dir: str, info: dict, split: str, files: list[str], vocab: VocabInfo,
                config, masking: MaskingConfig,
                skipped_shards: tf.Variable | None = None) -> ShardSource:
    """The source of `split`'s `files` (dataset_info.split_files) under an InputConfig.

    Raises:
      dataset_info.DatasetInfoError: dataset_info.json names an unknown compression.
    """
    counts = [int(s.get("num_sequences", -1)) for s in info["splits"][split]["shards"]]
    compression = dataset_info.COMPRESSIONS.get(info.get("compression", "none"))
    if compression is None:
      raise dataset_info.DatasetInfoError(
          f"{data_dir}/{dataset_info.FILENAME}: unknown compression {info['compression']!r}")
    return cls(files=tf.constant(files), counts=tf.constant(counts, tf.int64),
               num_sequences=tuple(counts), compression=compression,
               pairs=info.get("packing") in packings.PAIR_PACKINGS,
               max_seq_len=config.max_seq_len, vocab=vocab, seed=config.seed, masking=masking,
               skip_corrupt_shards=config.skip_corrupt_shards, skipped_shards=skipped_shards,
               documents=info.get("packing") in packings.DOCUMENT_PACKINGS)


def read_shard(source: ShardSource, shard_index, epoch, start=0) -> tf.data.Dataset:
  """The shard's valid records from record ``start`` on as {input_ids [S], seed [2]} (pairs:
  and first_length, nsp_label scalars; document packings: and document_ids [S]); fails or warns
  on damage (see the module docstring).

  Args:
    shard_index: int64 scalar, the shard's index in the split; epoch: int64 scalar;
    start: the first record read (skip() on a TFRecordDataset steps over records without
      parsing them: at most a shard).
  """
  path = source.files[shard_index]
  expected = source.counts[shard_index]
  key = shard_key(source.seed, source.masking.mask_copy(epoch), shard_index)
  # Records are parsed and checked _CHUNK at a time (one op each, not one per record).
  chunks = tf.data.TFRecordDataset(path, compression_type=source.compression).skip(start).batch(
      _CHUNK)
  chunks = chunks.map(functools.partial(_parse_chunk, source)).ignore_errors().take_while(
      lambda ids, ok: ok)
  chunks = chunks.map(lambda x, ok: (x, tf.constant(False)))
  end = tf.data.Dataset.from_tensors((_empty_chunk(source), tf.constant(True)))
  indexed = chunks.concatenate(end).scan(tf.cast(start, tf.int64), _count).map(
      functools.partial(_check, source, path, expected, key))
  return indexed.filter(lambda x, is_end: tf.logical_not(is_end)).map(
      lambda x, is_end: x).unbatch()


def _parse_chunk(source: ShardSource, serialized):
  """Serialized records [C] -> ({input_ids [C, S] (and pair fields [C], or document_ids
  [C, S])}, all valid)."""
  vocab, s = source.vocab, source.max_seq_len
  extra = {}
  if source.pairs:
    ids, first, label = example_spec.parse_pair_batch(serialized)
    extra = {"first_length": first, "nsp_label": label}
    pair_ok = example_spec.pair_is_valid(ids, first, label, vocab.special_ids["eos"])
  elif source.documents:
    ids, starts = example_spec.parse_documents_batch(serialized)
    extra = {"document_ids": example_spec.document_ids(starts, s)}
    documents_ok = example_spec.documents_are_valid(
        ids, starts, vocab.special_ids["bos"], vocab.special_ids["eos"])
  else:
    ids = example_spec.parse_batch(serialized)
  valid = example_spec.is_valid(
      ids, max_seq_len=s, vocab_size=vocab.vocab_size,
      bos_id=vocab.special_ids["bos"], eos_id=vocab.special_ids["eos"])
  if source.pairs:
    valid = valid & pair_ok
  if source.documents:
    valid = valid & documents_ok
  x = {"input_ids": ids.to_tensor(default_value=vocab.pad_id, shape=[None, s]), **extra}
  return x, tf.reduce_all(valid)


def _empty_chunk(source: ShardSource) -> dict:
  """A chunk of no records: the end marker's payload."""
  empty = {"input_ids": tf.zeros([0, source.max_seq_len], tf.int32)}
  if source.pairs:
    empty.update(first_length=tf.zeros([0], tf.int32), nsp_label=tf.zeros([0], tf.int32))
  if source.documents:
    empty["document_ids"] = tf.zeros([0, source.max_seq_len], tf.int32)
  return empty


def _count(offset, chunk):
  """scan(): each chunk with the index of its first record in the shard."""
  x, is_end = chunk
  return offset + tf.shape(x["input_ids"], out_type=tf.int64)[0], (offset, x, is_end)


def _check(source: ShardSource, path, expected, key, offset, x, is_end):
  """At the end marker: fails (or warns and counts) when the records read fall short of
  `expected`. Every chunk: its records' mask seeds [key, record index]."""
  s, vocab = source.max_seq_len, source.vocab
  damaged = tf.logical_and(is_end, tf.logical_and(expected >= 0, offset != expected))
  message = ["shard", path, "is truncated or corrupt:", offset,
             "records readable and valid where dataset_info.json lists", expected,
             "(valid: <s> first, </s> last, at most", s, "ids in [0,", vocab.vocab_size,
             ")" + ("; pair fields in range" if source.pairs else "") +
             ("; document starts at <s>" if source.documents else "") +
             "); rebuild it (training can skip it: --skip_corrupt_shards)"]
  if source.skip_corrupt_shards:
    tf.cond(damaged, lambda: _note_skipped(source, message[1:6]), lambda: tf.constant(False))
  else:
    tf.debugging.Assert(tf.logical_not(damaged), message, summarize=1)
  n = tf.shape(x["input_ids"], out_type=tf.int64)[0]
  seeds = tf.stack([tf.fill([n], key), offset + tf.range(n, dtype=tf.int64)], axis=1)
  return {**x, "seed": seeds}, is_end


def _note_skipped(source: ShardSource, what: list) -> tf.Tensor:
  """The skip-mode side effects: a warning on stderr, one more in `skipped_shards`."""
  tf.print("WARNING: skipped the damaged part of", *what, output_stream=sys.stderr)
  if source.skipped_shards is not None:
    source.skipped_shards.assign_add(1)
  return tf.constant(True)
