"""Encodes a text corpus and packs it into TFRecord shards with a dataset_info.json.

    python -m data_prep.build_shards --input=corpus.jsonl.gz --vocab_dir=vocab/ \
        --output_dir=shards/ [--max_seq_len=512] [--packing=full_sentences|doc_sentences] \
        [--num_shards=16] [--validation_fraction=0.01] [--seed=0] [--compression=none|gzip] \
        [--engine=local|beam --beam_options="--runner=DirectRunner --direct_num_workers=2 ..."]

The work is done by data_prep/shard_builder.py (see its docstring for the packing, the
validation split and the output contract); --engine=beam runs it as an Apache Beam pipeline
(data_prep/beam_engine.py) that writes the same files, byte for byte. --packing=segment_pair
and sentence_pair write BERT's pairs with next-sentence labels, for the paper's input-format
ablation only (data_prep/pair_packing.py). Blocks are shuffled globally: every shard is a
uniform random sample of the corpus in random order (data_prep/block_order.py).
"""

import sys

from absl import app, flags

from roberta_tf.common import cli
from roberta_tf.common import files as files_lib

# The imports below load TensorFlow: its start-up chatter is filtered (see cli), hence
# imports after code.
# ruff: noqa: E402
cli.quiet_tensorflow_import()

from data_prep import corpus, doc_groups, external_sort, sentence_encoders, shard_writer
from data_prep import packing as packing_lib
from data_prep import progress as progress_lib
from data_prep.shard_builder import build_shards, summary

FLAGS = cli.binary_flags()  # this binary's flags (common/cli.py)
flags.DEFINE_string("input", None, "Corpus: .txt/.jsonl(.gz)/.parquet files, globs, directories "
                    "(comma list; local paths or URLs), or 'stdlib' (the running Python's "
                    "documentation).", flag_values=FLAGS)
flags.DEFINE_string("vocab_dir", None, "Directory (local or a URL) with vocab.json and "
                    "merges.txt; must be the vocabulary the model is trained with "
                    "(dataset_info.json records its sha256; a copy goes beside the shards).",
                    flag_values=FLAGS)
flags.DEFINE_string("output_dir", None, "Where the shards and dataset_info.json go (local or a "
                    "URL; dataset_info.json, written last, marks it complete).", flag_values=FLAGS)
flags.DEFINE_integer("max_seq_len", 512, "Ids per sequence at most, <s> and </s> included; "
                     "must be <= the model's max_seq_len.", flag_values=FLAGS)
flags.DEFINE_enum("packing", packing_lib.FULL_SENTENCES, list(packing_lib.PACKINGS),
                  "full_sentences: blocks cross documents (with an extra </s>); "
                  "doc_sentences: never; segment_pair / sentence_pair: BERT's pairs with a "
                  "next-sentence label (the paper's input-format ablation only).",
                  flag_values=FLAGS)
flags.DEFINE_integer("num_shards", 16, "Train shard files.", flag_values=FLAGS)
flags.DEFINE_integer("num_validation_shards", 1, "Validation shard files.", flag_values=FLAGS)
flags.DEFINE_float("validation_fraction", 0.01, "Fraction of documents held out for "
                   "validation (whole documents); 0 writes no validation split.", flag_values=FLAGS)
flags.DEFINE_integer("seed", 0, "Seeds the validation split and the global shuffle of blocks "
                     "(which shard each goes to, and its place there).", flag_values=FLAGS)
flags.DEFINE_enum("compression", "none", list(shard_writer.COMPRESSIONS),
                  "TFRecord compression of the shards.", flag_values=FLAGS)
flags.DEFINE_string("text_field", "text", "The .jsonl field (.parquet column) holding a "
                    "document's text.", flag_values=FLAGS)
flags.DEFINE_boolean("overwrite", False, "Replace the shards in a non-empty --output_dir.",
                     flag_values=FLAGS)
flags.DEFINE_integer("max_line_bytes", corpus.DEFAULT_MAX_LINE_BYTES,
                     "Lines longer than this are split before encoding.", flag_values=FLAGS)
flags.DEFINE_enum("encoder", "tf", list(sentence_encoders.ENCODERS), "tf: the project's tokenizer; "
                  "hf: Hugging Face tokenizers (same ids, a cross-check).", flag_values=FLAGS)
flags.DEFINE_enum("engine", "local", ["local", "beam"], "local: this process (threads); beam: "
                  "an Apache Beam pipeline (--beam_options). Both write the same files.",
                  flag_values=FLAGS)
flags.DEFINE_string("beam_options", "", "Beam pipeline options as one string, e.g. "
                    "'--runner=DirectRunner --direct_num_workers=2 "
                    "--direct_running_mode=multi_processing' (--engine=beam).", flag_values=FLAGS)
flags.DEFINE_integer("group_bytes", doc_groups.DEFAULT_GROUP_BYTES,
                     "Characters of text per document group: packing crosses documents within "
                     "a group, and a group is one unit of parallel work. Changes the output.",
                     flag_values=FLAGS)
flags.DEFINE_integer("sort_buffer_mb", external_sort.DEFAULT_SORT_BYTES >> 20,
                     "Spill data (MB) sorted in memory at once by the global shuffle: bounds "
                     "memory per process (Beam: per worker); larger shards are sorted in "
                     "key-range buckets on disk. Does not change the output.", flag_values=FLAGS)
flags.DEFINE_boolean("progress", True, "Report progress on stderr about once a second.",
                     flag_values=FLAGS)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  for name in ("input", "vocab_dir", "output_dir"):
    if not getattr(FLAGS, name):
      raise app.UsageError(f"--{name} is required")
  files_lib.check(FLAGS.vocab_dir, "--vocab_dir")
  files_lib.check(FLAGS.output_dir, "--output_dir")
  for part in FLAGS.input.split(","):
    if part.strip() and part.strip() != corpus.STDLIB:
      files_lib.check(part.strip(), "--input")
  # Errors (BuildError, CorpusError, VocabError, OSError: disk full names the file) are one
  # line from cli.
  info = build_shards(
      FLAGS.input, FLAGS.vocab_dir, FLAGS.output_dir, max_seq_len=FLAGS.max_seq_len,
      packing=FLAGS.packing, num_shards=FLAGS.num_shards,
      num_validation_shards=FLAGS.num_validation_shards,
      validation_fraction=FLAGS.validation_fraction, seed=FLAGS.seed,
      compression=FLAGS.compression, text_field=FLAGS.text_field,
      max_line_bytes=FLAGS.max_line_bytes, overwrite=FLAGS.overwrite, encoder=FLAGS.encoder,
      group_bytes=FLAGS.group_bytes, engine=FLAGS.engine, beam_options=FLAGS.beam_options,
      sort_bytes=FLAGS.sort_buffer_mb << 20,
      progress=progress_lib.Progress(sys.stderr) if FLAGS.progress else None)
  print(summary(info, FLAGS.output_dir))
  return 0


def console_main():
  """The console-script entry point (pyproject.toml)."""
  cli.run(main, FLAGS)


if __name__ == "__main__":
  console_main()
