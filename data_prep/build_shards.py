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
uniform random sample of the corpus in random order (data_prep/block_order.py). The flags are
declared once, as data_prep/shard_settings.py's ShardSettings, and handed to the library whole.
"""

from absl import app

from data_prep.shard_settings import ShardSettings
from roberta_tf.common import cli, options

FLAGS = cli.binary_flags()  # this binary's flags (common/cli.py)
# One flag per ShardSettings field (data_prep/shard_settings.py); --input, --vocab_dir and
# --output_dir are no absl-required flags: from_flags says which is missing, in one line.
options.define_flags(ShardSettings, FLAGS, required=False)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  settings = options.from_flags(ShardSettings, FLAGS)  # each option's checks run
  # The builder imports TensorFlow (the example spec, the shard writer): here, so that importing
  # this binary does not (common/cli.py's `run` quiets TF's start-up before `main` runs).
  # pylint: disable=import-outside-toplevel
  from data_prep.shard_builder import build_shards, summary
  # Errors (BuildError, CorpusError, VocabError, OSError: disk full names the file) are one
  # line from cli.
  info = build_shards(settings)
  print(summary(info, settings.output_dir))
  return 0


def console_main():
  """The console-script entry point (pyproject.toml)."""
  cli.run(main, FLAGS)


if __name__ == "__main__":
  console_main()
