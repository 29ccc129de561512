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
dataset_info.json and removes ``spill_dir``. Memory per worker: one group's blocks, or one
bucket (``settings.sort_buffer_bytes``). Parallelism is per file (reading), per group (encoding)
and per bucket (sorting): a corpus of one huge file reads on one worker.

File access inside the pipeline goes through Beam's own file systems
(``apache_beam.io.filesystems.FileSystems``: ``open``, ``create``, ``delete``; gs:// is native
there, s3:// / hdfs:// with their Beam extras), never a local path API or ``tf.io.gfile``: the
inputs are opened with ``FileSystems.open`` (``BeamFiles``), the sorted buckets and the result
are written with ``FileSystems.create``, and the vocabulary travels inside the pipeline (the
bytes the launcher read and hashed), so a Dataflow / Flink / Spark job needs no shared mount:
only paths its file systems know (``check_paths`` refuses others, e.g. ram://, up front). A
worker's only local files are scratch: the vocabulary copy the tokenizer loads from, and each
shard written by TF's TFRecordWriter (the local engine's bytes, gzip included) before it is
copied to its ``FileSystems.create`` stream.
"""

from __future__ import annotations

import collections
import json
import os
import shlex
import tempfile

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
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
from data_prep.shard_settings import ShardSettings

RESULT_FILE = "_beam_result.json"
_COPY_CHUNK = 1 << 20


class BeamPathError(ValueError):
  """A path no Beam file system handles; the message names the flag."""


def check_paths(paths: dict[str, list[str]]) -> None:
  """Raises BeamPathError for a path (of the flag it is keyed by) whose scheme Beam's
  FileSystems do not handle here (ram://, or gs:// without apache-beam[gcp])."""
  for flag, values in paths.items():
    for path in values:
      if path == corpus.STDLIB:
        continue
      try:
        FileSystems.get_filesystem(path)
      except ValueError as e:
        raise BeamPathError(
            f"{flag}={path}: --engine=beam reads and writes through Beam's file systems, which "
            f"do not handle '{FileSystems.get_scheme(path)}://' here (use a local path, gs:// "
            "with apache-beam[gcp], ...; or --engine=local)") from e


def _open(path: str):
  return FileSystems.open(path, mime_type="application/octet-stream",
                          compression_type=CompressionTypes.UNCOMPRESSED)


def _create(path: str):
  return FileSystems.create(path, mime_type="application/octet-stream",
                            compression_type=CompressionTypes.UNCOMPRESSED)


class BeamFiles:
  """corpus.iter_documents' ``fs`` on Beam's file systems: seekable binary files and sizes."""

  @staticmethod
  def open(path: str, mode: str = "rb"):
    if mode != "rb":
      raise ValueError(f"BeamFiles.open reads only (mode {mode!r})")
    return _open(path)

  @staticmethod
  def getsize(path: str) -> int:
    return FileSystems.get_filesystem(path).size(path)


class ReadGroups(beam.DoFn):
  """file index → its document groups as (key, [(split, sentences)], last_in_corpus); the
  file's corpus counters go to the ``stats`` output."""

  def __init__(self, files: list[str], settings: ShardSettings):
    self._files, self._s = files, settings

  def process(self, file_index: int):
    stats = corpus.CorpusStats()
    for g in doc_groups.read_file_groups(
        self._files, file_index, text_field=self._s.text_field,
        max_line_bytes=self._s.max_line_bytes, seed=self._s.seed,
        validation_fraction=self._s.validation_fraction, group_bytes=self._s.group_bytes,
        stats=stats, fs=BeamFiles):
      yield g.key, g.docs, g.last_in_corpus
    yield beam.pvalue.TaggedOutput("stats", {k: getattr(stats, k) for k in (
        "documents", "sentences", "total_bytes", "invalid_utf8", "split_lines", "null_texts")})


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
  """A group → ``((split, shard), entry)`` per packed block (data_prep/block_order.py).

  Holds the vocabulary's bytes (``sentence_encoders.Vocab``): workers never read --vocab_dir.
  """

  def __init__(self, vocab: sentence_encoders.Vocab, settings: ShardSettings):
    self._vocab, self._s = vocab, settings
    self._bos, self._eos = vocab.special_ids["bos"], vocab.special_ids["eos"]
    self._encode = None

  def setup(self):
    # Once per worker: building the tokenizer and tracing its graph take seconds.
    self._encode = sentence_encoders.make_encoder(self._s.encoder, self._vocab)

  def process(self, group):
    key, docs, last = group
    encoded = group_packing.encoded_batches([doc_groups.Group(key, docs, last)], self._encode,
                                            self._s.batch_sentences, num_workers=1,
                                            packing=self._s.packing)
    for group_key, blocks in group_packing.pack_groups(
        encoded, max_seq_len=self._s.max_seq_len, packing=self._s.packing,
        bos_id=self._bos, eos_id=self._eos, seed=self._s.seed):
      for split, entry in group_packing.group_entries(group_key, blocks, seed=self._s.seed):
        yield (split, block_order.shard_of(entry[0], self._s.shard_count(split))), entry


def _bucket(keyed, shard_bytes: dict, settings: ShardSettings):
  """((split, shard), entry) → ((split, shard, bucket), entry): key-range buckets that each
  fit the sort buffer (data_prep/external_sort.py)."""
  shard, entry = keyed
  n = external_sort.num_buckets(shard_bytes[shard], settings.sort_buffer_bytes, settings.order)
  return (*shard, external_sort.bucket_of(entry[0], n)), entry


class SortBucket(beam.DoFn):
  """((split, shard, bucket), entries) → the bucket sorted into a spill-format file in
  ``spill_dir`` (``FileSystems.create``); yields ((split, shard), (bucket, path))."""

  def __init__(self, spill_dir: str, settings: ShardSettings):
    self._dir, self._s = spill_dir, settings

  def process(self, element):
    (split, shard, bucket), entries = element
    path = FileSystems.join(self._dir, f"{split}-{shard:05d}-{bucket:05d}")
    f = _create(path)
    try:
      external_sort.write_entries(f, sorted(entries, key=block_order.sort_key(self._s.order)))
    finally:
      f.close()
    yield (split, shard), (bucket, path)


def _read_buckets(paths: list[str]):
  """The entries of the sorted bucket files ``paths``, in order (``FileSystems.open``)."""
  for path in paths:
    f = _open(path)
    try:
      yield from external_sort.iter_entries(f, path)
    finally:
      f.close()


def _copy_to(local: str, path: str) -> None:
  """Copies local scratch file ``local`` to ``path`` through ``FileSystems.create``."""
  out = _create(path)
  try:
    with open(local, "rb") as src:  # local-only: the worker's scratch copy of the shard
      while chunk := src.read(_COPY_CHUNK):
        out.write(chunk)
  finally:
    out.close()


class WriteShard(beam.DoFn):
  """((split, shard), [(bucket, bucket file) or None]) → the shard's temporary file
  ``output_dir/<name>.tmp`` from its sorted buckets in order; yields its counts.

  TF's TFRecordWriter writes the shard to a worker-local scratch file (the local engine's
  bytes, gzip included), which is then copied through ``FileSystems.create``."""

  def __init__(self, output_dir: str, settings: ShardSettings):
    self._dir, self._s = output_dir, settings

  def process(self, element):
    (split, shard), parts = element
    paths = [path for _, path in sorted(p for p in parts if p is not None)]
    name = shard_writer.shard_name(split, shard, self._s.shard_count(split))
    with tempfile.TemporaryDirectory(prefix="roberta_tf-shard-") as tmp:  # local-only: scratch
      local = os.path.join(tmp, name)
      stats = shard_writer.write_records(local, name, _read_buckets(paths),
                                         self._s.compression)
      _copy_to(local, FileSystems.join(self._dir, name + shard_writer.TMP_SUFFIX))
    if paths:
      FileSystems.delete(paths)
    yield {"shard": [split, shard, name, stats.num_sequences, stats.num_tokens]}


def _write_result(parts: list, spill_dir: str) -> None:
  f = _create(FileSystems.join(spill_dir, RESULT_FILE))
  try:
    f.write(json.dumps(parts).encode("utf-8"))
  finally:
    f.close()


def build_pipeline(p: beam.Pipeline, files: list[str], output_dir: str, spill_dir: str, *,
                   vocab: sentence_encoders.Vocab, settings: ShardSettings) -> None:
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
      validation_fraction=settings.validation_fraction)
  packed = (groups | "SpreadGroups" >> beam.Reshuffle()
            | "EncodePack" >> beam.ParDo(EncodePack(vocab, settings)))
  shard_bytes = (packed | "EntryBytes" >> beam.Map(
      lambda x: (x[0], external_sort.entry_bytes(x[1])))
                 | "ShardBytes" >> beam.CombinePerKey(sum))
  parts = (packed | "Buckets" >> beam.Map(_bucket, beam.pvalue.AsDict(shard_bytes), settings)
           | "ByBucket" >> beam.GroupByKey()
           | "SortBucket" >> beam.ParDo(SortBucket(spill_dir, settings)))
  # Every shard gets written, also one no block goes to.
  every_shard = p | "EveryShard" >> beam.Create([
      ((split, i), None) for split in settings.splits
      for i in range(settings.shard_count(split))])
  shards = ((parts, every_shard) | "AddEmpty" >> beam.Flatten()
            | "ByShard" >> beam.GroupByKey()
            | "WriteShard" >> beam.ParDo(WriteShard(output_dir, settings)))
  final_counts = (groups | "FinalCountDocs" >> beam.Map(lambda g: {"docs": _doc_counts(g)}))
  stats = read.stats | "Stats" >> beam.Map(lambda s: {"stats": s})
  _ = ((shards, final_counts, stats) | "Results" >> beam.Flatten()
       | "AllResults" >> beam.combiners.ToList()
       | "WriteResult" >> beam.Map(_write_result, spill_dir))


def run(files: list[str], output_dir: str, spill_dir: str, *, vocab: sentence_encoders.Vocab,
        settings: ShardSettings):
  """Runs the pipeline to completion; returns (shard stats per split, documents per split,
  corpus stats) as shard_builder's local engine does. Temporary shards stay for the caller.
  ``settings`` (shard_settings.ShardSettings, pickled with the DoFns that read it) names the
  encoder and the pipeline options (--beam_options).

  ``files``, ``output_dir`` and ``spill_dir`` are paths of Beam's file systems (``check_paths``);
  the launcher reads the result file through them too."""
  check_paths({"--input": files, "--output_dir": [output_dir, spill_dir]})
  options = PipelineOptions(shlex.split(settings.beam_options or ""))
  with beam.Pipeline(options=options) as p:
    build_pipeline(p, files, output_dir, spill_dir, vocab=vocab, settings=settings)
  path = FileSystems.join(spill_dir, RESULT_FILE)
  f = _open(path)
  try:
    parts = json.loads(f.read().decode("utf-8"))
  finally:
    f.close()
  FileSystems.delete([path])
  shard_stats = {split: [shard_writer.ShardStats(shard_writer.shard_name(
      split, i, settings.shard_count(split))) for i in range(settings.shard_count(split))]
                 for split in settings.splits}
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
