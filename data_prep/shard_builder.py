r"""Encodes a text corpus and packs it into TFRecord shards with a dataset_info.json.

The library behind `python -m data_prep.build_shards` (the binary is data_prep/build_shards.py).
The vocabulary files (vocab.json, merges.txt) are copied beside the shards, so a shard
directory is self-contained: training, inspection and export find the vocabulary there.

Documents stream from data_prep/corpus.py, are encoded with the project's TF-native tokenizer
(data_prep/sentence_encoders.py), packed into blocks (data_prep/packing.py) and written
round-robin through a seeded shuffle buffer into the shards (data_prep/shard_writer.py).
Nothing holds the whole corpus: memory is a few encoding batches plus the shuffle buffer.

Validation takes whole documents: each goes there with probability ``validation_fraction``,
drawn from a generator seeded by ``seed`` (so the split is deterministic for a seed and the
input). When ``validation_fraction > 0`` and the corpus has two or more documents, neither split
is left empty: the last document goes to whichever split has none.

Shards are written under temporary names, renamed when all are complete, and dataset_info.json
is written last; on any failure the temporary files are removed, so a directory holding
dataset_info.json is a complete one.
"""

from __future__ import annotations

import os
import random
import re
import time
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from data_prep import corpus, sentence_encoders, shard_writer
from data_prep import packing as packing_lib
from data_prep import progress as progress_lib
from roberta_tf.data import dataset_info
from roberta_tf.tokenization import vocab_files

TRAIN = "train"
VALIDATION = "validation"
_SHARD_RE = re.compile(r"^(train|validation)-\d{5}-of-\d{5}\.tfrecord(\.tmp)?$")


class BuildError(ValueError):
  """A bad argument or input for shard building; the message names the flag or file."""


def _assign_splits(documents: Iterable[list[str]], validation_fraction: float, seed: int,
                   counts: dict[str, int]) -> Iterator[tuple[str, list[str]]]:
  """Labels each document train or validation (see the module docstring); counts them."""
  rng = random.Random(f"{seed}/validation")
  held = None  # one document of look-ahead: the last one may be moved to an empty split
  for doc in documents:
    if held is not None:
      counts[held[0]] += 1
      yield held
    split = VALIDATION if validation_fraction > 0 and rng.random() < validation_fraction else TRAIN
    held = (split, doc)
  if held is not None:
    split, doc = held
    if counts[TRAIN] == 0:  # also a one-document corpus: train it, no validation split
      split = TRAIN
    elif validation_fraction > 0 and counts[VALIDATION] == 0:
      split = VALIDATION
    counts[split] += 1
    yield split, doc



def _prepare_output_dir(output_dir: str, overwrite: bool) -> bool:
  """Creates ``output_dir`` or checks it may be written; returns whether it was created."""
  if os.path.exists(output_dir) and not os.path.isdir(output_dir):
    raise BuildError(f"--output_dir {output_dir!r} exists and is not a directory")
  if os.path.isdir(output_dir):
    if os.listdir(output_dir) and not overwrite:
      raise BuildError(f"--output_dir {output_dir!r} is not empty; pass --overwrite to replace "
                       "its shards")
    # The old dataset_info.json goes first: until the new one is written the directory must not
    # look complete.
    info_path = os.path.join(output_dir, dataset_info.FILENAME)
    if os.path.exists(info_path):
      os.remove(info_path)
    return False
  try:
    os.makedirs(output_dir)
  except OSError as e:
    raise BuildError(f"cannot create --output_dir {output_dir!r}: {e.strerror}") from e
  return True


def _remove_stale_shards(output_dir: str, keep: set[str]) -> None:
  """Removes shards of an earlier run (--overwrite) that the new run does not rewrite."""
  for name in os.listdir(output_dir):
    if _SHARD_RE.match(name) and name not in keep:
      os.remove(os.path.join(output_dir, name))


def _split_info(shards: list[shard_writer.ShardStats], max_seq_len: int) -> dict[str, Any]:
  sequences = sum(s.num_sequences for s in shards)
  tokens = sum(s.num_tokens for s in shards)
  return {
      "num_sequences": sequences,
      "num_tokens": tokens,
      "packing_efficiency": round(tokens / (sequences * max_seq_len), 6) if sequences else 0.0,
      "shards": [{"file": s.file, "num_sequences": s.num_sequences, "num_tokens": s.num_tokens}
                 for s in shards],
  }


def _pack_batch(batch: sentence_encoders.Batch, values, row_splits,
                packers: dict[str, packing_lib.Packer]) -> None:
  """Feeds one encoded batch's sentences to the packer of their document's split."""
  # The packer holds int64 ids: convert the batch once, so each sentence is a view, not a copy.
  values = np.asarray(values, np.int64)
  i = 0
  for split, count, ends_document in batch.segments:
    packer = packers[split]
    for j in range(i, i + count):
      packer.add_sentence(values[row_splits[j]:row_splits[j + 1]])
    i += count
    if ends_document:
      packer.end_document()


def build_shards(input_spec: str, vocab_dir: str, output_dir: str, *, max_seq_len: int = 512,
                 packing: str = packing_lib.FULL_SENTENCES, num_shards: int = 16,
                 num_validation_shards: int = 1, validation_fraction: float = 0.01,
                 seed: int = 0, compression: str = "none", text_field: str = "text",
                 max_line_bytes: int = corpus.DEFAULT_MAX_LINE_BYTES, overwrite: bool = False,
                 encoder: str | sentence_encoders.Encoder = "tf", num_workers: int | None = None,
                 batch_sentences: int = 4096, shuffle_buffer: int = 4096,
                 progress: progress_lib.Progress | None = None) -> dict[str, Any]:
  """Builds the shards and dataset_info.json in ``output_dir``; returns the info written.

  Args:
    input_spec: files, globs, directories (comma list) or ``stdlib``; see data_prep/corpus.py.
    vocab_dir: holds vocab.json + merges.txt.
    output_dir: created if absent; must be empty unless ``overwrite``.
    max_seq_len: ids per block at most, ``<s>`` and ``</s>`` included.
    packing: ``full_sentences`` or ``doc_sentences`` (data_prep/packing.py).
    num_shards / num_validation_shards: files per split.
    validation_fraction: the chance a document goes to validation, in [0, 1); 0: no validation.
    seed: fixes the validation split and the shuffle of blocks.
    compression: ``none`` or ``gzip`` (TFRecord compression).
    text_field: the .jsonl field holding a document's text.
    max_line_bytes: longer lines are split before encoding (bounded time and memory).
    overwrite: replace the shards of an earlier run in ``output_dir``.
    encoder: ``tf`` (roberta_tf.tokenization.tokenizer, the default), ``hf`` (Hugging Face
      tokenizers) or an encoder callable (data_prep/sentence_encoders.py).
    num_workers: encoding threads (default: the CPU count).
    batch_sentences: sentences per encoder call.
    shuffle_buffer: blocks held to shuffle the order in which they reach the shards.
    progress: reports progress while running if given.
  Raises:
    BuildError, corpus.CorpusError, sentence_encoders.VocabError: with a message naming the
      flag or file.
    Nothing is left under a final name on failure.
  """
  if packing not in packing_lib.PACKINGS:
    raise BuildError(f"--packing={packing!r}; expected one of {', '.join(packing_lib.PACKINGS)}")
  if max_seq_len < 3:
    raise BuildError(f"--max_seq_len={max_seq_len}: must be >= 3 (<s>, a token, </s>)")
  if num_shards < 1:
    raise BuildError(f"--num_shards={num_shards}: must be >= 1")
  if num_validation_shards < 1:
    raise BuildError(f"--num_validation_shards={num_validation_shards}: must be >= 1")
  if not 0 <= validation_fraction < 1:
    raise BuildError(f"--validation_fraction={validation_fraction}: must be in [0, 1)")
  if compression not in shard_writer.COMPRESSIONS:
    raise BuildError(f"--compression={compression!r}; expected one of "
                     f"{', '.join(shard_writer.COMPRESSIONS)}")
  if max_line_bytes < 16:
    raise BuildError(f"--max_line_bytes={max_line_bytes}: must be >= 16")
  vocab = sentence_encoders.load_vocab(vocab_dir)
  files = corpus.resolve_inputs(input_spec)
  if os.path.isdir(output_dir) and os.listdir(output_dir) and not overwrite:
    # Checked again below; here too so that a refused run fails before the tokenizer's setup.
    _prepare_output_dir(output_dir, overwrite)
  setup_start = time.monotonic()  # loading the tokenizer and tracing its graph: a fixed cost
  encode = sentence_encoders.make_encoder(encoder, vocab) if isinstance(encoder, str) else encoder
  setup_s = time.monotonic() - setup_start
  created = _prepare_output_dir(output_dir, overwrite)

  start, start_cpu = time.monotonic(), time.process_time()
  if progress:
    progress.reset()
  stats = corpus.CorpusStats()
  doc_counts = {TRAIN: 0, VALIDATION: 0}
  splits = [TRAIN] + ([VALIDATION] if validation_fraction > 0 else [])
  writers = {
      split: shard_writer.SplitWriter(
          output_dir, split, num_shards if split == TRAIN else num_validation_shards,
          compression, shuffle_buffer, seed)
      for split in splits}
  packers = {split: packing_lib.Packer(max_seq_len, packing, vocab.special_ids["bos"],
                                       vocab.special_ids["eos"], writers[split].add)
             for split in splits}
  try:
    documents = corpus.iter_documents(files, text_field, stats, max_line_bytes)
    batches = sentence_encoders.batch_documents(
        _assign_splits(documents, validation_fraction, seed, doc_counts), batch_sentences)
    for batch, values, row_splits in sentence_encoders.encode_batches(batches, encode, num_workers):
      _pack_batch(batch, values, row_splits, packers)
      if progress:
        progress.update(stats.bytes_read, stats.total_bytes,
                        sum(w.num_added for w in writers.values()))
    for packer in packers.values():
      packer.finish()
    if stats.documents == 0:
      raise BuildError(f"--input={input_spec!r} holds no text (0 non-empty documents)")
    shard_stats = {split: w.close() for split, w in writers.items()}
    if not sum(s.num_sequences for s in shard_stats[TRAIN]):
      raise BuildError(f"--input={input_spec!r}: the train split is empty")
    if validation_fraction > 0 and not doc_counts[VALIDATION]:
      # A one-document corpus: no validation split rather than an empty one.
      del shard_stats[VALIDATION]
      writers.pop(VALIDATION).abort()
    keep = {s.file for ss in shard_stats.values() for s in ss}
    _remove_stale_shards(output_dir, keep | {f + shard_writer.TMP_SUFFIX for f in keep})
    for w in writers.values():
      w.commit()
  except BaseException:
    for w in writers.values():
      w.abort()
    if created and not os.listdir(output_dir):
      os.rmdir(output_dir)
    raise

  elapsed = time.monotonic() - start
  warnings = [f"{split} has {sum(1 for s in ss if not s.num_sequences)} empty shards "
              f"({sum(s.num_sequences for s in ss)} sequences for {len(ss)} shards)"
              for split, ss in shard_stats.items() if any(not s.num_sequences for s in ss)]
  if validation_fraction > 0 and not doc_counts[VALIDATION]:
    warnings.append("the corpus has one document: no validation split was written")
  info = {
      "format_version": dataset_info.FORMAT_VERSION,
      "vocab": {"sha256": vocab.sha256, "merges_sha256": vocab.merges_sha256,
                "size": vocab.size},
      "special_ids": vocab.special_ids,
      "max_seq_len": max_seq_len,
      "packing": packing,
      "compression": compression,
      "splits": {split: _split_info(ss, max_seq_len) for split, ss in shard_stats.items()},
      # Informational; nothing run-dependent (times, hosts), so a re-run writes the same file.
      "source": {
          "input": input_spec,
          "files": files,
          "vocab_dir": vocab_dir,
          "vocab_file": os.path.basename(vocab.vocab_path),
          "merges_file": os.path.basename(vocab.merges_path),
          "text_field": text_field,
          "seed": seed,
          "validation_fraction": validation_fraction,
          "max_line_bytes": max_line_bytes,
          "documents": {"train": doc_counts[TRAIN], "validation": doc_counts[VALIDATION]},
          "sentences": stats.sentences,
          "input_bytes": stats.total_bytes,
          "invalid_utf8": stats.invalid_utf8,
          "split_lines": stats.split_lines,
          "warnings": warnings,
      },
  }
  vocab_files.copy_vocab_files(vocab.vocab_dir, output_dir)
  dataset_info.write(output_dir, info)
  if progress:
    sequences = sum(s["num_sequences"] for s in info["splits"].values())
    progress.update(stats.total_bytes, stats.total_bytes, sequences, force=True)
    progress.done()
  # Returned to the caller, not written (the file stays the same on a re-run).
  info["elapsed_s"], info["cpu_s"] = elapsed, time.process_time() - start_cpu
  info["setup_s"] = setup_s
  return info


def summary(info: dict[str, Any], output_dir: str) -> str:
  """A few human-readable lines on what ``build_shards`` wrote."""
  src = info["source"]
  lines = [f"wrote {output_dir}: {src['documents']['train']} train + "
           f"{src['documents']['validation']} validation documents, "
           f"{src['input_bytes'] / 1e6:.1f} MB of input in {info['elapsed_s']:.1f} s "
           f"({src['input_bytes'] / 1e6 / max(info['elapsed_s'], 1e-9):.2f} MB/s, "
           f"{info['cpu_s'] / max(info['elapsed_s'], 1e-9):.2f} cores busy; "
           f"+ {info['setup_s']:.1f} s tokenizer setup)"]
  for split, s in info["splits"].items():
    lines.append(f"  {split}: {s['num_sequences']} sequences, {s['num_tokens']} tokens in "
                 f"{len(s['shards'])} shards, packing efficiency {s['packing_efficiency']:.3f}")
  if src["invalid_utf8"]:
    lines.append(f"  invalid UTF-8: {src['invalid_utf8']} byte sequences replaced with U+FFFD")
  if src["split_lines"]:
    lines.append(f"  {src['split_lines']} lines longer than --max_line_bytes="
                 f"{src['max_line_bytes']} were split")
  lines.extend(f"  warning: {w}" for w in src["warnings"])
  return "\n".join(lines)
