"""The BPE merge loop on integer symbol ids, vectorized over a batch of words.

Hugging Face `tokenizers` merges one word with a priority queue: it repeatedly merges the
adjacent pair of lowest rank (leftmost on ties). Here every word of a batch advances at once:
each step finds, per word, the lowest-rank pair and merges

- all of its non-overlapping occurrences, left to right (`all_occurrences=True`). This equals
  the priority queue when the merges are *consistent*: a merge's rank is greater than the ranks
  of the merges that produced its two parts (true of any file a BPE trainer writes, GPT-2's and
  roberta-base's included), because then merging a pair never creates a pair of lower rank, so
  the queue pops all occurrences of the current pair before anything else. Runs of one symbol
  ("a a a" with merge "a a") merge from the left: positions 0, 2, 4, ... of the run.
- only the leftmost occurrence (`all_occurrences=False`): exact for any merges file, slower.

The loop stops when no word has a mergeable pair. Symbols are vocabulary ids; a pair is looked up
with the key `left * vocab_size + right` (int64).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

_NO_RANK = np.iinfo(np.int32).max


def pair_keys(left: tf.Tensor, right: tf.Tensor, vocab_size: int) -> tf.Tensor:
  """int64 key of the pairs (left[i], right[i]) of vocabulary ids."""
  return tf.cast(left, tf.int64) * vocab_size + tf.cast(right, tf.int64)


def merge_words(symbols: tf.Tensor, row_splits: tf.Tensor, pair_ranks: tf.lookup.StaticHashTable,
                merged_ids: tf.Tensor, vocab_size: int,
                all_occurrences: bool = True) -> tf.RaggedTensor:
  """Applies BPE merges to a batch of words.

  Args:
    symbols: int32 [N], the initial symbols (byte ids) of all words, concatenated.
    row_splits: int64 [W + 1], word w is symbols[row_splits[w]:row_splits[w + 1]].
    pair_ranks: int64 pair key -> int32 rank (the merge's line in merges.txt), -1 if none.
    merged_ids: int32 [num_merges], the id a merge of rank r produces.
    vocab_size: the multiplier of the pair key.
    all_occurrences: see the module docstring.
  Returns:
    tf.RaggedTensor int32 [W, None], the ids of each word.
  """
  num_words = tf.size(row_splits, out_type=tf.int32) - 1
  word = tf.cast(tf.ragged.row_splits_to_segment_ids(row_splits), tf.int32)

  def step(sym, word, _):
    n = tf.size(sym)
    same_word = tf.equal(word[:-1], word[1:])
    rank = pair_ranks.lookup(pair_keys(sym[:-1], sym[1:], vocab_size))
    rank = tf.where(same_word & (rank >= 0), rank, _NO_RANK)
    best = tf.math.unsorted_segment_min(rank, word[:-1], num_words)
    cand = (rank < _NO_RANK) & tf.equal(rank, tf.gather(best, word[:-1]))
    pos = tf.range(n - 1)
    if all_occurrences:
      # Candidates of one word share one pair; they touch only for pairs (a, a). In a run of
      # touching candidates take every other one from the run's start, as a left-to-right scan.
      not_cand = tf.where(~cand)[:, 0]
      before = tf.cumsum(tf.cast(~cand, tf.int32))     # non-candidates at or before i
      last_break = tf.gather(tf.concat([[-1], tf.cast(not_cand, tf.int32)], 0), before)
      chosen = cand & tf.equal((pos - last_break - 1) % 2, 0)
    else:
      first = tf.math.unsorted_segment_min(tf.where(cand, pos, n), word[:-1], num_words)
      chosen = cand & tf.equal(pos, tf.gather(first, word[:-1]))
    new = tf.gather(merged_ids, tf.where(chosen, rank, 0))
    merged = tf.concat([tf.where(chosen, new, sym[:-1]), sym[-1:]], 0)
    keep = tf.concat([[True], ~chosen], 0)               # the right symbol of a merge goes
    return tf.boolean_mask(merged, keep), tf.boolean_mask(word, keep), tf.reduce_any(chosen)

  def cond(sym, word, go):
    del sym, word
    return go

  sym, word, _ = tf.while_loop(
      cond, step, (symbols, word, tf.size(symbols) > 1),
      shape_invariants=(tf.TensorShape([None]), tf.TensorShape([None]), tf.TensorShape([])),
      parallel_iterations=1)
  return tf.RaggedTensor.from_value_rowids(sym, tf.cast(word, tf.int64),
                                           nrows=tf.cast(num_words, tf.int64), validate=False)
