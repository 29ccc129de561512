"""Token classification in TF ops for the SavedModel: raw text -> words -> windows -> tags ->
entities, the same rules as fine-tuning (tag_features.py), vectorized over a batch.

Words: a text is first repaired to valid UTF-8 (invalid bytes -> U+FFFD, as the tokenizer sees
it: `pretokenize.repair_utf8`); its words are the maximal runs of characters that are not
whitespace, whitespace being Python's `str.isspace()` set (`str.split()`'s: Unicode White_Space
plus the separators U+001C..U+001F; `WHITESPACE` lists it). So `text.split()` is the word list
and a CoNLL sentence joined with single spaces gives back its words. Each word is tokenized
as " " + word (tag_features.word_texts: HF's is_split_into_words with add_prefix_space,
special-token strings included; a tokenizer.json vocabulary's words as they are, as HF's),
the text's pieces are cut into windows of W = max_seq_len - 2
pieces every min(doc_stride, W) pieces, and every piece is read from the window where it has the
most context (min(pieces before, pieces after) in the window; the first window on a tie). A
word's tag is the argmax at its first piece, its score that tag's softmax probability:
`tag_features.word_predictions`.

Entities: words grouped as transformers' `pipeline("token-classification",
aggregation_strategy="first")` groups them (`group_entities`): a word joins the group before it
when its tag's type is the group's last word's type and its tag does not start with "B-" (the
type of "B-X"/"I-X" is X, of any other tag the whole tag, so "O" words group too and a plain tag
continues a run of itself); a group's type is its first word's tag after the first "-" (the
whole tag without one), its score the mean of its words' scores (NaN ignored, numpy's nanmean),
its start the first word's first character and its end the last word's end (Python str indices
into the repaired text). Groups of type "O" are dropped (HF's default ignore_labels).
Where HF differs: its pipeline tokenizes the whole text and guesses word boundaries from
offsets (a piece starting right after a non-space character continues a word). With words
separated by single spaces that is our split, except for a word whose first character is cut
into several pieces (a bare "Ġ" first piece, or the bytes of a character the vocabulary has no
"Ġ"+character token for, as "É" or "日" in a small vocabulary): HF starts a new "word" at each
such piece and tags it from a piece no loss trained; we tag the word once, at its first piece.
Tabs, newlines, other whitespace and runs of spaces are separators here; HF joins a tab or
newline and the word after it to the word before them, and makes each extra space of a run an
empty-span word of its own. A special-token string in the text (`<s>`, `<mask>`, ...) is one
token in HF's whole-text tokenization, whatever touches it. HF's entity "word" is its decoded
tokens; the caller takes the text span instead.

Bounds (hostile input): only a text's first `max_chars` characters are read (65,536 in the
export) and only its words that end there; of those, words are tagged while the text's pieces
fit in `max_pieces` (8,192; the model's work, windows, is linear in them), so a request costs at
most B x 8,192 pieces' windows whatever its texts' sizes. `truncated` says a text was longer
than max_chars or had words past max_pieces. NUL is an ordinary character. An empty or
whitespace-only text has no words: zero entities (it still costs one window of `<s></s>`).
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from roberta_tf.finetuning import featurize
from roberta_tf.finetuning.tagging import tag_features
from roberta_tf.tokenization import pretokenize
from roberta_tf.tokenization.tokenizer_json import Template

# Python's str.isspace() code points (str.split()'s separators; Python 3.11's, tests check).
WHITESPACE = (0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x1C, 0x1D, 0x1E, 0x1F, 0x20, 0x85, 0xA0, 0x1680,
              *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F, 0x205F, 0x3000)
OUTSIDE = "O"  # HF's default ignore_labels
DEFAULT_MAX_CHARS = 65_536
DEFAULT_MAX_PIECES = 8_192
_BIG = tf.int64.max


def hf_tag(label: str) -> tuple[bool, str]:
  """(starts an entity, type) of a tag as transformers' TokenClassificationPipeline.get_tag
  reads it: "B-X" -> (True, X), "I-X" -> (False, X), any other tag t -> (False, t)."""
  if label.startswith(("B-", "I-")):
    return label.startswith("B-"), label[2:]
  return False, label


def hf_entity_group(label: str) -> str:
  """An entity's type from its first word's tag, as group_sub_entities names it."""
  return label.split("-", 1)[-1]


class LabelTables:
  """Per tag id: its name, whether it begins an entity (B-), its grouping key (an int per
  distinct get_tag type), its entity type name and whether that type is dropped ("O")."""

  def __init__(self, labels: Sequence[str]):
    parsed = [hf_tag(name) for name in labels]
    keys = {kind: i for i, kind in enumerate(dict.fromkeys(kind for _, kind in parsed))}
    groups = [hf_entity_group(name) for name in labels]
    self.names = tf.constant(list(labels), tf.string)
    self.begins = tf.constant([b for b, _ in parsed], tf.bool)
    self.keys = tf.constant([keys[kind] for _, kind in parsed], tf.int64)
    self.types = tf.constant(groups, tf.string)
    self.dropped = tf.constant([g == OUTSIDE for g in groups], tf.bool)


def split_words(text: tf.Tensor, max_chars: int):
  """Words of a batch of valid UTF-8 texts (tf.string [B]): their texts (tf.string [N], in
  text order), which text each is in (int64 [N]) and its character span (int64 [N], [N]):
  maximal runs of non-WHITESPACE characters among each text's first max_chars characters."""
  cut = tf.strings.substr(text, 0, max_chars + 1, unit="UTF8_CHAR")
  chars, byte_offsets = tf.strings.unicode_decode_with_offsets(cut, "UTF-8")
  code = tf.cast(chars.flat_values, tf.int64)
  spaces = tf.constant(WHITESPACE, tf.int64)
  at = tf.minimum(tf.searchsorted(spaces, code), len(WHITESPACE) - 1)
  solid = tf.gather(spaces, at) != code
  position = tf.ragged.range(chars.row_lengths()).flat_values
  row = chars.value_rowids()
  last = position == tf.gather(chars.row_lengths(), row) - 1
  solid_before = tf.concat([[False], solid[:-1]], 0) & (position > 0)
  solid_after = tf.concat([solid[1:], [False]], 0) & ~last
  first_char = tf.where(solid & ~solid_before)[:, 0]
  last_char = tf.where(solid & ~solid_after)[:, 0]
  start, end = tf.gather(position, first_char), tf.gather(position, last_char) + 1
  keep = end <= max_chars  # a word reaching the cut may go on past it
  first_char, last_char = first_char[keep], last_char[keep]
  start, end = start[keep], end[keep]
  word_row = tf.gather(row, first_char)
  begin = tf.gather(byte_offsets.flat_values, first_char)
  last_code = tf.gather(code, last_char)
  last_bytes = (1 + tf.cast(last_code >= 0x80, tf.int64) + tf.cast(last_code >= 0x800, tf.int64)
                + tf.cast(last_code >= 0x10000, tf.int64))
  length = tf.gather(byte_offsets.flat_values, last_char) + last_bytes - begin
  words = tf.strings.substr(tf.gather(cut, word_row), begin, length, unit="BYTE")
  return words, word_row, start, end


def windows(pieces: tf.RaggedTensor, *, max_seq_len: int, doc_stride: int, template: Template):
  """Every text's windows (tag_features.window_starts; at least one, `<s></s>` for a text
  without pieces) as model inputs.

  Args:
    pieces: int32 ragged [B, None], each text's pieces.
    template: the vocabulary's (the tokenizer's `template`); its single form goes around each
      window.
  Returns:
    (ids: int32 ragged [N, None] `<s> window </s>`, example: int64 [N] each window's text,
     start, length: int64 [N] its first piece (in its text) and its number of pieces).
  """
  width = max_seq_len - template.single_specials
  stride = min(doc_stride, width)
  count = pieces.row_lengths()
  windows_per_text = 1 + (tf.maximum(count - width, 0) + stride - 1) // stride
  per_text = tf.ragged.range(windows_per_text)
  example = per_text.value_rowids()
  start = per_text.flat_values * stride
  length = tf.minimum(tf.gather(count, example) - start, width)
  first = tf.gather(pieces.row_splits[:-1], example) + start
  index = tf.ragged.range(first, first + length)
  tokens = tf.RaggedTensor.from_row_splits(tf.gather(pieces.flat_values, index.flat_values),
                                           index.row_splits)
  n = tf.size(example)
  ids = tf.concat([featurize.fill(template.prefix, n), tokens, featurize.fill(template.suffix, n)],
                  axis=1)
  return ids, example, start, length


def piece_logits(logits: tf.Tensor, example, start, length, piece_splits, prefix: int = 1
                 ) -> tf.Tensor:
  """float32 [T, K]: every piece's logits (T pieces of all texts, in order) read from the
  window where it has the most context, the first such window on a tie (tag_features'
  `_owner` rule, applied to every piece).

  Args:
    logits: float32 [N, S, K] of the windows (position 0 is `<s>`).
    example, start, length: from `windows`; piece_splits: int64 [B + 1] the texts' row splits.
    prefix: the ids before a window's pieces (the template's prefix: 1).
  """
  seq_len = tf.shape(logits, out_type=tf.int64)[1]
  total = piece_splits[-1]
  position = tf.range(seq_len)[None, :] - prefix                             # piece in window
  inside = (position >= 0) & (position < length[:, None])
  context = tf.minimum(position, length[:, None] - 1 - position)
  key = (tf.gather(piece_splits[:-1], example) + start)[:, None] + position  # piece in batch
  where = tf.where(inside)
  keys, scores, window = tf.gather_nd(key, where), tf.gather_nd(context, where), where[:, 0]
  best = tf.math.unsorted_segment_max(scores, keys, total)
  owner = tf.math.unsorted_segment_min(
      tf.where(scores >= tf.gather(best, keys), window, tf.fill(tf.shape(window), _BIG)), keys,
      total)
  chosen = tf.equal(window, tf.gather(owner, keys))
  rows = tf.gather_nd(logits, tf.boolean_mask(where, chosen))
  num_tags = tf.shape(logits, out_type=tf.int64)[2]
  return tf.scatter_nd(tf.boolean_mask(keys, chosen)[:, None], rows,
                       tf.stack([total, num_tags]))


def group_entities(tables: LabelTables, tag: tf.Tensor, score: tf.Tensor,
                   word_splits: tf.Tensor, start: tf.Tensor, end: tf.Tensor):
  """HF's group_entities over each text's words (see the module docstring).

  Args:
    tag: int64 [N] each word's tag id; score: float32 [N]; word_splits: int64 [B + 1] the
      texts' word row splits; start, end: int64 [N] the words' character spans.
  Returns:
    ragged [B, None] per entity: type (string), start, end (int64), score (float32).
  """
  words = tf.RaggedTensor.from_row_splits(tag, word_splits)
  first_word = tf.ragged.range(words.row_lengths()).flat_values == 0
  key = tf.gather(tables.keys, tag)
  new_group = first_word | tf.gather(tables.begins, tag) | (
      key != tf.concat([tf.fill([1], tf.constant(-1, tf.int64)), key[:-1]], 0))
  group = tf.cumsum(tf.cast(new_group, tf.int64)) - 1
  num_groups = tf.reduce_sum(tf.cast(new_group, tf.int64))
  head = tf.where(new_group)[:, 0]
  valid = ~tf.math.is_nan(score)
  total = tf.math.unsorted_segment_sum(tf.where(valid, score, 0.0), group, num_groups)
  counted = tf.math.unsorted_segment_sum(tf.cast(valid, tf.float32), group, num_groups)
  head_tag = tf.gather(tag, head)
  keep = ~tf.gather(tables.dropped, head_tag)
  rows = tf.boolean_mask(tf.gather(words.value_rowids(), head), keep)
  values = (tf.gather(tables.types, head_tag), tf.gather(start, head),
            tf.math.unsorted_segment_max(end, group, num_groups), total / counted)
  nrows = tf.size(word_splits, out_type=tf.int64) - 1
  return [tf.RaggedTensor.from_value_rowids(tf.boolean_mask(v, keep), rows, nrows)
          for v in values]


def _padded(ragged: tf.RaggedTensor, default, dtype=None) -> tf.Tensor:
  """[B, max(1, longest row), ...] dense, `default` in the empty slots."""
  dense = ragged.to_tensor(default_value=default)
  width = tf.shape(dense)[1]
  padding = [[0, 0], [0, tf.maximum(1 - width, 0)]] + [[0, 0]] * (ragged.shape.rank - 2)
  dense = tf.pad(dense, padding, constant_values=default)
  return dense if dtype is None else tf.cast(dense, dtype)


def _pieces_of_words(tokenizer, text, *, max_chars: int, max_pieces: int):
  """The words that are tagged and their pieces: (word_ids int32 ragged [N, None] (a word's
  pieces), word_splits int64 [B + 1], start, end int64 [N], truncated bool [B])."""
  words, row, start, end = split_words(text, max_chars)
  word_ids = tokenizer(tag_features.word_texts_tf(
      words, tag_features.adds_prefix_space(tokenizer)))
  # Keep a text's words while its pieces fit: a prefix of its words (cumulative counts).
  nrows = tf.size(text, out_type=tf.int64)
  all_splits = tf.RaggedTensor.from_value_rowids(row, row, nrows).row_splits
  running = tf.concat([tf.zeros([1], tf.int64), tf.cumsum(word_ids.row_lengths())], 0)
  fits = running[1:] - tf.gather(running, tf.gather(all_splits, row)) <= max_pieces
  cut = tf.math.unsorted_segment_max(tf.cast(~fits, tf.int32), row, tf.cast(nrows, tf.int32))
  truncated = (cut > 0) | (tf.strings.length(text, unit="UTF8_CHAR") > max_chars)
  word_ids = tf.ragged.boolean_mask(word_ids, fits)
  word_splits = tf.RaggedTensor.from_value_rowids(row[fits], row[fits], nrows).row_splits
  return word_ids, word_splits, start[fits], end[fits], truncated


def tag(model, tokenizer, tables: LabelTables, text, *, max_seq_len: int, doc_stride: int,
        max_chars: int = DEFAULT_MAX_CHARS, max_pieces: int = DEFAULT_MAX_PIECES) -> dict:
  """text: tf.string [B] -> the `tag` signature's outputs (finetuned_export's docstring)."""
  text = pretokenize.repair_utf8(text)
  word_ids, word_splits, start, end, truncated = _pieces_of_words(
      tokenizer, text, max_chars=max_chars, max_pieces=max_pieces)
  pieces = tf.RaggedTensor.from_row_splits(word_ids.flat_values,
                                           tf.gather(word_ids.row_splits, word_splits))
  ids, example, window_start, length = windows(
      pieces, max_seq_len=max_seq_len, doc_stride=doc_stride, template=tokenizer.template)
  # One extra `<s></s>` row: the model never sees an empty batch (a request of zero texts).
  spare = tf.constant([tokenizer.template.single([])], tf.int32)
  ids = tf.concat([ids, tf.RaggedTensor.from_tensor(spare)], axis=0)
  logits = model(featurize.to_dense(ids, tokenizer.pad_id), training=False)["logits"][:-1]
  per_piece = piece_logits(logits, example, window_start, length, pieces.row_splits,
                           len(tokenizer.template.prefix))
  first = tf.gather(per_piece, word_ids.row_splits[:-1])                    # [N, K]
  tag_id = tf.argmax(first, axis=-1)
  score = tf.reduce_max(tf.nn.softmax(first, axis=-1), axis=-1)
  kind, entity_start, entity_end, entity_score = group_entities(
      tables, tag_id, score, word_splits, start, end)
  per_word = lambda values: tf.RaggedTensor.from_row_splits(values, word_splits)
  return {
      "entity_type": _padded(kind, ""),
      "entity_start": _padded(entity_start, tf.constant(-1, tf.int64), tf.int32),
      "entity_end": _padded(entity_end, tf.constant(-1, tf.int64), tf.int32),
      "entity_score": _padded(entity_score, 0.0),
      "num_entities": tf.cast(kind.row_lengths(), tf.int32),
      "word_tags": _padded(per_word(tf.gather(tables.names, tag_id)), ""),
      "word_start": _padded(per_word(start), tf.constant(-1, tf.int64), tf.int32),
      "word_end": _padded(per_word(end), tf.constant(-1, tf.int64), tf.int32),
      "num_words": tf.cast(word_splits[1:] - word_splits[:-1], tf.int32),
      "token_logits": _padded(tf.RaggedTensor.from_row_splits(per_piece, pieces.row_splits),
                              0.0),
      "token_ids": _padded(pieces, -1),
      "num_pieces": tf.cast(pieces.row_lengths(), tf.int32),
      "truncated": truncated,
  }
