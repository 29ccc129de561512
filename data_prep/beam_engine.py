"""The Apache Beam engine of data_prep.build_shards: the same shards as the local engine, on
any Beam runner (DirectRunner/FnApiRunner here; Dataflow, Flink, Spark elsewhere).

    file indices ─ ReadGroups (a file per call: documents, splits, groups; corpus counters)
      ─ last-document rule (side input: documents per split)
      ─ EncodePack (the tokenizer built once per worker in DoFn.setup; packs each group; keys
        each block: its shard and its place in it, data_prep/block_order.py)
      ─ Buckets (side input: spill bytes per shard; key ranges that fit the sort buffer)
      ─ GroupByKey(split, shard, bucket) ─ SortBucket (a sorted spill file per bucket)
      ─ GroupByKey(split, shard) ─ WriteShard (the buckets' records in key order) ─ counts

The steps are data_prep/doc_groups.py, group_packing.py, block_order.py and external_sort.py,
which the local engine runs too, so the output is the same files byte for byte with any
runner and worker count (buckets are key ranges: how many there are does not change the order).
Shards are written as ``<name>.tmp`` in ``output_dir``, sorted buckets and the counters (one
JSON file that the launcher reads back) in ``spill_dir``; shard_builder.py renames, writes
dataset_info.json and removes ``spill_dir``. Both must be paths every worker sees. Memory per
worker: one group's blocks, or one bucket (``settings["sort_bytes"]``). Parallelism is per file
(reading), per group (encoding) and per bucket (sorting): a corpus of one huge file reads on
one worker.
"""

from __future__ import annotations

import collections
import json
import os
import shlex

import apache_beam as beam
import tensorflow as tf
from apache_beam.options.pipeline_options import PipelineOptions

from data_prep import (
  block_order,
  corpus,
  doc_groups,
  external_sort,
  group_packing,
  sentence_encoders,
  shard_writer,
)

RESULT_FILE = "_beam_result.json"


class ReadGroups(beam.DoFn):
  """file index → its document groups as (key, [(split, sentences)], last_in_corpus); the
  file's corpus counters go to the ``stats`` output."""

  def __init__(self, files: list[str], settings: dict):
    self._files, self._s = files, settings

  def process(self, file_index: int):
    stats = corpus.CorpusStats()
    for g in doc_groups.read_file_groups(
        self._files, file_index, text_field=self._s["text_field"],
        max_line_bytes=self._s["max_line_bytes"], seed=self._s["seed"],
        validation_fraction=self._s["validation_fraction"], group_bytes=self._s["group_bytes"],
        stats=stats):
      yield g.key, g.docs, g.last_in_corpus
    yield beam.pvalue.TaggedOutput("stats", {k: getattr(stats, k) for k in (
        "documents", "sentences", "total_bytes", "invalid_utf8", "split_lines")})


def _doc_counts(group) -> dict[str, int]:
  return dict(collections.Counter(split for split, _ in group[1]))


def _sum_dicts(dicts) -> dict:
  total = collections.Counter()
  for d in dicts:
    total.update(d)
  return dict(total)


def _last_document_rule(group, counts: dict, validation_fraction: float):
  key, docs, last = group
  counts = {doc_groups.TRAIN: 0, doc_groups.VALIDATION: 0, **counts}  # a copy: a side input
  fixed = doc_groups.apply_last_document_rule(doc_groups.Group(key, docs, last), counts,
                                              validation_fraction)
  return fixed.key, fixed.docs, fixed.last_in_corpus


class EncodePack(beam.DoFn):
  """A group → ``((split, shard), entry)`` per packed block (data_prep/block_order.py)."""

  def __init__(self, vocab_dir: str, encoder: str, settings: dict, bos_id: int, eos_id: int):
    self._vocab_dir, self._encoder, self._s = vocab_dir, encoder, settings
    self._bos, self._eos = bos_id, eos_id
    self._encode = None

  def setup(self):
    # Once per worker: loading the vocabulary and tracing the tokenizer's graph take seconds.
    vocab = sentence_encoders.load_vocab(self._vocab_dir)
    self._encode = sentence_encoders.make_encoder(self._encoder, vocab)

  def process(self, group):
    key, docs, last = group
    encoded = group_packing.encoded_batches([doc_groups.Group(key, docs, last)], self._encode,
                                            self._s["batch_sentences"], num_workers=1,
                                            packing=self._s["packing"])
    for group_key, blocks in group_packing.pack_groups(
        encoded, max_seq_len=self._s["max_seq_len"], packing=self._s["packing"],
        bos_id=self._bos, eos_id=self._eos, seed=self._s["seed"]):
      for split, entry in group_packing.group_entries(group_key, blocks, seed=self._s["seed"]):
        yield (split, block_order.shard_of(entry[0], self._s["num_shards"][split])), entry


def _bucket(keyed, shard_bytes: dict, settings: dict):
  """((split, shard), entry) → ((split, shard, bucket), entry): key-range buckets that each
  fit the sort buffer (data_prep/external_sort.py)."""
  shard, entry = keyed
  n = external_sort.num_buckets(shard_bytes[shard], settings["sort_bytes"], settings["order"])
  return (*shard, external_sort.bucket_of(entry[0], n)), entry


class SortBucket(beam.DoFn):
  """((split, shard, bucket), entries) → the bucket sorted into a spill file in ``spill_dir``;
  yields ((split, shard), (bucket, path))."""

  def __init__(self, spill_dir: str, settings: dict):
    self._dir, self._s = spill_dir, settings

  def process(self, element):
    (split, shard, bucket), entries = element
    path = os.path.join(self._dir, f"{split}-{shard:05d}-{bucket:05d}")
    external_sort.write_spill(path, sorted(entries, key=block_order.sort_key(self._s["order"])))
    yield (split, shard), (bucket, path)


class WriteShard(beam.DoFn):
  """((split, shard), [(bucket, spill path) or None]) → the shard's temporary file from its
  sorted buckets in order; yields its counts."""

  def __init__(self, output_dir: str, settings: dict):
    self._dir, self._s = output_dir, settings

  def process(self, element):
    (split, shard), parts = element
    paths = [path for _, path in sorted(p for p in parts if p is not None)]
    name = shard_writer.shard_name(split, shard, self._s["num_shards"][split])
    stats = shard_writer.write_shard(
        self._dir, name, (e for path in paths for e in external_sort.read_entries(path)),
        self._s["compression"])
    for path in paths:
      os.remove(path)
    yield {"shard": [split, shard, name, stats.num_sequences, stats.num_tokens]}


def _write_result(parts: list, spill_dir: str) -> None:
  with tf.io.gfile.GFile(os.path.join(spill_dir, RESULT_FILE), "w") as f:
    json.dump(parts, f)


def build_pipeline(p: beam.Pipeline, files: list[str], output_dir: str, spill_dir: str, *,
                   vocab: sentence_encoders.Vocab, encoder: str, settings: dict) -> None:
  """Adds the shard-building steps to ``p`` (see the module docstring)."""
  read = (p | "FileIndices" >> beam.Create(list(range(len(files))))
          # One file per worker: without the reshuffle a runner may fuse all files into one.
          | "SpreadFiles" >> beam.Reshuffle()
          | "ReadGroups" >> beam.ParDo(ReadGroups(files, settings)).with_outputs(
              "stats", main="groups"))
  counts = (read.groups | "CountDocs" >> beam.Map(_doc_counts)
            | "SumDocs" >> beam.CombineGlobally(_sum_dicts))
  groups = read.groups | "LastDocRule" >> beam.Map(
      _last_document_rule, counts=beam.pvalue.AsSingleton(counts),
      validation_fraction=settings["validation_fraction"])
  packed = (groups | "SpreadGroups" >> beam.Reshuffle()
            | "EncodePack" >> beam.ParDo(EncodePack(
                vocab.vocab_dir, encoder, settings, vocab.special_ids["bos"],
                vocab.special_ids["eos"])))
  shard_bytes = (packed | "EntryBytes" >> beam.Map(
      lambda x: (x[0], external_sort.entry_bytes(x[1])))
                 | "ShardBytes" >> beam.CombinePerKey(sum))
  parts = (packed | "Buckets" >> beam.Map(_bucket, beam.pvalue.AsDict(shard_bytes), settings)
           | "ByBucket" >> beam.GroupByKey()
           | "SortBucket" >> beam.ParDo(SortBucket(spill_dir, settings)))
  # Every shard gets written, also one no block goes to.
  every_shard = p | "EveryShard" >> beam.Create([
      ((split, i), None) for split in settings["splits"]
      for i in range(settings["num_shards"][split])])
  shards = ((parts, every_shard) | "AddEmpty" >> beam.Flatten()
            | "ByShard" >> beam.GroupByKey()
            | "WriteShard" >> beam.ParDo(WriteShard(output_dir, settings)))
  final_counts = (groups | "FinalCountDocs" >> beam.Map(lambda g: {"docs": _doc_counts(g)}))
  stats = read.stats | "Stats" >> beam.Map(lambda s: {"stats": s})
  _ = ((shards, final_counts, stats) | "Results" >> beam.Flatten()
       | "AllResults" >> beam.combiners.ToList()
       | "WriteResult" >> beam.Map(_write_result, spill_dir))


def run(files: list[str], output_dir: str, spill_dir: str, *, vocab: sentence_encoders.Vocab,
        encoder: str, settings: dict, beam_options: str):
  """Runs the pipeline to completion; returns (shard stats per split, documents per split,
  corpus stats) as shard_builder's local engine does. Temporary shards stay for the caller."""
  options = PipelineOptions(shlex.split(beam_options or ""))
  with beam.Pipeline(options=options) as p:
    build_pipeline(p, files, output_dir, spill_dir, vocab=vocab, encoder=encoder,
                   settings=settings)
  path = os.path.join(spill_dir, RESULT_FILE)
  with tf.io.gfile.GFile(path) as f:
    parts = json.load(f)
  tf.io.gfile.remove(path)
  shard_stats = {split: [shard_writer.ShardStats(shard_writer.shard_name(
      split, i, settings["num_shards"][split])) for i in range(settings["num_shards"][split])]
                 for split in settings["splits"]}
  doc_counts = collections.Counter({doc_groups.TRAIN: 0, doc_groups.VALIDATION: 0})
  stats = corpus.CorpusStats(files=len(files))
  for part in parts:
    if "shard" in part:
      split, shard, _, sequences, tokens = part["shard"]
      shard_stats[split][shard].num_sequences = sequences
      shard_stats[split][shard].num_tokens = tokens
    elif "docs" in part:
      doc_counts.update(part["docs"])
    else:
      for k, v in part["stats"].items():
        setattr(stats, k, getattr(stats, k) + v)
  stats.bytes_read = stats.total_bytes
  return shard_stats, dict(doc_counts), stats
