r"""Encodes a text corpus and packs it into TFRecord shards with a dataset_info.json.

The library behind `python -m data_prep.build_shards` (the binary is data_prep/build_shards.py).
The vocabulary files (vocab.json, merges.txt) are copied beside the shards, so a shard
directory is self-contained: training, inspection and export find the vocabulary there.

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
import tempfile
import time
from typing import Any

from data_prep import (
  block_order,
  corpus,
  doc_groups,
  external_sort,
  local_engine,
  sentence_encoders,
  shard_writer,
)
from data_prep import packing as packing_lib
from data_prep import progress as progress_lib
from roberta_tf.common import atomic_write
from roberta_tf.common import files as files_lib
from roberta_tf.data import dataset_info

TRAIN = "train"
VALIDATION = "validation"
ENGINES = ("local", "beam")
_SHARD_RE = re.compile(r"^(train|validation)-\d{5}-of-\d{5}\.tfrecord(\.tmp)?$")
_TEMP_SHARD_RE = re.compile(r"^(train|validation)-\d{5}-of-\d{5}\.tfrecord\.tmp$")
# The spill files of the global shuffle (data_prep/external_sort.py) while a build runs (local
# engine, local output_dir), or the Beam engine's sorted buckets.
SPILL_DIR = "_build_shards.tmp"
_LEFTOVERS = (SPILL_DIR,)  # and the temporary shards: what a killed build leaves


class BuildError(ValueError):
  """A bad argument or input for shard building; the message names the flag or file."""


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


def make_settings(*, max_seq_len: int = 512, packing: str = packing_lib.FULL_SENTENCES,
                  num_shards: int = 16, num_validation_shards: int = 1,
                  validation_fraction: float = 0.01, seed: int = 0, compression: str = "none",
                  text_field: str = "text",
                  max_line_bytes: int = corpus.DEFAULT_MAX_LINE_BYTES,
                  group_bytes: int = doc_groups.DEFAULT_GROUP_BYTES,
                  batch_sentences: int = 4096,
                  sort_bytes: int = external_sort.DEFAULT_SORT_BYTES,
                  shuffle_blocks: bool = True) -> dict[str, Any]:
  """What both engines need to know of ``build_shards``' arguments, as one dict.

  Args:
    max_seq_len: ids per block at most, ``<s>`` and ``</s>`` included.
    packing: ``full_sentences`` or ``doc_sentences`` (data_prep/packing.py); for the NSP
      ablation ``segment_pair`` or ``sentence_pair`` (data_prep/pair_packing.py).
    num_shards / num_validation_shards: files per split.
    validation_fraction: the chance a document goes to validation, in [0, 1); 0: no validation.
    seed: fixes the validation split and the shuffle of blocks.
    compression: ``none`` or ``gzip`` (TFRecord compression).
    text_field: the .jsonl field (.parquet column) holding a document's text.
    max_line_bytes: longer lines are split before encoding (bounded time and memory).
    group_bytes: characters of text per document group (data_prep/doc_groups.py); part of the
      output's definition: the same value gives the same files with either engine.
    batch_sentences: sentences per encoder call.
    sort_bytes: spill bytes sorted in memory at once (data_prep/external_sort.py): bounds
      memory; does not change the output.
    shuffle_blocks: True: the global shuffle (data_prep/block_order.py: every shard a uniform
      random sample of its split in random order). False: each shard in corpus order (tests).
  """
  splits = [TRAIN] + ([VALIDATION] if validation_fraction > 0 else [])
  return {
      "splits": splits, "num_shards": {TRAIN: num_shards, VALIDATION: num_validation_shards},
      "compression": compression, "text_field": text_field, "max_line_bytes": max_line_bytes,
      "seed": seed, "validation_fraction": validation_fraction, "group_bytes": group_bytes,
      "batch_sentences": batch_sentences, "sort_bytes": sort_bytes,
      "order": block_order.ORDER_GLOBAL if shuffle_blocks else block_order.ORDER_CORPUS,
      "max_seq_len": max_seq_len, "packing": packing}


def build_shards(input_spec: str, vocab_dir: str, output_dir: str, *, max_seq_len: int = 512,
                 packing: str = packing_lib.FULL_SENTENCES, num_shards: int = 16,
                 num_validation_shards: int = 1, validation_fraction: float = 0.01,
                 seed: int = 0, compression: str = "none", text_field: str = "text",
                 max_line_bytes: int = corpus.DEFAULT_MAX_LINE_BYTES, overwrite: bool = False,
                 encoder: str | sentence_encoders.Encoder = "tf", num_workers: int | None = None,
                 batch_sentences: int = 4096, shuffle_blocks: bool = True,
                 group_bytes: int = doc_groups.DEFAULT_GROUP_BYTES, engine: str = "local",
                 beam_options: str = "", sort_bytes: int = external_sort.DEFAULT_SORT_BYTES,
                 progress: progress_lib.Progress | None = None) -> dict[str, Any]:
  """Builds the shards and dataset_info.json in ``output_dir``; returns the info written.

  Args:
    input_spec: files, globs, directories (comma list) or ``stdlib``; see data_prep/corpus.py.
      Local paths or URLs.
    vocab_dir: holds vocab.json + merges.txt (a local path or URL).
    output_dir: created if absent; must be empty unless ``overwrite`` (a local path or URL).
    overwrite: replace the shards of an earlier run in ``output_dir``.
    encoder: ``tf`` (roberta_tf.tokenization.tokenizer, the default), ``hf`` (Hugging Face
      tokenizers) or, local engine only, an encoder callable (data_prep/sentence_encoders.py).
    num_workers: local engine: encoding threads (default: the CPU count).
    engine: ``local`` (data_prep/local_engine.py) or ``beam`` (data_prep/beam_engine.py).
    beam_options: Beam pipeline options, one string (``--runner=... --direct_num_workers=2``).
    progress: reports progress while running if given (local engine).
    The others define the output: see ``make_settings``.
  Raises:
    BuildError, corpus.CorpusError, sentence_encoders.VocabError, files.UnknownSchemeError:
      with a message naming the flag or file.
    Nothing is left under a final name on failure.
  """
  settings = make_settings(
      max_seq_len=max_seq_len, packing=packing, num_shards=num_shards,
      num_validation_shards=num_validation_shards, validation_fraction=validation_fraction,
      seed=seed, compression=compression, text_field=text_field, max_line_bytes=max_line_bytes,
      group_bytes=group_bytes, batch_sentences=batch_sentences, sort_bytes=sort_bytes,
      shuffle_blocks=shuffle_blocks)
  _check_arguments(settings, output_dir=output_dir, vocab_dir=vocab_dir, engine=engine,
                   encoder=encoder)
  vocab = sentence_encoders.load_vocab(vocab_dir)
  files = corpus.resolve_inputs(input_spec)
  encode, setup_s, created = _set_up(files, output_dir, vocab, engine=engine, encoder=encoder,
                                     overwrite=overwrite)
  start, start_cpu = time.monotonic(), time.process_time()
  if progress:
    progress.reset("reading")
  shard_stats, doc_counts, stats = _run_engine(
      files, output_dir, created, input_spec=input_spec, settings=settings, engine=engine,
      vocab=vocab, encoder=encoder, encode=encode, num_workers=num_workers,
      beam_options=beam_options, progress=progress)
  elapsed = time.monotonic() - start
  info = _dataset_info(settings, vocab, shard_stats, doc_counts, stats, input_spec=input_spec,
                       files=files, vocab_dir=vocab_dir)
  _write_vocab_and_info(output_dir, vocab, info)
  if progress:
    progress.done()
  # Returned to the caller, not written (the file stays the same on a re-run).
  info["elapsed_s"], info["cpu_s"] = elapsed, time.process_time() - start_cpu
  info["setup_s"] = setup_s
  return info


def _check_arguments(settings, *, output_dir, vocab_dir, engine, encoder) -> None:
  """Raises BuildError (files.UnknownSchemeError for a path) naming the first bad argument."""
  files_lib.check(output_dir, "--output_dir")
  files_lib.check(vocab_dir, "--vocab_dir")
  packing, max_seq_len = settings["packing"], settings["max_seq_len"]
  if packing not in packing_lib.PACKINGS:
    raise BuildError(f"--packing={packing!r}; expected one of {', '.join(packing_lib.PACKINGS)}")
  if max_seq_len < 3:
    raise BuildError(f"--max_seq_len={max_seq_len}: must be >= 3 (<s>, a token, </s>)")
  if packing in packing_lib.PAIR_PACKINGS and max_seq_len < 5:
    raise BuildError(f"--max_seq_len={max_seq_len}: --packing={packing} needs >= 5 "
                     "(<s> A </s> B </s>)")
  for split, flag in ((TRAIN, "--num_shards"), (VALIDATION, "--num_validation_shards")):
    if settings["num_shards"][split] < 1:
      raise BuildError(f"{flag}={settings['num_shards'][split]}: must be >= 1")
  if not 0 <= settings["validation_fraction"] < 1:
    raise BuildError(f"--validation_fraction={settings['validation_fraction']}: must be in "
                     "[0, 1)")
  if settings["compression"] not in shard_writer.COMPRESSIONS:
    raise BuildError(f"--compression={settings['compression']!r}; expected one of "
                     f"{', '.join(shard_writer.COMPRESSIONS)}")
  if settings["max_line_bytes"] < 16:
    raise BuildError(f"--max_line_bytes={settings['max_line_bytes']}: must be >= 16")
  if settings["group_bytes"] < 1:
    raise BuildError(f"--group_bytes={settings['group_bytes']}: must be >= 1")
  if settings["sort_bytes"] < 1:
    raise BuildError(f"--sort_buffer_mb: the sort buffer ({settings['sort_bytes']} bytes) must "
                     "be positive")
  if engine not in ENGINES:
    raise BuildError(f"--engine={engine!r}; expected one of {', '.join(ENGINES)}")
  if engine == "beam" and not isinstance(encoder, str):
    raise BuildError("the beam engine takes an encoder name (tf, hf), not a callable")


def _set_up(files, output_dir, vocab, *, engine, encoder, overwrite):
  """Checks the paths an engine can use, loads the encoder (local engine), prepares
  ``output_dir``: returns (encode or None, the seconds the setup took, whether ``output_dir``
  was created)."""
  if engine == "beam":
    from data_prep import beam_engine  # pylint: disable=import-outside-toplevel
    beam_engine.check_paths({"--input": files, "--output_dir": [output_dir]})
  if files_lib.isdir(output_dir) and files_lib.listdir(output_dir) and not overwrite:
    # Checked again later; here too so that a refused run fails before the tokenizer's setup.
    _prepare_output_dir(output_dir, overwrite)
  setup_start = time.monotonic()  # loading the tokenizer and tracing its graph: a fixed cost
  encode = None
  if engine == "local":
    encode = (sentence_encoders.make_encoder(encoder, vocab) if isinstance(encoder, str)
              else encoder)
  setup_s = time.monotonic() - setup_start
  return encode, setup_s, _prepare_output_dir(output_dir, overwrite)


def _run_engine(files, output_dir, created, *, input_spec, settings, engine, vocab, encoder,
                encode, num_workers, beam_options, progress):
  """Runs the engine and renames its shards to their final names: returns (shard stats per
  split, documents per split, corpus stats). On failure removes what it wrote (and
  ``output_dir`` if ``created`` and left empty) and re-raises."""
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
          files, output_dir, spill_dir, vocab=vocab, encoder=encoder, settings=settings,
          beam_options=beam_options)
    files_lib.rmtree(spill_dir)
    _check_output(input_spec, settings, shard_stats, doc_counts, stats)
    if settings["validation_fraction"] > 0 and not doc_counts[VALIDATION]:
      # A one-document corpus: no validation split rather than an empty one.
      shard_writer.remove_temp(output_dir, [s.file for s in shard_stats.pop(VALIDATION)])
    keep = {s.file for ss in shard_stats.values() for s in ss}
    _remove_stale_shards(output_dir, keep | {f + shard_writer.TMP_SUFFIX for f in keep})
    shard_writer.commit(output_dir, sorted(keep))
  except BaseException:
    files_lib.rmtree(spill_dir, ignore_errors=True)
    shard_writer.remove_temp(output_dir, [
        shard_writer.shard_name(split, i, n) for split, n in settings["num_shards"].items()
        for i in range(n)])
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


def _check_output(input_spec, settings, shard_stats, doc_counts, stats) -> None:
  """Raises BuildError when the corpus gave no text, or no train sequence."""
  if stats.documents == 0:
    raise BuildError(f"--input={input_spec!r} holds no text (0 non-empty documents)")
  if not sum(s.num_sequences for s in shard_stats[TRAIN]):
    raise BuildError(f"--input={input_spec!r}: the train split is empty")


def _dataset_info(settings, vocab, shard_stats, doc_counts, stats, *, input_spec, files,
                  vocab_dir) -> dict[str, Any]:
  """dataset_info.json's content: the format, vocabulary, splits and (informational) source."""
  validation_fraction = settings["validation_fraction"]
  warnings = [f"{split} has {sum(1 for s in ss if not s.num_sequences)} empty shards "
              f"({sum(s.num_sequences for s in ss)} sequences for {len(ss)} shards)"
              for split, ss in shard_stats.items() if any(not s.num_sequences for s in ss)]
  if validation_fraction > 0 and not doc_counts[VALIDATION]:
    warnings.append("the corpus has one document: no validation split was written")
  return {
      "format_version": dataset_info.FORMAT_VERSION,
      "vocab": {"sha256": vocab.sha256, "merges_sha256": vocab.merges_sha256,
                "size": vocab.size},
      "special_ids": vocab.special_ids,
      "max_seq_len": settings["max_seq_len"],
      "packing": settings["packing"],
      "compression": settings["compression"],
      # How records are ordered in and across shards (data_prep/block_order.py); readers note
      # shards without it (written in corpus order, before the global shuffle).
      "shuffle": {"scheme": settings["order"], "seed": settings["seed"]},
      "splits": {split: _split_info(ss, settings["max_seq_len"])
                 for split, ss in shard_stats.items()},
      # Informational; nothing run-dependent (times, hosts), so a re-run writes the same file.
      "source": {
          "input": input_spec,
          "files": files,
          "vocab_dir": vocab_dir,
          "vocab_file": files_lib.basename(vocab.vocab_path),
          "merges_file": files_lib.basename(vocab.merges_path),
          "text_field": settings["text_field"],
          "seed": settings["seed"],
          "validation_fraction": validation_fraction,
          "max_line_bytes": settings["max_line_bytes"],
          "group_bytes": settings["group_bytes"],
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
