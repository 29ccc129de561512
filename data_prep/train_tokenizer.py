r"""Trains RoBERTa's byte-level BPE vocabulary: corpus -> vocab.json + merges.txt.

    python -m data_prep.train_tokenizer --input=corpus/*.jsonl.gz --vocab_size=50265 \
        --output_dir=vocab/

The engine is Hugging Face `tokenizers`' BPE trainer on GPT-2's byte-level pre-tokenization
(the same split `roberta_tf.tokenization.tokenizer` applies), fed one sentence (line) at a time from
data_prep/corpus.py, so every corpus format works (.txt, .jsonl, .gz, globs, comma lists,
`stdlib`). The files are in the GPT-2/RoBERTa format with roberta-base's id layout: `<s>`=0,
`<pad>`=1, `</s>`=2, `<unk>`=3, then the 256 byte symbols and the merges, and `<mask>` last
(id vocab_size - 1). Same input and flags, same files. Both files are written under temporary
names and renamed when complete, vocab.json last (so its presence marks a complete pair).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator

from absl import app, flags

from data_prep import corpus
from data_prep import progress as progress_lib
from roberta_tf.common import atomic_write, cli
from roberta_tf.tokenization.vocab_files import BOS, EOS, MASK, MERGES_FILE, PAD, UNK, VOCAB_FILE

MIN_VOCAB_SIZE = 256 + 5  # the byte alphabet and the five special tokens


class TrainTokenizerError(ValueError):
  """Bad flags or output directory; the message names the flag or path."""


def _sentences(files: list[str], text_field: str, stats: corpus.CorpusStats,
               report: progress_lib.Progress | None) -> Iterator[str]:
  for doc in corpus.iter_documents(files, text_field=text_field, stats=stats):
    yield from doc
    if report is not None:
      report.update(stats.bytes_read, stats.total_bytes, stats.sentences)


def train(input_spec: str, vocab_size: int, output_dir: str, min_frequency: int = 2,
          text_field: str = "text", overwrite: bool = False,
          show_progress: bool = True) -> dict[str, int]:
  """Trains the vocabulary and writes `output_dir`/vocab.json and merges.txt.

  Args:
    input_spec: files, globs, directories (comma list) or `stdlib` (see data_prep/corpus.py).
    vocab_size: the size of the vocabulary, `<mask>` included (roberta-base: 50265). A corpus
      too small to learn that many merges gives a smaller one (`<mask>` still last).
    output_dir: created if needed; must be empty unless `overwrite`.
    min_frequency: a pair seen fewer times is never merged.
    text_field: the JSON field of .jsonl documents.
    overwrite: replace vocab.json/merges.txt in a non-empty directory.
    show_progress: reading progress and the trainer's progress bars on stderr.
  Returns:
    counters: vocab_size, num_merges, documents, sentences, invalid_utf8.
  Raises:
    TrainTokenizerError, corpus.CorpusError.
  """
  from tokenizers import Tokenizer, models, pre_tokenizers, trainers  # pylint: disable=import-outside-toplevel
  if vocab_size < MIN_VOCAB_SIZE:
    raise TrainTokenizerError(f"--vocab_size={vocab_size}: must be >= {MIN_VOCAB_SIZE} "
                              "(256 byte symbols + 5 special tokens)")
  if min_frequency < 0:
    raise TrainTokenizerError(f"--min_frequency={min_frequency}: must be >= 0")
  if os.path.exists(output_dir) and not os.path.isdir(output_dir):
    raise TrainTokenizerError(f"--output_dir={output_dir!r} exists and is not a directory")
  if os.path.isdir(output_dir) and os.listdir(output_dir) and not overwrite:
    raise TrainTokenizerError(f"--output_dir={output_dir!r} is not empty (pass --overwrite to "
                              "replace its vocab.json and merges.txt)")
  files = corpus.resolve_inputs(input_spec)
  os.makedirs(output_dir, exist_ok=True)

  tokenizer = Tokenizer(models.BPE())
  tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
  trainer = trainers.BpeTrainer(
      vocab_size=vocab_size - 1,  # <mask> is appended last, as in roberta-base
      min_frequency=min_frequency, show_progress=show_progress,
      special_tokens=[BOS, PAD, EOS, UNK],
      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
  stats = corpus.CorpusStats()
  report = progress_lib.Progress() if show_progress else None
  tokenizer.train_from_iterator(_sentences(files, text_field, stats, report), trainer=trainer)
  if report is not None:
    report.update(stats.bytes_read, stats.total_bytes, stats.sentences, force=True)
    report.done()
  if stats.sentences == 0:
    raise TrainTokenizerError(f"--input={input_spec!r} holds no text")

  model = json.loads(tokenizer.to_str())["model"]
  vocab: dict[str, int] = model["vocab"]
  merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
  vocab[MASK] = len(vocab)
  expected = {BOS: 0, PAD: 1, EOS: 2, UNK: 3}
  if any(vocab.get(t) != i for t, i in expected.items()) or sorted(vocab.values()) != list(
      range(len(vocab))):
    raise AssertionError(f"unexpected id layout from tokenizers: {list(vocab.items())[:8]}")

  ordered = dict(sorted(vocab.items(), key=lambda kv: kv[1]))
  # vocab.json is written last and marks a complete pair: an old one goes first, so that a run
  # stopped between the two files never leaves new merges beside an old vocab.json.
  if os.path.exists(os.path.join(output_dir, VOCAB_FILE)):
    os.remove(os.path.join(output_dir, VOCAB_FILE))
  atomic_write.write_text(os.path.join(output_dir, MERGES_FILE),
                "#version: 0.2\n" + "".join(m + "\n" for m in merges))
  atomic_write.write_text(os.path.join(output_dir, VOCAB_FILE),
                json.dumps(ordered, ensure_ascii=False, separators=(",", ":")) + "\n")
  return {"vocab_size": len(vocab), "num_merges": len(merges), "documents": stats.documents,
          "sentences": stats.sentences, "invalid_utf8": stats.invalid_utf8}




FLAGS = flags.FLAGS
flags.DEFINE_string("input", None, "Corpus: files, globs, directories (comma list) of .txt / "
                    ".jsonl (optionally .gz), or 'stdlib' (the running Python's docs).")
flags.DEFINE_integer("vocab_size", 50265, "Vocabulary size including the 5 special tokens "
                     "(roberta-base: 50265). Must match the model config's vocab_size.")
flags.DEFINE_string("output_dir", None, "Directory for vocab.json and merges.txt; must be empty "
                    "unless --overwrite.")
flags.DEFINE_integer("min_frequency", 2, "Pairs seen fewer times are never merged.")
flags.DEFINE_string("text_field", "text", "JSON field holding a .jsonl document's text.")
flags.DEFINE_bool("overwrite", False, "Replace vocab.json/merges.txt in a non-empty directory.")
flags.DEFINE_bool("progress", True, "Progress output on stderr.")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  if not FLAGS.input or not FLAGS.output_dir:
    raise app.UsageError("--input and --output_dir are required")
  # Errors (TrainTokenizerError, CorpusError, OSError naming the file) are one line from cli.
  counts = train(FLAGS.input, FLAGS.vocab_size, FLAGS.output_dir,
                 min_frequency=FLAGS.min_frequency, text_field=FLAGS.text_field,
                 overwrite=FLAGS.overwrite, show_progress=FLAGS.progress)
  print(f"wrote {FLAGS.output_dir}/{VOCAB_FILE} ({counts['vocab_size']} tokens, <mask>="
        f"{counts['vocab_size'] - 1}) and {MERGES_FILE} ({counts['num_merges']} merges) from "
        f"{counts['documents']} documents, {counts['sentences']} sentences"
        + (f", {counts['invalid_utf8']} invalid UTF-8 sequences replaced"
           if counts["invalid_utf8"] else ""), file=sys.stderr)
  return 0


def console_main():
  cli.run(main)


if __name__ == "__main__":
  console_main()
