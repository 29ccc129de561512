"""`ShardSettings`: every option of a shard build, declared once.

Its fields are data_prep.build_shards' flags (made from them by options.define_flags; parsed back
by options.from_flags) and what the library's callers pass (`build_shards(ShardSettings(input=...,
vocab_dir=..., output_dir=..., max_seq_len=128))`); the object is handed whole to
shard_builder.build_shards and on to both engines (the Beam engine's DoFns pickle it with them).
A few fields are no flags (options.setting(): tests' knobs).

The corpus, the vocabulary, --max_seq_len, --packing, --num_shards, --num_validation_shards,
--validation_fraction, --seed, --compression, --text_field, --max_line_bytes, --group_bytes and
shuffle_blocks define the output: the same values give the same files byte for byte with either
engine; the others (--overwrite, --encoder: the same ids either way, --engine, --beam_options,
--sort_buffer_mb, --progress, batch_sentences) change how it is made, not what.
"""

from __future__ import annotations

import dataclasses

from data_prep import block_order, corpus, doc_groups, external_sort, sentence_encoders
from roberta_tf.common.options import FRACTION, POSITIVE, at_least, check_options, option, setting
from roberta_tf.data import dataset_info, packings

TRAIN = doc_groups.TRAIN
VALIDATION = doc_groups.VALIDATION
ENGINES = ("local", "beam")


class BuildError(ValueError):
  """A bad argument or input for shard building; the message names the flag or file."""


@dataclasses.dataclass(frozen=True)
class ShardSettings:
  """A shard build's options (see the module docstring); `validate` checks them."""
  input: str = option(
      help="Corpus: .txt/.jsonl(.gz)/.parquet files, globs, directories (comma list; local "
      "paths or URLs), or 'stdlib' (the running Python's documentation).", path=True)
  vocab_dir: str = option(
      help="Directory (local or a URL) with vocab.json and merges.txt, or an HF tokenizer.json "
      "(an HF model folder); must be the vocabulary the model is trained with "
      "(dataset_info.json records its sha256; a copy goes beside the shards).", path=True)
  output_dir: str = option(
      help="Where the shards and dataset_info.json go (local or a URL; dataset_info.json, "
      "written last, marks it complete).", path=True)
  max_seq_len: int = option(
      512, "Ids per sequence at most, <s> and </s> included; must be <= the model's "
      "max_seq_len.", check=at_least(3))
  packing: str = option(
      packings.FULL_SENTENCES, "full_sentences: blocks cross documents (with an extra </s>); "
      "doc_sentences: never; separate_documents: blocks hold several <s> document </s> and "
      "record where each starts, so attention and positions restart there (ModernBERT's "
      "packing); segment_pair / sentence_pair: BERT's pairs with a next-sentence label (the "
      "paper's input-format ablation only).", choices=tuple(packings.PACKINGS))
  num_shards: int = option(16, "Train shard files.", check=POSITIVE)
  num_validation_shards: int = option(1, "Validation shard files.", check=POSITIVE)
  validation_fraction: float = option(
      0.01, "Fraction of documents held out for validation (whole documents); 0 writes no "
      "validation split.", check=FRACTION)
  seed: int = option(
      0, "Seeds the validation split and the global shuffle of blocks (which shard each goes "
      "to, and its place there).")
  compression: str = option(
      "none", "TFRecord compression of the shards.", choices=tuple(dataset_info.COMPRESSIONS))
  text_field: str = option(
      "text", "The .jsonl field (.parquet column) holding a document's text.")
  overwrite: bool = option(False, "Replace the shards in a non-empty --output_dir.")
  max_line_bytes: int = option(
      corpus.DEFAULT_MAX_LINE_BYTES, "Lines longer than this are split before encoding.",
      check=at_least(16))
  encoder: str = option(
      "tf", "tf: the project's tokenizer; hf: Hugging Face tokenizers (same ids, a "
      "cross-check).", choices=tuple(sentence_encoders.ENCODERS))
  engine: str = option(
      "local", "local: this process (threads); beam: an Apache Beam pipeline "
      "(--beam_options). Both write the same files.", choices=ENGINES)
  beam_options: str = option(
      "", "Beam pipeline options as one string, e.g. '--runner=DirectRunner "
      "--direct_num_workers=2 --direct_running_mode=multi_processing' (--engine=beam).")
  group_bytes: int = option(
      doc_groups.DEFAULT_GROUP_BYTES, "Characters of text per document group: packing "
      "crosses documents within a group, and a group is one unit of parallel work. Changes "
      "the output.", check=POSITIVE)
  sort_buffer_mb: int = option(
      external_sort.DEFAULT_SORT_BYTES >> 20, "Spill data (MB) sorted in memory at once by "
      "the global shuffle: bounds memory per process (Beam: per worker); larger shards are "
      "sorted in key-range buckets on disk. Does not change the output.", check=POSITIVE)
  progress: bool = option(True, "Report progress on stderr about once a second.")
  # No flags: tests' knobs.
  batch_sentences: int = setting(4096, "Sentences per encoder call.")
  shuffle_blocks: bool = setting(
      True, "True: the global shuffle (data_prep/block_order.py: every shard a uniform random "
      "sample of its split in random order). False: each shard in corpus order (tests).")
  sort_bytes: int = setting(
      0, "The sort buffer in bytes when > 0 (a buffer under 1 MB, to make tests bucket); "
      "0: --sort_buffer_mb's.")

  @property
  def splits(self) -> tuple[str, ...]:
    """train, and validation when --validation_fraction > 0."""
    return (TRAIN, VALIDATION) if self.validation_fraction > 0 else (TRAIN,)

  def shard_count(self, split: str) -> int:
    """Files of `split`: --num_shards (train) or --num_validation_shards."""
    return self.num_shards if split == TRAIN else self.num_validation_shards

  @property
  def order(self) -> str:
    """How blocks are ordered in and across shards (data_prep/block_order.py)."""
    return block_order.ORDER_GLOBAL if self.shuffle_blocks else block_order.ORDER_CORPUS

  @property
  def sort_buffer_bytes(self) -> int:
    """Spill bytes sorted in memory at once (data_prep/external_sort.py)."""
    return self.sort_bytes or self.sort_buffer_mb << 20

  def validate(self) -> None:
    """Raises ValueError naming the first bad option: its own checks (options.check_options:
    required, choices, range, path), then what depends on several (BuildError)."""
    check_options(self)
    if self.packing in packings.PAIR_PACKINGS and self.max_seq_len < 5:
      raise BuildError(f"--max_seq_len={self.max_seq_len}: --packing={self.packing} needs >= 5 "
                       "(<s> A </s> B </s>)")
    if self.sort_buffer_bytes < 1:
      raise BuildError(f"sort_bytes={self.sort_bytes}: the sort buffer must be positive")
