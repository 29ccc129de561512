"""The Apache Beam engine of data_prep.build_shards: the same shards as the local engine, on
any Beam runner (DirectRunner/FnApiRunner here; Dataflow, Flink, Spark elsewhere).

    file indices ─ ReadGroups (a file per call: documents, splits, groups; corpus counters)
      ─ last-document rule (side input: documents per split)
      ─ EncodePack (the tokenizer built once per worker in DoFn.setup; packs each group)
      ─ AssignShards (side input: blocks of earlier groups per split, for the round-robin)
      ─ GroupByKey(split, shard) ─ WriteShard (a group's records in group order) ─ shard counts

The steps are data_prep/doc_groups.py and data_prep/group_packing.py, which the local engine
runs too, so the output is the same files byte for byte with any runner and worker count.
Shards are written as ``<name>.tmp`` in ``output_dir``; the counters go to one JSON file there
that the launcher reads back and removes; shard_builder.py renames and writes
dataset_info.json. ``output_dir`` (and the input files) must be paths every worker sees.
Parallelism is per file (reading) and per group (encoding): a corpus of one huge file reads
on one worker.
"""

from __future__ import annotations

import collections
import json
import os
import shlex

import apache_beam as beam
import tensorflow as tf
from apache_beam.options.pipeline_options import PipelineOptions

from data_prep import corpus, doc_groups, group_packing, sentence_encoders, shard_writer
from roberta_tf.data import example_spec

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
  """A group → (split, group key, [(serialized block, length)]) per split it has blocks in."""

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
      for split, split_blocks in blocks.items():
        yield split, group_key, [(example_spec.serialize_block(b), len(b)) for b in split_blocks]


def _blocks_before(counts: list) -> dict:
  """[(split, group key, blocks)] → {(split, group key): blocks of that split's earlier groups}."""
  before, running = {}, collections.Counter()
  for split, key, n in sorted(counts):
    before[(split, key)] = running[split]
    running[split] += n
  return before


def _assign(packed, before: dict, settings: dict):
  split, key, records = packed
  per_shard = collections.defaultdict(list)
  for shard, record in group_packing.assign_shards(
      records, split=split, group_key=key, seed=settings["seed"],
      shuffle=settings["shuffle_blocks"], blocks_before=before[(split, key)],
      num_shards=settings["num_shards"][split]):
    per_shard[shard].append(record)
  for shard, shard_records in per_shard.items():
    yield (split, shard), (key, shard_records)


class WriteShard(beam.DoFn):
  """((split, shard), [(group key, records) or None]) → the shard's temporary file; its counts."""

  def __init__(self, output_dir: str, settings: dict):
    self._dir, self._s = output_dir, settings

  def process(self, element):
    (split, shard), parts = element
    name = shard_writer.shard_name(split, shard, self._s["num_shards"][split])
    options = tf.io.TFRecordOptions(
        compression_type=shard_writer.COMPRESSIONS[self._s["compression"]])
    sequences = tokens = 0
    with tf.io.TFRecordWriter(os.path.join(self._dir, name + shard_writer.TMP_SUFFIX),
                              options) as w:
      for _, records in sorted((p for p in parts if p is not None), key=lambda p: p[0]):
        for record, length in records:
          w.write(record)
          sequences += 1
          tokens += length
    yield {"shard": [split, shard, name, sequences, tokens]}


def _write_result(parts: list, output_dir: str) -> None:
  with tf.io.gfile.GFile(os.path.join(output_dir, RESULT_FILE), "w") as f:
    json.dump(parts, f)


def build_pipeline(p: beam.Pipeline, files: list[str], output_dir: str, *,
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
  before = (packed | "CountBlocks" >> beam.Map(lambda x: (x[0], x[1], len(x[2])))
            | "AllCounts" >> beam.combiners.ToList()
            | "BlocksBefore" >> beam.Map(_blocks_before))
  assigned = packed | "AssignShards" >> beam.FlatMap(
      _assign, before=beam.pvalue.AsSingleton(before), settings=settings)
  # Every shard gets written, also one no block is dealt to.
  every_shard = p | "EveryShard" >> beam.Create([
      ((split, i), None) for split in settings["splits"]
      for i in range(settings["num_shards"][split])])
  shards = ((assigned, every_shard) | "AddEmpty" >> beam.Flatten()
            | "ByShard" >> beam.GroupByKey()
            | "WriteShard" >> beam.ParDo(WriteShard(output_dir, settings)))
  final_counts = (groups | "FinalCountDocs" >> beam.Map(lambda g: {"docs": _doc_counts(g)}))
  stats = read.stats | "Stats" >> beam.Map(lambda s: {"stats": s})
  _ = ((shards, final_counts, stats) | "Results" >> beam.Flatten()
       | "AllResults" >> beam.combiners.ToList()
       | "WriteResult" >> beam.Map(_write_result, output_dir))


def run(files: list[str], output_dir: str, *, vocab: sentence_encoders.Vocab, encoder: str,
        settings: dict, beam_options: str):
  """Runs the pipeline to completion; returns (shard stats per split, documents per split,
  corpus stats) as shard_builder's local engine does. Temporary shards stay for the caller."""
  options = PipelineOptions(shlex.split(beam_options or ""))
  with beam.Pipeline(options=options) as p:
    build_pipeline(p, files, output_dir, vocab=vocab, encoder=encoder, settings=settings)
  path = os.path.join(output_dir, RESULT_FILE)
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
