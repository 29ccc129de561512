r"""Trains RoBERTa's byte-level BPE vocabulary: corpus -> vocab.json + merges.txt.

    python -m data_prep.train_tokenizer --input=corpus/*.jsonl.gz --vocab_size=50265 \
        --output_dir=vocab/

The engine is Hugging Face `tokenizers`' BPE trainer on GPT-2's byte-level pre-tokenization
(the same split `roberta_tf.tokenization.tokenizer` applies), fed one sentence (line) at a time from
data_prep/corpus.py, so every corpus format works (.txt, .jsonl, .gz, .parquet, globs, comma
lists, `stdlib`), and `--input` / `--output_dir` may be URLs (gs://, ram://, ...:
roberta_tf/common/files.py). The files are in the GPT-2/RoBERTa format with roberta-base's id
layout: `<s>`=0, `<pad>`=1, `</s>`=2, `<unk>`=3, then the 256 byte symbols and the merges, and
`<mask>` last (id vocab_size - 1). Same input and flags, same files. Both files are written
under temporary names and renamed when complete (on a URL: atomic_write's publishing),
vocab.json last (so its presence marks a complete pair).

A domain's vocabulary grows an existing one instead (continued pretraining; docs/
domain_adaptation.md):

    python -m data_prep.train_tokenizer --extend_from=vocab/ --add_tokens=2000 \
        --input=domain.txt --output_dir=vocab_domain/

learns up to --add_tokens merges on the domain corpus over the old vocabulary's pieces; every
old token keeps its id and every old merge its rank, the new tokens follow `<mask>`
(data_prep/vocab_extension.py), so a word that no new merge touches is encoded as before.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator

from absl import app

from data_prep import corpus, pipeline_vocab, vocab_extension
from data_prep import progress as progress_lib
from data_prep.vocab_settings import VocabSettings
from roberta_tf.common import atomic_write, cli, options
from roberta_tf.common import files as files_lib
from roberta_tf.tokenization.vocab_files import BOS, EOS, MASK, MERGES_FILE, PAD, UNK, VOCAB_FILE


class TrainTokenizerError(ValueError):
  """Bad flags or output directory; the message names the flag or path."""


def _sentences(files: list[str], text_field: str, stats: corpus.CorpusStats,
               report: progress_lib.Progress | None) -> Iterator[str]:
  for doc in corpus.iter_documents(files, text_field=text_field, stats=stats):
    yield from doc
    if report is not None:
      report.update(stats.bytes_read, stats.total_bytes, stats.sentences)


def train(settings: VocabSettings) -> dict[str, int]:
  """Trains the vocabulary and writes `settings.output_dir`/vocab.json and merges.txt.

  `settings` (data_prep/vocab_settings.py): `input` is files, globs, directories (comma list)
  or `stdlib` (see data_prep/corpus.py), local paths or URLs; `vocab_size` counts `<mask>`
  (roberta-base: 50265), and a corpus too small to learn that many merges gives a smaller one
  (`<mask>` still last); `format` "tokenizer_json": a tokenizer.json of ModernBERT's pipeline
  instead (data_prep/pipeline_vocab.py; `vocab_size` counts its space runs and [MASK] last);
  `output_dir` is created if needed and must be empty unless `overwrite`;
  `progress`: reading progress and the trainer's progress bars on stderr.
  Returns:
    counters: vocab_size, num_merges, documents, sentences, invalid_utf8, null_texts.
  Raises:
    TrainTokenizerError, corpus.CorpusError, files.UnknownSchemeError.
  """
  from tokenizers import trainers  # pylint: disable=import-outside-toplevel
  input_spec, vocab_size, output_dir = settings.input, settings.vocab_size, settings.output_dir
  min_frequency, show_progress = settings.min_frequency, settings.progress
  options.check_options(settings)  # --vocab_size >= 261 (bytes + specials), paths, ...
  json_format = settings.format == pipeline_vocab.FORMAT
  reserved = pipeline_vocab.RESERVED if json_format else 1  # ids added after the trainer's
  if json_format and vocab_size < 256 + reserved:  # the option's own check: vocab_json's minimum
    raise TrainTokenizerError(f"--vocab_size={vocab_size}: must be >= {256 + reserved} with "
                              "--format=tokenizer_json (256 byte symbols + the added tokens)")
  _check_output_dir(output_dir, settings.overwrite)
  files = corpus.resolve_inputs(input_spec)
  files_lib.makedirs(output_dir)

  tokenizer = pipeline_vocab.new_tokenizer() if json_format else _roberta_tokenizer()
  trainer = trainers.BpeTrainer(
      vocab_size=vocab_size - reserved,  # <mask> is appended last, as in roberta-base
      min_frequency=min_frequency, show_progress=show_progress,
      special_tokens=[] if json_format else [BOS, PAD, EOS, UNK],
      initial_alphabet=_byte_alphabet())
  stats = corpus.CorpusStats()
  report = progress_lib.Progress() if show_progress else None
  tokenizer.train_from_iterator(_sentences(files, settings.text_field, stats, report),
                                trainer=trainer)
  if report is not None:
    report.update(stats.bytes_read, stats.total_bytes, stats.sentences, force=True)
    report.done()
  if stats.sentences == 0:
    raise TrainTokenizerError(f"--input={input_spec!r} holds no text")
  if json_format:
    pipeline_vocab.finish(tokenizer)
    sizes = pipeline_vocab.write(tokenizer, output_dir)
  else:
    sizes = _write_roberta(tokenizer, output_dir)
  return {**sizes, "documents": stats.documents, "sentences": stats.sentences,
          "invalid_utf8": stats.invalid_utf8, "null_texts": stats.null_texts}


def _roberta_tokenizer():
  from tokenizers import Tokenizer, models, pre_tokenizers  # pylint: disable=import-outside-toplevel
  tokenizer = Tokenizer(models.BPE())
  tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
  return tokenizer


def _byte_alphabet() -> list[str]:
  from tokenizers import pre_tokenizers  # pylint: disable=import-outside-toplevel
  return pre_tokenizers.ByteLevel.alphabet()


def _write_roberta(tokenizer, output_dir: str) -> dict[str, int]:
  """vocab.json (<mask> appended last) and merges.txt of a trained RoBERTa-layout BPE."""
  model = json.loads(tokenizer.to_str())["model"]
  vocab: dict[str, int] = model["vocab"]
  merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
  vocab[MASK] = len(vocab)
  expected = {BOS: 0, PAD: 1, EOS: 2, UNK: 3}
  if any(vocab.get(t) != i for t, i in expected.items()) or sorted(vocab.values()) != list(
      range(len(vocab))):
    raise AssertionError(f"unexpected id layout from tokenizers: {list(vocab.items())[:8]}")
  _write(output_dir, vocab, merges)
  return {"vocab_size": len(vocab), "num_merges": len(merges)}


def _write(output_dir: str, vocab: dict[str, int], merges: list[str]) -> None:
  """vocab.json (by id) and merges.txt ("left right" lines, by rank) into `output_dir`."""
  ordered = dict(sorted(vocab.items(), key=lambda kv: kv[1]))
  # vocab.json is written last and marks a complete pair: an old one goes first, so that a run
  # stopped between the two files never leaves new merges beside an old vocab.json.
  vocab_path = files_lib.join(output_dir, VOCAB_FILE)
  if files_lib.exists(vocab_path):
    files_lib.remove(vocab_path)
  atomic_write.write_text(files_lib.join(output_dir, MERGES_FILE),
                          "#version: 0.2\n" + "".join(m + "\n" for m in merges))
  atomic_write.write_text(vocab_path,
                          json.dumps(ordered, ensure_ascii=False, separators=(",", ":")) + "\n")


def _check_output_dir(output_dir: str, overwrite: bool) -> None:
  if files_lib.exists(output_dir) and not files_lib.isdir(output_dir):
    raise TrainTokenizerError(f"--output_dir={output_dir!r} exists and is not a directory")
  if files_lib.isdir(output_dir) and files_lib.listdir(output_dir) and not overwrite:
    raise TrainTokenizerError(f"--output_dir={output_dir!r} is not empty (pass --overwrite to "
                              "replace its vocab.json and merges.txt)")


def extend(settings: VocabSettings) -> dict[str, int | float]:
  """Grows the vocabulary in `settings.extend_from` with up to `add_tokens` tokens learned on
  the corpus `input` (data_prep/vocab_extension.py: old ids and merge ranks kept, new tokens
  after them) and writes the grown vocab.json and merges.txt to `output_dir`.

  Returns:
    counters: vocab_size, old_vocab_size, added, num_merges, documents, sentences, words
    (distinct), old_tokens_per_word and new_tokens_per_word (on the corpus), invalid_utf8,
    null_texts.
  Raises:
    TrainTokenizerError, vocab_extension.VocabExtensionError, corpus.CorpusError,
    files.UnknownSchemeError.
  """
  input_spec, extend_from, output_dir = settings.input, settings.extend_from, settings.output_dir
  add_tokens, min_frequency = settings.add_tokens, settings.min_frequency
  options.check_options(settings)  # --min_frequency >= 0, paths, ...
  if add_tokens < 1:
    raise TrainTokenizerError(f"--add_tokens must be >= 1 with --extend_from, got {add_tokens}")
  _check_output_dir(output_dir, settings.overwrite)
  if (files_lib.isdir(output_dir) and files_lib.normalize(output_dir)
      == files_lib.normalize(extend_from)):
    raise TrainTokenizerError(f"--output_dir={output_dir!r} is --extend_from: write the grown "
                              "vocabulary to another directory (the old one stays the model's)")
  vocab, merges = vocab_extension.read_old(extend_from)
  files = corpus.resolve_inputs(input_spec)
  stats = corpus.CorpusStats()
  report = progress_lib.Progress() if settings.progress else None
  grown, grown_merges, counts = vocab_extension.extend(
      vocab, merges, _sentences(files, settings.text_field, stats, report), add_tokens,
      min_frequency)
  if report is not None:
    report.update(stats.bytes_read, stats.total_bytes, stats.sentences, force=True)
    report.done()
  if stats.sentences == 0:
    raise TrainTokenizerError(f"--input={input_spec!r} holds no text")
  files_lib.makedirs(output_dir)
  _write(output_dir, grown, [f"{a} {b}" for a, b in grown_merges])
  return {"vocab_size": len(grown), "old_vocab_size": len(vocab), "added": counts["added"],
          "num_merges": len(grown_merges), "documents": stats.documents,
          "sentences": stats.sentences, "words": counts["words"],
          "old_tokens_per_word": counts["old_tokens_per_word"],
          "new_tokens_per_word": counts["new_tokens_per_word"],
          "invalid_utf8": stats.invalid_utf8, "null_texts": stats.null_texts}


FLAGS = cli.binary_flags()  # this binary's flags (common/cli.py)
# One flag per VocabSettings field (data_prep/vocab_settings.py); --input and --output_dir are
# no absl-required flags: from_flags says which is missing, in one line.
options.define_flags(VocabSettings, FLAGS, required=False)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  settings = options.from_flags(VocabSettings, FLAGS)
  if settings.extend_from or settings.add_tokens:
    if settings.format == pipeline_vocab.FORMAT:
      raise app.UsageError("--extend_from grows a vocab.json + merges.txt: not with "
                           "--format=tokenizer_json")
    return _main_extend(settings, vocab_size_given=FLAGS["vocab_size"].present)
  # Errors (TrainTokenizerError, CorpusError, OSError naming the file) are one line from cli.
  counts = train(settings)
  wrote = (f"{VOCAB_FILE} ({counts['vocab_size']} tokens, <mask>={counts['vocab_size'] - 1}) "
           f"and {MERGES_FILE}" if settings.format != pipeline_vocab.FORMAT else
           f"tokenizer.json ({counts['vocab_size']} tokens, [MASK]={counts['vocab_size'] - 1})")
  print(f"wrote {settings.output_dir}/{wrote} ({counts['num_merges']} merges) from "
        f"{counts['documents']} documents, {counts['sentences']} sentences"
        + (f", {counts['invalid_utf8']} invalid UTF-8 sequences replaced"
           if counts["invalid_utf8"] else "")
        + (f", {counts['null_texts']} null Parquet texts skipped"
           if counts["null_texts"] else ""), file=sys.stderr)
  return 0


def _main_extend(settings: VocabSettings, vocab_size_given: bool):
  if not settings.extend_from:
    raise app.UsageError("--add_tokens needs --extend_from=VOCAB_DIR (the vocabulary to grow)")
  if vocab_size_given:
    raise app.UsageError("--vocab_size does not apply with --extend_from: the grown size is the "
                         "old size + --add_tokens")
  counts = extend(settings)
  print(vocab_extension.report(counts, settings.extend_from, settings.output_dir,
                               settings.add_tokens, settings.min_frequency), file=sys.stderr)
  return 0


def console_main():
  cli.run(main, FLAGS)


if __name__ == "__main__":
  console_main()
