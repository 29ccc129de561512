"""TF-op featurization shared by the training data and the exported SavedModel.

A sequence task's input is its vocabulary's template (tokenizer_json.Template, the tokenizer's
`template`: tokenization/vocabulary.py), never constants:
  RoBERTa's files:     <s> A </s>          <s> A </s></s> B </s>
  a tokenizer.json:    [CLS] A [SEP]       [CLS] A [SEP] B [SEP]   (its post-processor's)
Pairs are truncated longest-first (HF's `truncation="longest_first"`: one token at a time from
the longer side, from B on a tie), which in closed form keeps
  len(A') = min(len(A), max(budget - len(B), ceil(budget / 2)))
  len(B') = min(len(B), budget - len(A')).
Everything here is TF ops on ragged tensors, so the SavedModel runs the same code as training.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from roberta_tf.tokenization.tokenizer_json import Template


def tokenize(tokenizer, texts: Sequence[str], chunk: int = 512) -> tf.RaggedTensor:
  """int32 ragged [len(texts), None]: each text's token ids (no special tokens), tokenized
  `chunk` texts at a time (a data set's texts at once would hold every intermediate of the
  tokenizer in memory)."""
  parts = [tokenizer(tf.constant(list(texts[i:i + chunk]), tf.string))
           for i in range(0, len(texts), chunk)]
  if not parts:
    return tokenizer(tf.constant([], tf.string))
  return tf.concat(parts, axis=0) if len(parts) > 1 else parts[0]


def take_prefix(ids: tf.RaggedTensor, lengths: tf.Tensor) -> tf.RaggedTensor:
  """Row i of `ids` cut to its first `lengths[i]` values (ragged [B, None] -> ragged [B, None])."""
  positions = tf.ragged.range(tf.cast(ids.row_lengths(), tf.int64))
  keep = positions < tf.cast(lengths, tf.int64)[:, None]
  return tf.ragged.boolean_mask(ids, keep)


def truncate_pair(len_a: tf.Tensor, len_b: tf.Tensor, budget) -> tuple[tf.Tensor, tf.Tensor]:
  """Longest-first truncation lengths (see the module docstring). int64 [B] each."""
  len_a, len_b = tf.cast(len_a, tf.int64), tf.cast(len_b, tf.int64)
  budget = tf.cast(budget, tf.int64)
  keep_a = tf.minimum(len_a, tf.maximum(budget - len_b, (budget + 1) // 2))
  keep_b = tf.minimum(len_b, budget - keep_a)
  return keep_a, keep_b


def fill(ids: Sequence[int], rows) -> tf.Tensor:
  """int32 [rows, len(ids)]: `ids` in every row (a template's part)."""
  return tf.tile(tf.constant(list(ids), tf.int32, shape=[1, len(ids)]), tf.stack([rows, 1]))


def build_inputs(ids_a: tf.RaggedTensor, ids_b: tf.RaggedTensor | None, max_seq_len: int,
                 template: Template) -> tf.RaggedTensor:
  """Token ids of the texts -> model input ids with the special tokens, at most max_seq_len.

  Args:
    ids_a: int32 ragged [B, None], the first texts' ids (no special tokens).
    ids_b: int32 ragged [B, None] of the second texts, or None for single texts.
    max_seq_len: the longest output row, special tokens included.
    template: the vocabulary's templates (the tokenizer's `template`).
  Returns:
    int32 ragged [B, None]: `prefix A suffix` or `prefix A middle B suffix` (RoBERTa:
    `<s> A </s>`, `<s> A </s></s> B </s>`), truncated to fit.
  """
  batch = ids_a.nrows()
  prefix, suffix = fill(template.prefix, batch), fill(template.suffix, batch)
  if ids_b is None:
    ids_a = take_prefix(ids_a, tf.fill([batch], tf.constant(
        max_seq_len - template.single_specials, tf.int64)))
    return tf.concat([prefix, ids_a, suffix], axis=1)
  if template.middle is None:
    raise ValueError("the vocabulary has no pair template: this task needs text pairs")
  keep_a, keep_b = truncate_pair(ids_a.row_lengths(), ids_b.row_lengths(),
                                 max_seq_len - template.pair_specials)
  return tf.concat([prefix, take_prefix(ids_a, keep_a), fill(template.middle, batch),
                    take_prefix(ids_b, keep_b), suffix], axis=1)


def to_dense(ids: tf.RaggedTensor, pad_id: int) -> dict[str, tf.Tensor]:
  """Ragged ids -> {"input_ids": int32 [B, S] right-padded with pad_id, "padding_mask": int32
  [B, S] (1 real, 0 pad)}; S = the longest row."""
  return {"input_ids": tf.cast(ids.to_tensor(default_value=pad_id), tf.int32),
          "padding_mask": tf.ones_like(ids, tf.int32).to_tensor(default_value=0)}
