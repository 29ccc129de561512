"""`VocabSettings`: every option of a vocabulary build (data_prep.train_tokenizer), declared once.

Its fields are train_tokenizer's flags (made from them by options.define_flags; parsed back by
options.from_flags) and what the library's callers pass (`train(VocabSettings(input=...,
output_dir=..., vocab_size=8000))`, `extend(VocabSettings(..., extend_from=..., add_tokens=N))`);
the object is handed whole to train_tokenizer.train or .extend. TensorFlow-free.
"""

from __future__ import annotations

import dataclasses

from roberta_tf.common.options import NON_NEGATIVE, at_least, option

MIN_VOCAB_SIZE = 256 + 5  # the byte alphabet and the five special tokens


@dataclasses.dataclass(frozen=True)
class VocabSettings:
  """A vocabulary build's options: training one (`train`) or growing one (`extend`)."""
  input: str = option(
      help="Corpus: files, globs, directories (comma list; local or URLs) of .txt / .jsonl "
      "(optionally .gz) / .parquet, or 'stdlib' (the running Python's docs).", path=True)
  output_dir: str = option(
      help="Directory (local or a URL) for vocab.json and merges.txt; must be empty unless "
      "--overwrite.", path=True)
  vocab_size: int = option(
      50265, "Vocabulary size including the 5 special tokens (roberta-base: 50265). Must match "
      "the model config's vocab_size.", check=at_least(MIN_VOCAB_SIZE))
  min_frequency: int = option(2, "Pairs seen fewer times are never merged.", check=NON_NEGATIVE)
  text_field: str = option(
      "text", "JSON field (.jsonl) or column (.parquet) holding a document's text.")
  overwrite: bool = option(
      False, "Replace vocab.json/merges.txt in a non-empty directory.")
  progress: bool = option(True, "Progress output on stderr.")
  format: str = option(
      "vocab_json", "What to write: 'vocab_json' (vocab.json + merges.txt, RoBERTa's layout: "
      "<s> <pad> </s> <unk> first, <mask> last) or 'tokenizer_json' (an HF tokenizer.json of "
      "ModernBERT's pipeline: NFC, byte-level BPE, runs of 2-24 spaces as tokens, [UNK] [CLS] "
      "[SEP] [PAD] [MASK] last, [CLS] A [SEP] B [SEP]; data_prep/pipeline_vocab.py).",
      choices=("vocab_json", "tokenizer_json"))
  extend_from: str = option(
      "", "Grow this vocabulary directory (vocab.json + merges.txt) instead of training one: up "
      "to --add_tokens new merges learned on --input over the old pieces; every old token keeps "
      "its id and every old merge its rank, the new tokens come after <mask> (data_prep/"
      "vocab_extension.py). --vocab_size does not apply.", path=True)
  add_tokens: int = option(
      0, "With --extend_from: the most new tokens (= new merges) to add; fewer when no pair is "
      "seen --min_frequency times.", check=NON_NEGATIVE)
