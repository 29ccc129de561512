"""Bounded BPE for very long words: cut into pieces, merge the pieces, re-merge every seam.

The merge loop (`bpe_merge`) takes one step per distinct merge a word goes through, so its cost
grows faster than linearly with a word's length: one 1 MB "word" of random letters took ~35 s.
A word longer than `cap` bytes (`cap_bytes`: 256, or twice the longest vocabulary token) is cut
instead into pieces of `PIECE_BYTES` bytes (at character boundaries) that are merged like
ordinary words, then every seam is repaired: the second half (by token count) of piece j and the
first half of piece j + 1 are joined into a "window" and merged again, and the window's ids
replace those tokens; a word's last piece (often short) joins its window whole. Pieces and
windows are de-duplicated first, so a repeated pattern costs one piece. Cost: two merge passes
over pieces of ~32 bytes (windows ~ one piece), linear in the word's length.

Exactness: words up to `cap` bytes never reach this module (same ids as HF `tokenizers`). Above
the cap the result is HF's whenever no merge reaches across a seam further than its window
(about 16 bytes each side); this held on the real text the tests and `benchmarks/data/tokenizer.py`
run. Where it does not, the ids still decode to the exact text: the tokenization is valid,
bounded, and may differ from HF's. Two known kinds: a vocabulary token longer than a window
that HF would place across a cut (a 20 KB run of '-' with the fixture's long dash tokens, a
test case), and a long run of one character (" " + "a" * 300 on roberta-base's vocabulary:
BPE pairs a run's characters from its start, so a cut's effect reaches past any window;
tests/test_tagging_word_encoding.py keeps such cases as known differences).
(Why one re-merge suffices in practice: a BPE encoding is the unique token sequence whose every
adjacent pair is "compatible" (merging the pair's bytes gives those two tokens), so a valid
encoding is repaired locally, seam by seam.)
"""

from __future__ import annotations

import tensorflow as tf

# Piece size above the cap. The merge loop's steps grow with it (a 1 MB random-letter word:
# ~0.6 s of merging at 32, ~1.0 s at 64, ~1.7 s at 128), and a seam window is about one piece.
PIECE_BYTES = 32
MIN_CAP_BYTES = 256


def cap_bytes(max_token_bytes: int) -> int:
  """Longest word merged whole: words up to it get exactly HF's ids."""
  return max(MIN_CAP_BYTES, 2 * max_token_bytes)


def cut(data: tf.Tensor, starts: tf.Tensor, lengths: tf.Tensor, cap: int):
  """Cuts words longer than `cap` into pieces of ~PIECE_BYTES at UTF-8 character starts.

  Args:
    data: uint8 [T], the buffer the words are byte ranges of.
    starts, lengths: int64 [U], the words.
    cap: words up to this many bytes stay whole.
  Returns:
    (piece_starts int64 [P], piece_lengths int64 [P], piece_word int64 [P] (the word a piece
    belongs to, non-decreasing), piece_index int64 [P] (0, 1, ... within its word),
    num_pieces int64 [U]).
  """
  long = lengths > cap
  num_pieces = tf.where(long, (lengths + PIECE_BYTES - 1) // PIECE_BYTES, 1)
  piece_word = tf.repeat(tf.range(tf.size(lengths, out_type=tf.int64)), num_pieces)
  index = tf.ragged.range(num_pieces).flat_values
  raw = tf.gather(starts, piece_word) + index * PIECE_BYTES
  # Move a cut forward past continuation bytes (10xxxxxx) to the next character's first byte.
  padded = tf.concat([data, tf.zeros([3], tf.uint8)], 0)
  cont = [tf.cast(tf.equal(tf.gather(padded, raw + k) & 0xC0, 0x80), tf.int64) for k in range(3)]
  begin = raw + cont[0] * (1 + cont[1] * (1 + cont[2]))
  word_end = tf.gather(starts + lengths, piece_word)
  begin = tf.minimum(begin, word_end)
  last = tf.equal(index, tf.gather(num_pieces, piece_word) - 1)
  end = tf.where(last, word_end, tf.concat([begin[1:], [0]], 0)[:tf.size(begin)])
  # A last piece can be empty when the cut moved to the word's end: drop it.
  keep = tf.where(end > begin)[:, 0]
  piece_word = tf.gather(piece_word, keep)
  index = tf.gather(index, keep)
  begin = tf.gather(begin, keep)
  num_pieces = tf.math.unsorted_segment_sum(tf.ones_like(piece_word), piece_word,
                                           tf.size(lengths, out_type=tf.int64))
  return begin, tf.gather(end, keep) - begin, piece_word, index, num_pieces


def stitch(piece_ids: tf.RaggedTensor, piece_starts: tf.Tensor, piece_word: tf.Tensor,
           piece_index: tf.Tensor, num_pieces: tf.Tensor, token_lengths: tf.Tensor,
           merge_strings) -> tf.RaggedTensor:
  """Joins the pieces' ids into words, re-merging each seam's window.

  Args:
    piece_ids: int32 RaggedTensor [P, None], the BPE of each piece (>= 1 id each).
    piece_starts: int64 [P], where each piece starts in the buffer.
    piece_word, piece_index, num_pieces: from `cut`.
    token_lengths: int64 [V], the byte length of every id.
    merge_strings: (starts int64 [N], lengths int64 [N]) of byte ranges of the buffer ->
      int32 RaggedTensor [N, None], their BPE.
  Returns:
    int32 RaggedTensor [U, None], the ids of each word.
  """
  ids = piece_ids.flat_values
  piece = piece_ids.value_rowids()
  n = tf.gather(piece_ids.row_lengths(), piece)
  k = tf.range(tf.size(ids, out_type=tf.int64)) - tf.gather(piece_ids.row_starts(), piece)
  second_half = k >= n // 2
  index = tf.gather(piece_index, piece)
  word = tf.gather(piece_word, piece)
  pieces = tf.gather(num_pieces, word)
  last_piece = tf.equal(index, pieces - 1)
  # The first half of a word's first piece stays; so does every word of one piece.
  fixed = tf.equal(pieces, 1) | (tf.equal(index, 0) & ~second_half)
  # Window w joins the second half of piece w and the first half of piece w + 1, or all of it
  # if w + 1 is the word's last piece (which may be short: its end is no seam's middle).
  window = tf.where(second_half & ~last_piece, piece, piece - 1)
  length = tf.gather(token_lengths, ids)
  before = tf.cumsum(length, exclusive=True)      # bytes of all earlier tokens
  offset = before - tf.gather(before, tf.gather(piece_ids.row_starts(), piece))
  start = tf.gather(piece_starts, piece) + offset   # where each token starts in the buffer
  in_window = tf.where(~fixed)[:, 0]
  # Windows are runs of consecutive tokens: number them in order.
  windows, window_id = tf.unique(tf.gather(window, in_window), out_idx=tf.int64)
  num_windows = tf.size(windows, out_type=tf.int64)
  w_start = tf.math.unsorted_segment_min(tf.gather(start, in_window), window_id, num_windows)
  w_end = tf.math.unsorted_segment_max(tf.gather(start + length, in_window), window_id,
                                       num_windows)
  window_ids = merge_strings(w_start, w_end - w_start)
  # Each token emits a slice of [piece ids | window ids]: itself if fixed, its window's ids if
  # it is the window's first token, nothing otherwise.
  head = tf.concat([[True], tf.not_equal(window_id[1:], window_id[:-1])], 0)
  begin = tf.range(tf.size(ids, out_type=tf.int64))
  size = tf.ones_like(begin)
  w_begin = tf.size(ids, out_type=tf.int64) + tf.gather(window_ids.row_splits, window_id)
  w_size = tf.where(head, tf.gather(window_ids.row_lengths(), window_id), 0)
  begin = tf.tensor_scatter_nd_update(begin, in_window[:, None], w_begin)
  size = tf.tensor_scatter_nd_update(size, in_window[:, None], w_size)
  values = tf.gather(tf.concat([ids, window_ids.flat_values], 0),
                     tf.ragged.range(begin, begin + size).flat_values)
  per_word = tf.math.unsorted_segment_sum(size, word, tf.size(num_pieces))
  return tf.RaggedTensor.from_row_lengths(values, per_word, validate=False)
