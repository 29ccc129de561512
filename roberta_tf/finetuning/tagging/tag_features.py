"""Token classification features: words -> byte-BPE pieces -> model windows, and back.

Encoding (Hugging Face's, `RobertaTokenizerFast(words, is_split_into_words=True,
add_prefix_space=True)`): each word is tokenized on its own with a space before it, so
"New York" as the words ["New", "York"] is `ĠNew ĠYork`, the first word included. HF splits the
special-token strings (`<s>`, `</s>`, `<pad>`, `<unk>`, `<mask>`) out of a word first and puts
the space before each other piece, never before a special token: "<mask>x" is `<mask> Ġx`,
"<s>" is `<s>`, an empty word has no pieces (`word_texts` rewrites a word so that our tokenizer
gives exactly that; tests/test_tagging_word_encoding.py checks it on roberta-base's vocabulary).
A tokenizer.json vocabulary (ModernBERT's: `PipelineTokenizer`) is HF's `tokenizer(words,
is_split_into_words=True)` with that file: each word as it is, no space added by us (the
file's own pre-tokenizer adds one only if its ByteLevel `add_prefix_space` says so; ModernBERT's
does not, so "New York" as words is `New York` without a `Ġ`), special tokens split out by the
pipeline itself (tests/test_tagging_word_encoding_pipeline.py checks ids and word alignment on
the ModernBERT fixture). A word's tag
goes on its FIRST piece; the other pieces are ignored by the loss (label -1), or with
`label_all_pieces` (HF's label_all_tokens) carry the word's tag, a B- tag as its I- twin when
the label set has one (HF's run_ner: "B-PER" continues as "I-PER").

Windows: a sentence of n pieces fits when n <= W = max_seq_len - 2 (the vocabulary's single
template: `<s> ... </s>`, `[CLS] ... [SEP]`; W = max_seq_len - its specials); a longer
one is cut into windows of W pieces starting every min(doc_stride, W) pieces until one reaches
the end (SQuAD's doc-stride rule). Every window trains on the words whose first piece it holds.
For prediction each word is read from ONE window: the one where its first piece has the most
context, min(pieces before it, pieces after it) in the window, the first window on a tie. So
every word is predicted and scored exactly once, however long its sentence.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from roberta_tf.finetuning import featurize
from roberta_tf.tokenization import vocab_files
from roberta_tf.tokenization.pipeline_tokenizer import PipelineTokenizer
from roberta_tf.tokenization.tokenizer_json import Template

IGNORED = -1  # the label of a piece the loss ignores (HF's -100)

# HF's add_prefix_space on a word (module docstring) as rewrites of " " + word, for words
# without whitespace (what the readers and the export's word split give): a space after every
# special token, then none before one, then none at the end. RE2 syntax, so the SavedModel runs
# the same rewrites (word_texts_tf).
_SPECIAL = "|".join(re.escape(t) for t in vocab_files.SPECIAL_TOKENS.values())
_REWRITES = ((f"({_SPECIAL})", r"\1 "), (f" ({_SPECIAL})", r"\1"), (f"({_SPECIAL}) $", r"\1"))


def adds_prefix_space(tokenizer) -> bool:
  """Whether words are fed to `tokenizer` as " " + word (vocab.json + merges.txt: HF's
  RobertaTokenizerFast with add_prefix_space) or as they are (a tokenizer.json pipeline)."""
  return not isinstance(tokenizer, PipelineTokenizer)


def word_texts(words: Sequence[str], prefix_space: bool = True) -> list[str]:
  """What the tokenizer sees of each word (module docstring): " " + word, rewritten around
  special-token strings; "" for an empty word. Without `prefix_space`: the words."""
  if not prefix_space:
    return list(words)
  out = []
  for word in words:
    text = " " + word
    for pattern, replacement in _REWRITES:
      text = re.sub(pattern, replacement, text)
    out.append(text if word else "")
  return out


def word_texts_tf(words: tf.Tensor, prefix_space: bool = True) -> tf.Tensor:
  """word_texts in TF ops: tf.string [N] -> tf.string [N]."""
  if not prefix_space:
    return words
  text = tf.strings.join([" ", words])
  for pattern, replacement in _REWRITES:
    text = tf.strings.regex_replace(text, pattern, replacement)
  return tf.where(tf.equal(words, ""), "", text)


def encode_words(tokenizer, sentences: Sequence[Sequence[str]]) -> list[list[np.ndarray]]:
  """Each sentence's words as piece ids: [sentence][word] -> int32 [pieces]."""
  flat = [t for words in sentences for t in word_texts(words, adds_prefix_space(tokenizer))]
  ragged = featurize.tokenize(tokenizer, flat)
  values, splits = ragged.flat_values.numpy(), ragged.row_splits.numpy()
  pieces = [values[splits[i]:splits[i + 1]] for i in range(len(flat))]
  out, start = [], 0
  for words in sentences:
    out.append(pieces[start:start + len(words)])
    start += len(words)
  return out


def window_starts(num_pieces: int, width: int, stride: int) -> list[int]:
  """The first piece of each window (see the module docstring)."""
  stride = min(stride, width)
  count = 1 + -(-max(num_pieces - width, 0) // stride)
  return [k * stride for k in range(count)]


def continuation_ids(labels: Sequence[str]) -> np.ndarray:
  """int32 [K]: the tag a word's later pieces carry under label_all_pieces (B-X -> I-X when
  I-X is a label; every other tag itself)."""
  index = {name: i for i, name in enumerate(labels)}
  return np.asarray([index.get("I-" + name[2:], i) if name.startswith("B-") else i
                     for i, name in enumerate(labels)], np.int32)


@dataclasses.dataclass
class TaggingFeatures:
  """Windows of a list of sentences.

  input_ids, labels: per window, int32 [L] (`<s> pieces </s>`; labels IGNORED where no tag is
    trained: specials, later pieces, or every piece of an unlabeled set).
  word_window, word_position: per sentence, int [num_words]: the window each word is predicted
    from and its first piece's position there.
  """
  input_ids: list[np.ndarray]
  labels: list[np.ndarray]
  word_window: list[np.ndarray]
  word_position: list[np.ndarray]


def _owner(first: np.ndarray, starts: list[int], lengths: list[int], prefix: int = 1
           ) -> tuple[np.ndarray, np.ndarray]:
  """(window, position) of each word's first piece (absolute indices `first`) under the
  max-context rule; `prefix`: the ids before a window's pieces (<s>: 1)."""
  best = np.full(len(first), -1, np.int64)
  window = np.zeros(len(first), np.int64)
  for k, (start, length) in enumerate(zip(starts, lengths, strict=True)):
    inside = (first >= start) & (first < start + length)
    context = np.minimum(first - start, start + length - 1 - first)
    better = inside & (context > best)
    window[better], best[better] = k, context[better]
  return window, first - np.asarray(starts)[window] + prefix


def featurize_sentences(pieces: Sequence[Sequence[np.ndarray]],
                        tags: Sequence[Sequence[int]] | None, *, max_seq_len: int,
                        doc_stride: int, template: Template,
                        continuation: np.ndarray | None = None) -> TaggingFeatures:
  """Windows of sentences (pieces from encode_words; tags: ids per word, or None), each in
  `template`'s single form (the tokenizer's `template`: <s> window </s>).

  continuation: continuation_ids(labels) to label every piece (label_all_pieces); None: the
  first piece only.
  """
  width = max_seq_len - template.single_specials
  prefix, suffix = len(template.prefix), len(template.suffix)
  out = TaggingFeatures([], [], [], [])
  for s, words in enumerate(pieces):
    ids = np.concatenate(words).astype(np.int32)
    counts = np.asarray([len(w) for w in words])
    first = np.cumsum(counts) - counts
    piece_labels = np.full(len(ids), IGNORED, np.int32)
    if tags is not None:
      word_tags = np.asarray(tags[s], np.int32)
      if continuation is not None:
        piece_labels = np.repeat(continuation[word_tags], counts)
      piece_labels[first] = word_tags
    starts = window_starts(len(ids), width, doc_stride)
    lengths = [min(width, len(ids) - start) for start in starts]
    window, position = _owner(first, starts, lengths, prefix)
    out.word_window.append(window + len(out.input_ids))
    out.word_position.append(position)
    for start, length in zip(starts, lengths, strict=True):
      out.input_ids.append(np.asarray(template.single(list(ids[start:start + length])),
                                      np.int32))
      out.labels.append(np.concatenate([[IGNORED] * prefix, piece_labels[start:start + length],
                                        [IGNORED] * suffix]).astype(np.int32))
  return out


def word_predictions(logits: Sequence[np.ndarray], features: TaggingFeatures
                     ) -> tuple[list[np.ndarray], list[np.ndarray]]:
  """Per sentence: each word's predicted tag id and its probability, read at its first piece in
  its window (logits: per window, float [L', K] with L' >= the window's length)."""
  tags, probs = [], []
  for window, position in zip(features.word_window, features.word_position, strict=True):
    rows = np.stack([logits[w][p] for w, p in zip(window, position, strict=True)]).astype(
        np.float64)
    rows = np.exp(rows - rows.max(axis=1, keepdims=True))
    rows /= rows.sum(axis=1, keepdims=True)
    tags.append(rows.argmax(axis=1))
    probs.append(rows.max(axis=1))
  return tags, probs
