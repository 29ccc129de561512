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

In the first mode a step also merges every pair that provably survives, untouched, until its
turn (`_untouchable`), which cuts the steps for long words. A word leaves the working arrays as
soon as it has no mergeable pair, so late steps only touch the few long words. The loop stops
when no word is left. Symbols are vocabulary ids; a pair is looked up with the key
`left * vocab_size + right` (int64). Pair ranks are kept between steps and looked up again only
next to a merge.

Complexity: a step costs O(live symbols) elementwise work, gathers and hash lookups, plus ~170
TF ops of fixed overhead (~3 us each on CPU). The number of steps is the longest chain of merge
levels of any word in the batch: ~10-15 for ordinary words, and growing with a word's length for
long words with many distinct pairs (a 1 MB word of random letters needs thousands: O(n * steps)
and ~35 s), which is why the tokenizer cuts words over its cap into <= 32-byte pieces first
(`long_words`): then each step is O(total bytes) and the steps are bounded by the piece size.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import tensorflow as tf

NO_RANK = np.iinfo(np.int32).max


def pair_keys(left: tf.Tensor, right: tf.Tensor, vocab_size: int) -> tf.Tensor:
  """int64 key of the pairs (left[i], right[i]) of vocabulary ids."""
  return tf.cast(left, tf.int64) * vocab_size + tf.cast(right, tf.int64)


def first_use_ranks(pairs: np.ndarray, ranks: np.ndarray, vocab_size: int):
  """Per token, the lowest rank of a merge that takes it as the left / right part.

  Args:
    pairs: int [M, 2] (left id, right id) of each merge; ranks: int [M].
  Returns:
    (left_min, right_min), int32 [vocab_size] each; NO_RANK where a token is never that part.
  """
  left = np.full(vocab_size, NO_RANK, np.int32)
  right = np.full(vocab_size, NO_RANK, np.int32)
  np.minimum.at(left, pairs[:, 0], ranks.astype(np.int32))
  np.minimum.at(right, pairs[:, 1], ranks.astype(np.int32))
  return left, right


class _Merges(NamedTuple):
  """What every step of the loop reads (see `merge_words` for each field)."""
  pair_ranks: tf.lookup.StaticHashTable
  merged_ids: tf.Tensor
  vocab_size: int
  left_min: tf.Tensor
  right_min: tf.Tensor
  all_occurrences: bool
  num_words: tf.Tensor  # int32 scalar, W


def merge_words(symbols: tf.Tensor, row_splits: tf.Tensor, pair_ranks: tf.lookup.StaticHashTable,
                merged_ids: tf.Tensor, vocab_size: int, left_min: tf.Tensor, right_min: tf.Tensor,
                all_occurrences: bool = True) -> tf.RaggedTensor:
  """Applies BPE merges to a batch of words.

  Args:
    symbols: int32 [N], the initial symbols (byte ids) of all words, concatenated.
    row_splits: int64 [W + 1], word w is symbols[row_splits[w]:row_splits[w + 1]].
    pair_ranks: int64 pair key -> int32 rank (the merge's line in merges.txt), -1 if none.
    merged_ids: int32 [num_merges], the id a merge of rank r produces.
    vocab_size: the multiplier of the pair key.
    left_min, right_min: int32 [vocab_size], from `first_use_ranks`.
    all_occurrences: see the module docstring.
  Returns:
    tf.RaggedTensor int32 [W, None], the ids of each word.
  """
  merges = _Merges(pair_ranks, merged_ids, vocab_size, left_min, right_min, all_occurrences,
                   tf.size(row_splits, out_type=tf.int32) - 1)
  word = tf.cast(tf.ragged.row_splits_to_segment_ids(row_splits), tf.int32)
  # TF's gather costs ~5 ns an element on CPU, 20x an elementwise op: the loop is written to
  # gather as few full-length arrays as it can (word and symbol travel packed in one int64).
  pos = tf.range(tf.size(symbols))
  packed = (tf.bitwise.left_shift(tf.cast(word, tf.int64), 32) |
            tf.cast(symbols, tf.int64))
  done = tf.TensorArray(tf.int64, size=0, dynamic_size=True, infer_shape=False)
  state = _retire(packed, _lookup(symbols, word, pos, pos + 1, merges),
                  tf.ones_like(symbols, tf.bool), done, 0, merges.num_words)
  _, _, done, _ = tf.while_loop(
      lambda packed, *_: tf.size(packed) > 0,
      lambda packed, rank, done, k: _step(packed, rank, done, k, merges), state,
      parallel_iterations=1,
      shape_invariants=(tf.TensorShape([None]),) * 2 + (None, tf.TensorShape([])))
  # Each word was retired whole, in one step, its symbols in order: a stable sort by word
  # restores the order of the words.
  packed = done.concat()
  word = tf.cast(tf.bitwise.right_shift(packed, 32), tf.int32)
  order = tf.argsort(word, stable=True)
  packed = tf.gather(packed, order)
  return tf.RaggedTensor.from_value_rowids(
      tf.cast(packed & 0xFFFFFFFF, tf.int32), tf.bitwise.right_shift(packed, 32),
      nrows=tf.cast(merges.num_words, tf.int64), validate=False)


def _lookup(sym, word, left, right, merges: _Merges):
  """Ranks of the pairs (sym[left], sym[right]); NO_RANK across words, past the end, or
  without a merge. left, right: int32 [K] (right may be out of range)."""
  n = tf.size(sym)
  right_c = tf.minimum(right, n - 1)
  rank = merges.pair_ranks.lookup(pair_keys(tf.gather(sym, left), tf.gather(sym, right_c),
                                            merges.vocab_size))
  same = tf.equal(tf.gather(word, left), tf.gather(word, right_c)) & (right < n)
  return tf.where(same & (rank >= 0), rank, NO_RANK)


def _retire(packed, rank, keep, done, k, num_words):
  """Keeps the `keep` symbols of words that still have a mergeable pair; the other words'
  symbols go to `done` (a TensorArray, at index k). Returns the loop state."""
  word = tf.cast(tf.bitwise.right_shift(packed, 32), tf.int32)
  mergeable = tf.cast(keep & (rank < NO_RANK), tf.int32)
  live = tf.gather(tf.math.unsorted_segment_max(mergeable, word, num_words) > 0, word)
  finished = tf.where(keep & ~live)[:, 0]
  live = tf.where(keep & live)[:, 0]
  done = done.write(k, tf.gather(packed, finished))
  return tf.gather(packed, live), tf.gather(rank, live), done, k + 1


def _choose(sym, word, rank, merges: _Merges):
  """bool [N]: the pairs (i, i + 1) this step merges (never two that touch)."""
  best = tf.math.unsorted_segment_min(rank, word, merges.num_words)
  cand = (rank < NO_RANK) & tf.equal(rank, tf.gather(best, word))
  if merges.all_occurrences:
    # Also merge now any pair that nothing can take apart before its turn (see
    # `_untouchable`): fewer steps, the same result.
    cand |= _untouchable(sym, word, rank, merges.left_min, merges.right_min)
    # Candidates touch only in runs of one pair (a, a) (a pair that can be merged early has
    # lower-ranked pairs on neither side): there take every other one from the run's start,
    # as a left-to-right scan does.
    touching = cand & _shift_right(cand)
    return tf.cond(tf.reduce_any(touching), lambda: _alternate(cand, touching), lambda: cand)
  n = tf.size(rank)
  pos = tf.range(n)
  first = tf.math.unsorted_segment_min(tf.where(cand, pos, n), word, merges.num_words)
  return cand & tf.equal(pos, tf.gather(first, word))


def _step(packed, rank, done, k, merges: _Merges):
  """One merge step of every live word; retires the words left without a mergeable pair."""
  word = tf.cast(tf.bitwise.right_shift(packed, 32), tf.int32)
  sym = tf.cast(packed & 0xFFFFFFFF, tf.int32)
  chosen = _choose(sym, word, rank, merges)
  at = tf.cast(tf.where(chosen)[:, 0], tf.int32)          # merges at (at, at + 1)
  sym = tf.tensor_scatter_nd_update(
      sym, at[:, None], tf.gather(merges.merged_ids, tf.gather(rank, at)))
  # New pairs, before dropping the right symbols (the next kept symbol after `at` is at + 2;
  # chosen pairs never touch): (at, at + 2), and (at - 1, at) unless at - 1 goes too, in
  # which case (at - 2, at) is the first kind for at - 2.
  removed = _shift_right(chosen)
  left = tf.boolean_mask(at - 1, (at > 0) & ~tf.gather(removed, tf.maximum(at - 1, 0)))
  pos = tf.concat([at, left], 0)
  new_rank = _lookup(sym, word, pos, tf.concat([at + 2, left + 1], 0), merges)
  rank = tf.tensor_scatter_nd_update(rank, pos[:, None], new_rank)
  packed = tf.tensor_scatter_nd_update(
      packed, at[:, None],
      tf.bitwise.left_shift(tf.cast(tf.gather(word, at), tf.int64), 32) |
      tf.cast(tf.gather(sym, at), tf.int64))
  return _retire(packed, rank, ~removed, done, k, merges.num_words)


def _alternate(cand: tf.Tensor, touching: tf.Tensor) -> tf.Tensor:
  """Drops every other candidate in runs of touching candidates, keeping each run's first.

  Args:
    cand: bool [N], candidates; touching: cand[i] & cand[i - 1].
  """
  in_run = touching | _shift_left(touching)
  at = tf.where(in_run)[:, 0]
  run_start = tf.concat([[True], tf.not_equal(at[1:], at[:-1] + 1)], 0)
  k = tf.range(tf.size(at, out_type=tf.int64))
  first = tf.gather(tf.boolean_mask(k, run_start), tf.cumsum(tf.cast(run_start, tf.int64)) - 1)
  odd = tf.boolean_mask(at, tf.equal((k - first) % 2, 1))
  dropped = tf.scatter_nd(odd[:, None], tf.ones_like(odd, tf.int32),
                          tf.shape(cand, out_type=tf.int64)) > 0
  return cand & ~dropped


def _shift_right(x: tf.Tensor) -> tf.Tensor:
  """y[i] = x[i - 1], y[0] = False (1-D bool)."""
  return tf.concat([tf.zeros([tf.minimum(tf.size(x), 1)], tf.bool), x[:-1]], 0)


def _shift_left(x: tf.Tensor) -> tf.Tensor:
  """y[i] = x[i + 1], y[-1] = False (1-D bool)."""
  return tf.concat([x[1:], tf.zeros([tf.minimum(tf.size(x), 1)], tf.bool)], 0)


def _untouchable(sym, word, rank, left_min, right_min):
  """Pairs (a, b) of rank r that the priority queue is sure to merge, intact, at its turn.

  With consistent merges the queue merges in rank order, and a symbol changes only by merging
  with a neighbour. The pair at i (a = sym[i], b = sym[i + 1]) survives until rank r if a cannot
  merge leftward and b cannot merge rightward with a lower rank first:
  - a is first in its word, or no merge of rank < r takes a as its right part, or the pair on
    its left has rank > r and its left symbol x can never change before r (x is first in its
    word, or no merge of rank < r takes x as its right part);
  - symmetrically for b on the right.
  Merging such a pair early changes nothing else before rank r (every merge using the new
  symbol has a rank > r), so the result is the queue's. Adjacent pairs are never both
  untouchable, except runs of one pair (a, a).

  Returns:
    bool [N], True at i where the pair (i, i + 1) is untouchable (rank[i] is [N]).
  """
  no = tf.constant(NO_RANK, tf.int32)
  first = tf.not_equal(word, tf.concat([[-1], word[:-1]], 0))     # first symbol of its word
  last = tf.not_equal(word, tf.concat([word[1:], [-1]], 0))       # last symbol of its word
  rank_left = tf.concat([[no], rank[:-1]], 0)                      # pair (i - 1, i)
  rank_right = tf.concat([rank[1:], [no]], 0)                      # pair (i + 1, i + 2)
  prev_sym_right = tf.concat([[no], tf.gather(right_min, sym)[:-1]], 0)
  next2_left = tf.concat([tf.gather(left_min, sym)[2:], [no, no]], 0)[:tf.size(sym)]
  first_prev = tf.concat([[True], first[:-1]], 0)
  last_next2 = tf.concat([last[2:], [True, True]], 0)[:tf.size(sym)]
  next_left_min = tf.concat([tf.gather(left_min, sym)[1:], [no]], 0)
  left_ok = (first | (tf.gather(right_min, sym) > rank) |
             ((rank_left > rank) & (first_prev | (prev_sym_right > rank))))
  last_next = tf.concat([last[1:], [True]], 0)                    # b is last in its word
  right_ok = (last_next | (next_left_min > rank) |
              ((rank_right > rank) & (last_next2 | (next2_left > rank))))
  return (rank < NO_RANK) & left_ok & right_ok
