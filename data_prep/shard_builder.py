r"""Encodes a text corpus and packs it into TFRecord shards with a dataset_info.json.

The library behind `python -m data_prep.build_shards` (the binary is data_prep/build_shards.py):
``build_shards(ShardSettings(input=..., vocab_dir=..., output_dir=..., ...))`` with the
binary's options, declared once in data_prep/shard_settings.py. The vocabulary files
(vocab.json, merges.txt) are copied beside the shards, so a shard directory is self-contained:
training, inspection and export find the vocabulary there.

Two engines do the work, with the same flags and the same output files, byte for byte:
``local`` (data_prep/local_engine.py, this process: documents stream from data_prep/corpus.py,
are encoded on a few threads with the project's TF-native tokenizer
(data_prep/sentence_encoders.py), packed and spilled to their shards' temporary files as they
come, then each shard is sorted and written; memory is a few encoding batches, one group of
blocks and one sort buffer) and ``beam``
(data_prep/beam_engine.py: an Apache Beam pipeline on any runner). What makes them agree is that
every decision is a function of positions, not of the order work is done in:
data_prep/doc_groups.py (the validation split: whole documents, each with probability
``validation_fraction`` from a hash of (seed, its position); groups of documents packed
independently), data_prep/group_packing.py (packing within a group) and
data_prep/block_order.py (the global shuffle: a block's hashed key picks its shard and its
place in it, so every shard is a uniform random sample of the corpus in random order;
data_prep/external_sort.py sorts a shard larger than memory).

Shards are written under temporary names, renamed when all are complete, and dataset_info.json
is written last; on any failure the temporary files are removed, so a directory holding
dataset_info.json is a complete one.

Every path may be a URL (gs://, ram://, ...: roberta_tf/common/files.py): the inputs, the
vocabulary (read once; the bytes read are hashed and copied beside the shards) and
``output_dir`` (shards through TF's TFRecordWriter, renames and dataset_info.json through
files / atomic_write; on an object store a rename is a copy, and dataset_info.json, written
last, is still what marks the directory complete). The local engine's spill files are local
scratch: in ``output_dir``/_build_shards.tmp when ``output_dir`` is local (its disk), else in
a temporary directory (``TMPDIR``). The Beam engine reads and writes through Beam's file systems
(data_prep/beam_engine.py), so its paths must be ones Beam knows (local, gs://, ...; not ram://).
"""

from __future__ import annotations

import re
import sys
import tempfile
import time
from typing import Any

from data_prep import corpus, local_engine, sentence_encoders, shard_writer
from data_prep import progress as progress_lib
from data_prep.shard_settings import TRAIN, VALIDATION, BuildError, ShardSettings
from roberta_tf.common import atomic_write
from roberta_tf.common import files as files_lib
from roberta_tf.data import dataset_info
from roberta_tf.tokenization import vocabulary

_SHARD_RE = re.compile(r"^(train|validation)-\d{5}-of-\d{5}\.tfrecord(\.tmp)?$")
_TEMP_SHARD_RE = re.compile(r"^(train|validation)-\d{5}-of-\d{5}\.tfrecord\.tmp$")
# The spill files of the global shuffle (data_prep/external_sort.py) while a build runs (local
# engine, local output_dir), or the Beam engine's sorted buckets.
SPILL_DIR = "_build_shards.tmp"
_LEFTOVERS = (SPILL_DIR,)  # and the temporary shards: what a killed build leaves


def _prepare_output_dir(output_dir: str, overwrite: bool) -> bool:
  """Creates ``output_dir`` or checks it may be written; returns whether it was created."""
  if files_lib.exists(output_dir) and not files_lib.isdir(output_dir):
    raise BuildError(f"--output_dir {output_dir!r} exists and is not a directory")
  if files_lib.isdir(output_dir):
    names = files_lib.listdir(output_dir)
    leftovers = [n for n in names if n in _LEFTOVERS or _TEMP_SHARD_RE.match(n)]
    if len(leftovers) < len(names) and not overwrite:
      raise BuildError(f"--output_dir {output_dir!r} is not empty; pass --overwrite to replace "
                       "its shards")
    # Temporary files of a build that was killed: nothing reads them, nothing else writes them.
    for name in leftovers:
      path = files_lib.join(output_dir, name)
      if files_lib.isdir(path):
        files_lib.rmtree(path)
      else:
        files_lib.remove(path)
    # The old dataset_info.json goes first: until the new one is written the directory must not
    # look complete.
    info_path = files_lib.join(output_dir, dataset_info.FILENAME)
    if files_lib.exists(info_path):
      files_lib.remove(info_path)
    return False
  try:
    files_lib.makedirs(output_dir)
  except OSError as e:
    raise BuildError(f"cannot create --output_dir {output_dir!r}: {e.strerror}") from e
  return True


def _remove_stale_shards(output_dir: str, keep: set[str]) -> None:
  """Removes shards of an earlier run (--overwrite) that the new run does not rewrite."""
  for name in files_lib.listdir(output_dir):
    if _SHARD_RE.match(name) and name not in keep:
      files_lib.remove(files_lib.join(output_dir, name))


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


def build_shards(settings: ShardSettings, *, encode: sentence_encoders.Encoder | None = None,
                 num_workers: int | None = None) -> dict[str, Any]:
  """Builds the shards and dataset_info.json in ``settings.output_dir``; returns the info
  written.

  Args:
    settings: every option (data_prep/shard_settings.py): the inputs (``input``: files, globs,
      directories, comma list, or ``stdlib``; see data_prep/corpus.py), ``vocab_dir`` (holds
      vocab.json + merges.txt) and ``output_dir`` (created if absent; must be empty unless
      ``overwrite``), each a local path or URL; what defines the output; the engine; whether to
      report progress on stderr.
    encode: local engine only: an encoder callable (data_prep/sentence_encoders.py) used instead
      of building ``settings.encoder``'s (tests share one).
    num_workers: local engine: encoding threads (default: the CPU count).
  Raises:
    BuildError, corpus.CorpusError, sentence_encoders.VocabError, files.UnknownSchemeError:
      with a message naming the flag or file.
    Nothing is left under a final name on failure.
  """
  settings.validate()
  if settings.engine == "beam" and encode is not None:
    raise BuildError("the beam engine takes an encoder name (tf, hf), not a callable")
  vocab = sentence_encoders.load_vocab(settings.vocab_dir)
  files = corpus.resolve_inputs(settings.input)
  encode, setup_s, created = _set_up(files, settings, vocab, encode)
  progress = progress_lib.Progress(sys.stderr) if settings.progress else None
  start, start_cpu = time.monotonic(), time.process_time()
  if progress:
    progress.reset("reading")
  shard_stats, doc_counts, stats = _run_engine(files, settings, created, vocab=vocab,
                                               encode=encode, num_workers=num_workers,
                                               progress=progress)
  elapsed = time.monotonic() - start
  info = _dataset_info(settings, vocab, shard_stats, doc_counts, stats, files=files)
  _write_vocab_and_info(settings.output_dir, vocab, info)
  if progress:
    progress.done()
  # Returned to the caller, not written (the file stays the same on a re-run).
  info["elapsed_s"], info["cpu_s"] = elapsed, time.process_time() - start_cpu
  info["setup_s"] = setup_s
  return info


def _set_up(files, settings, vocab, encode):
  """Checks the paths an engine can use, loads the encoder (local engine; ``encode`` if given),
  prepares ``output_dir``: returns (encode or None, the seconds the setup took, whether
  ``output_dir`` was created)."""
  output_dir, overwrite = settings.output_dir, settings.overwrite
  if settings.engine == "beam":
    from data_prep import beam_engine  # pylint: disable=import-outside-toplevel
    beam_engine.check_paths({"--input": files, "--output_dir": [output_dir]})
  if files_lib.isdir(output_dir) and files_lib.listdir(output_dir) and not overwrite:
    # Checked again later; here too so that a refused run fails before the tokenizer's setup.
    _prepare_output_dir(output_dir, overwrite)
  setup_start = time.monotonic()  # loading the tokenizer and tracing its graph: a fixed cost
  if settings.engine == "local" and encode is None:
    encode = sentence_encoders.make_encoder(settings.encoder, vocab)
  setup_s = time.monotonic() - setup_start
  return encode, setup_s, _prepare_output_dir(output_dir, overwrite)


def _run_engine(files, settings, created, *, vocab, encode, num_workers, progress):
  """Runs the engine and renames its shards to their final names: returns (shard stats per
  split, documents per split, corpus stats). On failure removes what it wrote (and
  ``output_dir`` if ``created`` and left empty) and re-raises."""
  output_dir, engine = settings.output_dir, settings.engine
  if engine == "local" and files_lib.is_url(output_dir):
    # Spill files are local scratch: the shards' content, read back once.
    spill_dir = tempfile.mkdtemp(prefix="roberta_tf-build_shards-")  # local-only: scratch
  else:  # beside a local output_dir (its disk), or the Beam workers' shared sorted buckets
    spill_dir = files_lib.join(output_dir, SPILL_DIR)
  try:
    files_lib.makedirs(spill_dir)
    if engine == "local":
      shard_stats, doc_counts, stats = local_engine.run(
          files, output_dir, spill_dir, vocab=vocab, encode=encode, settings=settings,
          num_workers=num_workers, progress=progress)
    else:
      from data_prep import beam_engine  # pylint: disable=import-outside-toplevel
      shard_stats, doc_counts, stats = beam_engine.run(
          files, output_dir, spill_dir, vocab=vocab, settings=settings)
    files_lib.rmtree(spill_dir)
    _check_output(settings.input, shard_stats, stats)
    if settings.validation_fraction > 0 and not doc_counts[VALIDATION]:
      # A one-document corpus: no validation split rather than an empty one.
      shard_writer.remove_temp(output_dir, [s.file for s in shard_stats.pop(VALIDATION)])
    keep = {s.file for ss in shard_stats.values() for s in ss}
    _remove_stale_shards(output_dir, keep | {f + shard_writer.TMP_SUFFIX for f in keep})
    shard_writer.commit(output_dir, sorted(keep))
  except BaseException:
    files_lib.rmtree(spill_dir, ignore_errors=True)
    shard_writer.remove_temp(output_dir, [
        shard_writer.shard_name(split, i, settings.shard_count(split))
        for split in (TRAIN, VALIDATION) for i in range(settings.shard_count(split))])
    if created and files_lib.isdir(output_dir) and not files_lib.listdir(output_dir):
      files_lib.rmdir(output_dir)
    raise
  return shard_stats, doc_counts, stats


def _write_vocab_and_info(output_dir, vocab, info) -> None:
  """The vocabulary beside the shards (the bytes read and hashed, atomically each), then
  dataset_info.json, last: it marks the directory complete."""
  for name, data in vocab.file_bytes().items():
    with atomic_write.atomic_file(files_lib.join(output_dir, name), "wb") as f:
      f.write(data)
  dataset_info.write(output_dir, info)


def _check_output(input_spec, shard_stats, stats) -> None:
  """Raises BuildError when the corpus gave no text, or no train sequence."""
  if stats.documents == 0:
    raise BuildError(f"--input={input_spec!r} holds no text (0 non-empty documents)")
  if not sum(s.num_sequences for s in shard_stats[TRAIN]):
    raise BuildError(f"--input={input_spec!r}: the train split is empty")


def _dataset_info(settings, vocab, shard_stats, doc_counts, stats, *, files) -> dict[str, Any]:
  """dataset_info.json's content: the format, vocabulary, splits and (informational) source."""
  validation_fraction = settings.validation_fraction
  warnings = [f"{split} has {sum(1 for s in ss if not s.num_sequences)} empty shards "
              f"({sum(s.num_sequences for s in ss)} sequences for {len(ss)} shards)"
              for split, ss in shard_stats.items() if any(not s.num_sequences for s in ss)]
  if validation_fraction > 0 and not doc_counts[VALIDATION]:
    warnings.append("the corpus has one document: no validation split was written")
  names = list(vocab.data)
  template = {}
  if vocab.kind != vocabulary.BPE_FILES:  # RoBERTa's files: its template, as always (absent)
    template = {"template": dataset_info.template_record(vocab.template)}
  return {
      "format_version": dataset_info.FORMAT_VERSION,
      "vocab": vocab.vocab_id.record(),
      "special_ids": vocab.special_ids,
      **template,
      "max_seq_len": settings.max_seq_len,
      "packing": settings.packing,
      "compression": settings.compression,
      # How records are ordered in and across shards (data_prep/block_order.py); readers note
      # shards without it (written in corpus order, before the global shuffle).
      "shuffle": {"scheme": settings.order, "seed": settings.seed},
      "splits": {split: _split_info(ss, settings.max_seq_len)
                 for split, ss in shard_stats.items()},
      # Informational; nothing run-dependent (times, hosts), so a re-run writes the same file.
      "source": {
          "input": settings.input,
          "files": files,
          "vocab_dir": settings.vocab_dir,
          # vocab.json and merges.txt, or tokenizer.json alone
          "vocab_file": names[0], **({"merges_file": names[1]} if names[1:] else {}),
          "text_field": settings.text_field,
          "seed": settings.seed,
          "validation_fraction": validation_fraction,
          "max_line_bytes": settings.max_line_bytes,
          "group_bytes": settings.group_bytes,
          "documents": {"train": doc_counts[TRAIN], "validation": doc_counts[VALIDATION]},
          "sentences": stats.sentences,
          "input_bytes": stats.total_bytes,
          "invalid_utf8": stats.invalid_utf8,
          "split_lines": stats.split_lines,
          "null_texts": stats.null_texts,
          "warnings": warnings,
      },
  }


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
  if src.get("null_texts"):
    lines.append(f"  {src['null_texts']} Parquet rows with a null text were skipped")
  if src["split_lines"]:
    lines.append(f"  {src['split_lines']} lines longer than --max_line_bytes="
                 f"{src['max_line_bytes']} were split")
  lines.extend(f"  warning: {w}" for w in src["warnings"])
  return "\n".join(lines)
