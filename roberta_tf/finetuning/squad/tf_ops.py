"""Extractive QA in TF ops for the SavedModel: windows, the model, the best span, its text.

The same rules as `features.featurize` + `decode.decode` (see those modules),
vectorized over a batch of (question, context) pairs: every context is split into doc-stride
windows, all windows of the batch run through the model as one batch [N, S], each window's best
valid span is found by an argmax over its [S, S] start+end score grid, and each question takes
its best window. The answer is a byte slice of the context widened to whole UTF-8 characters
and stripped of ASCII whitespace. Contexts are first repaired to valid UTF-8 (as the tokenizer
sees them).
"""

from __future__ import annotations

import tensorflow as tf

from roberta_tf.finetuning import featurize
from roberta_tf.tokenization import pretokenize
from roberta_tf.tokenization.tokenizer_json import Template

_BIG = tf.int64.max


def windows(question_ids: tf.RaggedTensor, context_ids: tf.RaggedTensor, *, max_seq_len: int,
            max_query_len: int, doc_stride: int, template: Template):
  """Doc-stride windows of a batch (B questions) as model inputs (N windows): the pair template
  around (question, the window's context), `<s> q </s></s> ctx </s>` with RoBERTa's files.

  Returns:
    (ids: int32 ragged [N, None] feature ids, example: int64 [N] each window's question,
     window_start, window_len, context_offset: int64 [N]).
  """
  question = featurize.take_prefix(question_ids, tf.fill([question_ids.nrows()],
                                                        tf.constant(max_query_len, tf.int64)))
  q_len = question.row_lengths()
  c_len = context_ids.row_lengths()
  if template.middle is None:
    raise ValueError("the vocabulary has no pair template: extractive QA needs one")
  window = max_seq_len - q_len - template.pair_specials
  stride = tf.minimum(tf.constant(doc_stride, tf.int64), window)
  count = 1 + (tf.maximum(c_len - window, 0) + stride - 1) // stride
  per_example = tf.ragged.range(count)
  example = per_example.value_rowids()
  start = per_example.flat_values * tf.gather(stride, example)
  length = tf.minimum(tf.gather(c_len, example) - start, tf.gather(window, example))
  first = tf.gather(context_ids.row_splits[:-1], example) + start
  index = tf.ragged.range(first, first + length)
  tokens = tf.RaggedTensor.from_row_splits(tf.gather(context_ids.flat_values, index.flat_values),
                                           index.row_splits)
  n = tf.size(example)
  ids = tf.concat([featurize.fill(template.prefix, n), tf.gather(question, example),
                   featurize.fill(template.middle, n), tokens, featurize.fill(template.suffix, n)],
                  axis=1)
  return (ids, example, start, length,
          tf.gather(q_len, example) + len(template.prefix) + len(template.middle))


def max_context(example, start, length, offset, context_splits, seq_len):
  """bool [N, S]: feature positions that are context tokens whose max-context window this is
  (features.max_context_mask's integer score, the first window on a tie)."""
  n = tf.size(example, out_type=tf.int64)
  k = tf.range(seq_len, dtype=tf.int64)[None, :] - offset[:, None]          # [N, S]
  inside = (k >= 0) & (k < length[:, None])
  score = 100 * tf.minimum(k, length[:, None] - 1 - k) + length[:, None]
  key = tf.gather(context_splits[:-1], example)[:, None] + start[:, None] + k
  where = tf.where(inside)
  keys, scores = tf.gather_nd(key, where), tf.gather_nd(score, where)
  window = where[:, 0]
  total = context_splits[-1]
  best = tf.math.unsorted_segment_max(scores, keys, total)
  first = tf.math.unsorted_segment_min(
      tf.where(scores >= tf.gather(best, keys), window, tf.fill(tf.shape(window), _BIG)), keys,
      total)
  chosen = tf.equal(window, tf.gather(first, keys))
  return tf.scatter_nd(where, chosen, tf.stack([n, tf.cast(seq_len, tf.int64)])), inside


def best_answer(start_logits, end_logits, example, start, length, offset, context_ids,
                num_examples, max_answer_len: int, answerable_logits=None):
  """Each question's best span over its windows.

  Args:
    start_logits, end_logits: float32 [N, S].
    answerable_logits: float32 [N] of the answerability classifier, or None.
  Returns:
    (score float32 [B] (-inf: no valid span), first, last int64 [B] token indices in the
    context, null score float32 [B] = min over windows of start_logits[0] + end_logits[0], or
    with the classifier of -answerable_logits).
  """
  seq_len = tf.shape(start_logits, out_type=tf.int64)[1]
  is_max, inside = max_context(example, start, length, offset, context_ids.row_splits, seq_len)
  pos = tf.range(seq_len)
  i, j = pos[:, None], pos[None, :]
  valid = ((j >= i) & (j - i < max_answer_len))[None] & is_max[:, :, None] & inside[:, None, :]
  grid = start_logits[:, :, None] + end_logits[:, None, :]
  grid = tf.where(valid, grid, tf.fill(tf.shape(grid), -float("inf")))
  flat = tf.reshape(grid, [tf.shape(grid)[0], -1])
  best = tf.argmax(flat, axis=1)                                             # first max
  score = tf.reduce_max(flat, axis=1)
  window_first = start + best // seq_len - offset
  window_last = start + best % seq_len - offset
  example_score = tf.math.unsorted_segment_max(score, example, num_examples)
  n = tf.size(example, out_type=tf.int64)
  chosen = tf.math.unsorted_segment_min(
      tf.where(score >= tf.gather(example_score, example), tf.range(n), tf.fill([n], _BIG)),
      example, num_examples)
  chosen = tf.minimum(chosen, n - 1)  # a question always has a window; guards the gather
  null = tf.math.unsorted_segment_min(
      start_logits[:, 0] + end_logits[:, 0] if answerable_logits is None
      else -answerable_logits, example, num_examples)
  return (example_score, tf.gather(window_first, chosen), tf.gather(window_last, chosen), null)


def span_text(context, context_ids: tf.RaggedTensor, first, last, byte_lengths):
  """The context text of tokens first..last (int64 [B], indices into each row of context_ids):
  the bytes they cover widened to whole characters, ASCII whitespace stripped. Indices of
  questions without a span may be anything: the result is then some slice, masked by the caller.
  """
  lengths = tf.cast(tf.gather(byte_lengths, context_ids.flat_values), tf.int64)   # [T]
  ends = tf.cumsum(lengths)
  starts_padded = tf.concat([ends - lengths, [0]], 0)  # [T + 1]: index T exists when T = 0
  ends_padded = tf.concat([ends, [0]], 0)
  num_tokens = tf.size(lengths, out_type=tf.int64)
  row = context_ids.row_splits[:-1]
  base = tf.gather(tf.concat([[0], ends], 0), row)  # bytes before each row in the running sum
  token = lambda k: tf.clip_by_value(row + k, 0, num_tokens)
  total = tf.cast(tf.strings.length(context), tf.int64)
  begin_byte = tf.clip_by_value(tf.gather(starts_padded, token(first)) - base, 0, total)
  end_byte = tf.clip_by_value(tf.gather(ends_padded, token(last)) - base, begin_byte, total)
  # Widen to whole characters: each row's character start bytes, then the total as a sentinel.
  _, char_offsets = tf.strings.unicode_decode_with_offsets(context, "UTF-8")
  bounds = tf.concat([char_offsets, total[:, None]], axis=1).to_tensor(default_value=_BIG)
  begin_index = tf.searchsorted(bounds, begin_byte[:, None], side="right") - 1
  end_index = tf.searchsorted(bounds, tf.maximum(end_byte - 1, 0)[:, None], side="right")
  begin = tf.gather(bounds, begin_index, batch_dims=1)[:, 0]
  end = tf.minimum(tf.gather(bounds, end_index, batch_dims=1)[:, 0], total)
  end = tf.where(end_byte > begin_byte, end, begin)
  return tf.strings.strip(tf.strings.substr(context, begin, end - begin, unit="BYTE"))


def answer(model, tokenizer, byte_lengths, question, context, *, max_seq_len: int,
           max_query_len: int, doc_stride: int, max_answer_len: int, version_2: bool,
           null_score_threshold: float):
  """question, context: tf.string [B] -> {"answer": string [B], "score": float32 [B],
  "null_score": float32 [B]}; "" when no span is valid or (v2) no-answer wins."""
  context = pretokenize.repair_utf8(context)
  question_ids, context_ids = tokenizer(question), tokenizer(context)
  ids, example, start, length, offset = windows(
      question_ids, context_ids, max_seq_len=max_seq_len, max_query_len=max_query_len,
      doc_stride=doc_stride, template=tokenizer.template)
  outputs = model(featurize.to_dense(ids, tokenizer.pad_id), training=False)
  num_examples = question_ids.nrows()
  classifier = outputs.get("answerable_logits")
  score, first, last, null = best_answer(
      outputs["start_logits"], outputs["end_logits"], example, start, length, offset,
      context_ids, num_examples, max_answer_len, classifier)
  has_span = score > -float("inf")
  if version_2:  # decode.py's rule: the classifier's null alone, or null minus the best span
    has_span &= ~((null if classifier is not None else null - score) > null_score_threshold)
  text = span_text(context, context_ids, first, last, byte_lengths)
  return {"answer": tf.where(has_span, text, ""), "score": score, "null_score": null}
