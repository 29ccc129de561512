"""The local engine of data_prep.build_shards: this process encodes, packs and writes the shards.

Two passes, the same steps as the Beam engine (data_prep/beam_engine.py), so the same files:

    scatter: files in order ─ document groups (data_prep/doc_groups.py) ─ encoded on a few
      threads and packed (data_prep/group_packing.py) ─ each block appended to its shard's
      spill file in ``spill_dir`` (data_prep/block_order.py decides the shard)
    gather: each shard's spill file read back in key order (data_prep/external_sort.py) ─
      written as the shard (data_prep/shard_writer.py, under its temporary name)

Memory: a few encoding batches, one group's blocks and one sort buffer
(``settings.sort_buffer_bytes``), whatever the corpus size. shard_builder.py decides the
settings, renames the shards and writes dataset_info.json.
"""

from __future__ import annotations

from data_prep import block_order, corpus, doc_groups, external_sort, group_packing, shard_writer
from roberta_tf.common import files as files_lib

TRAIN = doc_groups.TRAIN
VALIDATION = doc_groups.VALIDATION


def run(files, output_dir, spill_dir, *, vocab, encode, settings, num_workers, progress):
  """Builds the temporary shards: returns (shard stats per split, documents per split,
  corpus stats).

  Args:
    files: the resolved inputs (corpus.resolve_inputs); output_dir: where the shards go;
    spill_dir: an existing local directory for the spill files.
    vocab: sentence_encoders' vocabulary (its special ids); encode: the sentence encoder.
    settings: the build's shard_settings.ShardSettings; num_workers: encoding threads.
    progress: a data_prep.progress.Progress, or None.
  """
  reading = _Reading(files, settings, progress)
  spills = _spill_writers(spill_dir, settings)
  try:
    sequences = _scatter(reading, spills, vocab=vocab, encode=encode, settings=settings,
                         num_workers=num_workers)
  finally:
    for writers in spills.values():
      for w in writers:
        w.close()
  shard_stats = _gather(spills, output_dir, settings, sequences, progress)
  return shard_stats, reading.doc_counts, reading.stats


class _Reading:
  """The corpus read group by group, with what it counts and the progress of the reading.

  Attributes:
    stats: the corpus stats of the files read whole; file_stats: of the file being read
      (added to ``stats`` when finished, so progress reads stats + file_stats).
    doc_counts: documents per split so far.
  """

  def __init__(self, files, settings, progress):
    self.files = files
    self.settings = settings
    self.progress = progress
    self.stats = corpus.CorpusStats()
    self.doc_counts = {TRAIN: 0, VALIDATION: 0}
    self.file_stats = corpus.CorpusStats()
    self.files_bytes = (sum(files_lib.getsize(f) for f in files) if files != [corpus.STDLIB]
                        else 0)

  def groups(self):
    """Every file's document groups, in order, the last-document rule applied."""
    settings = self.settings
    for i in range(len(self.files)):
      for group in doc_groups.read_file_groups(
          self.files, i, text_field=settings.text_field,
          max_line_bytes=settings.max_line_bytes, seed=settings.seed,
          validation_fraction=settings.validation_fraction,
          group_bytes=settings.group_bytes, stats=self.file_stats):
        for split, _ in group.docs:
          self.doc_counts[split] += 1
        # The last group comes last here: every other document is counted by now.
        yield doc_groups.apply_last_document_rule(group, self.doc_counts,
                                                  settings.validation_fraction)
      _add_stats(self.stats, self.file_stats)
      self.file_stats = corpus.CorpusStats()  # counted once: progress reads both

  def report(self, sequences, force=False):
    if self.progress:
      total = self.files_bytes or self.stats.total_bytes + self.file_stats.total_bytes
      self.progress.update(self.stats.bytes_read + self.file_stats.bytes_read, total, sequences,
                           force=force)


def _add_stats(total: corpus.CorpusStats, part: corpus.CorpusStats) -> None:
  for field in ("files", "documents", "sentences", "bytes_read", "total_bytes", "invalid_utf8",
                "split_lines", "null_texts"):
    setattr(total, field, getattr(total, field) + getattr(part, field))


def _spill_writers(spill_dir: str, settings) -> dict[str, list[external_sort.SpillWriter]]:
  return {split: [external_sort.SpillWriter(files_lib.join(spill_dir, shard_writer.shard_name(
      split, i, settings.shard_count(split)))) for i in range(settings.shard_count(split))]
          for split in settings.splits}


def _scatter(reading: _Reading, spills, *, vocab, encode, settings, num_workers) -> int:
  """Encodes and packs the corpus into the spill files; returns the sequences written."""
  sequences = 0
  encoded = group_packing.encoded_batches(reading.groups(), encode, settings.batch_sentences,
                                          num_workers, packing=settings.packing)
  for key, blocks in group_packing.pack_groups(
      encoded, max_seq_len=settings.max_seq_len, packing=settings.packing,
      bos_id=vocab.special_ids["bos"], eos_id=vocab.special_ids["eos"],
      seed=settings.seed):
    for split, entry in group_packing.group_entries(key, blocks, seed=settings.seed):
      spills[split][block_order.shard_of(entry[0], len(spills[split]))].add(entry)
      sequences += 1
    reading.report(sequences)
  reading.report(sequences, force=True)
  return sequences


def _gather(spills, output_dir, settings, sequences, progress):
  """Writes each shard from its spill file, in key order; returns the shard stats per split."""
  if progress:
    progress.reset("writing shards")
  total = sum(w.num_bytes for writers in spills.values() for w in writers)
  done, shard_stats = 0, {}
  for split, writers in spills.items():
    shard_stats[split] = []
    for i, w in enumerate(writers):
      ordered = external_sort.sorted_entries(w.path, order=settings.order,
                                             sort_bytes=settings.sort_buffer_bytes)
      shard_stats[split].append(shard_writer.write_shard(
          output_dir, shard_writer.shard_name(split, i, len(writers)), ordered,
          settings.compression))
      done += w.num_bytes
      if progress:
        progress.update(done, total, sequences, force=done == total)
  return shard_stats
