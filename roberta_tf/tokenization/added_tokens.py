"""Added tokens split out of texts in TF ops, as HF `tokenizers`' AddedVocabulary does.

HF matches a set of strings with an Aho-Corasick automaton in leftmost-longest mode: scanning
from the start, the match that starts first wins, and among those that start there the longest;
the scan goes on after its end. `lstrip` moves a match's start back over the whitespace run
before it (never before the previous match's end or the text's start), `rstrip` its end over the
run after it. The text between matches is left for the next stage.

In TF ops: a byte trie of the patterns (one dense [nodes, 256] transition table) is walked from
every byte that can start a pattern, all of them at once, one byte a step (a step per byte of
the longest match found, not of the text); the greedy left-to-right choice among the candidates
is a linked list (candidate -> the first candidate at or after its end) whose nodes reachable
from the first candidate are found by pointer doubling (log2(candidates) steps).

Whitespace is Unicode White_Space (Rust's `char::is_whitespace`, as HF's lstrip/rstrip).
Texts must be valid UTF-8. Where an `rstrip` token's stretched end would run past the start of
the next match, HF emits overlapping pieces; here the stretch stops at that start.
"""

from __future__ import annotations

import typing
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from roberta_tf.tokenization import pretokenize


class Pattern(typing.NamedTuple):
  text: bytes  # non-empty
  id: int
  lstrip: bool = False
  rstrip: bool = False


class Pieces(typing.NamedTuple):
  """Texts cut at the matches: piece strings and the token id of each match piece (-1 for the
  text between matches, which may be empty). RaggedTensors [B, None] with equal row splits."""
  strings: tf.RaggedTensor
  ids: tf.RaggedTensor


def _trie(patterns: Sequence[Pattern]) -> tuple[np.ndarray, np.ndarray]:
  """(transitions int32 [nodes * 256] (-1: none), accept int32 [nodes] (pattern index, -1))."""
  children: list[dict[int, int]] = [{}]
  accept = [-1]
  for k, p in enumerate(patterns):
    node = 0
    for b in p.text:
      if b not in children[node]:
        children[node][b] = len(children)
        children.append({})
        accept.append(-1)
      node = children[node][b]
    accept[node] = k  # a later duplicate wins, as a later entry of HF's map does
  table = np.full((len(children), 256), -1, np.int32)
  for node, edges in enumerate(children):
    for b, child in edges.items():
      table[node, b] = child
  return table.reshape(-1), np.array(accept, np.int32)


class AddedTokenSplitter:
  """Splits texts at the leftmost-longest matches of fixed strings (HF's AddedVocabulary)."""

  def __init__(self, patterns: Sequence[Pattern]):
    """Builds the trie (eagerly: the tensors become constants of any graph that uses them)."""
    self.patterns = tuple(patterns)
    self.max_len = max((len(p.text) for p in self.patterns), default=0)
    self.strips = any(p.lstrip or p.rstrip for p in self.patterns)
    table, accept = _trie(self.patterns)
    with tf.init_scope():
      self._table = tf.constant(table)
      self._accept = tf.constant(accept)
      self._ids = tf.constant([p.id for p in self.patterns] or [0], tf.int32)
      self._lstrip = tf.constant([p.lstrip for p in self.patterns] or [False])
      self._rstrip = tf.constant([p.rstrip for p in self.patterns] or [False])
      self._class_table = tf.constant(pretokenize.codepoint_classes()) if self.strips else None

  def __call__(self, texts: tf.Tensor) -> Pieces:
    """tf.string [B] -> Pieces: a text with k matches gives 2k + 1 pieces (gap, match, gap,
    ..., gap); the pieces of a text joined are the text."""
    buffer = tf.strings.reduce_join(texts)
    data = tf.io.decode_raw(buffer, tf.uint8)
    row_splits = tf.concat([[0], tf.cumsum(tf.cast(tf.strings.length(texts), tf.int64))], 0)
    if not self.patterns:
      start, end, kind = (tf.zeros([0], tf.int64),) * 2 + (tf.zeros([0], tf.int32),)
    else:
      start, end, kind = self._matches(data, row_splits)
    if self.strips:
      start, end = self._strip(data, row_splits, start, end, kind)
    return self._pieces(buffer, row_splits, start, end, kind)

  def _longest_at(self, data: tf.Tensor, row_splits: tf.Tensor):
    """Every position where a pattern starts, with the longest one: (pos int64 [C],
    length int64 [C], pattern int32 [C]), C in increasing order of pos."""
    root = self._table[:256]
    pos = tf.where(tf.gather(root, tf.cast(data, tf.int32)) >= 0)[:, 0]
    row_end = tf.gather(row_splits, tf.searchsorted(row_splits, pos, side="right"))
    state = tf.gather(root, tf.cast(tf.gather(data, pos), tf.int32))
    best_len = tf.where(tf.gather(self._accept, state) >= 0, tf.constant(1, tf.int64), 0)
    best_pat = tf.gather(self._accept, state)
    active = tf.range(tf.size(pos, out_type=tf.int64))      # candidates still walking
    total = tf.size(data, out_type=tf.int64)

    def step(depth, active, state, best_len, best_pat):
      at = tf.gather(pos, active) + depth
      inside = at < tf.gather(row_end, active)
      byte = tf.cast(tf.gather(data, tf.minimum(at, total - 1)), tf.int32)
      nxt = tf.where(inside, tf.gather(self._table, state * 256 + byte), -1)
      keep = nxt >= 0
      active, state = tf.boolean_mask(active, keep), tf.boolean_mask(nxt, keep)
      hit = tf.gather(self._accept, state)
      found = tf.where(hit >= 0)
      best_len = tf.tensor_scatter_nd_update(
          best_len, tf.gather(active, found), tf.fill(tf.shape(found)[:1], depth + 1))
      best_pat = tf.tensor_scatter_nd_update(best_pat, tf.gather(active, found),
                                             tf.gather_nd(hit, found))
      return depth + 1, active, state, best_len, best_pat

    _, _, _, best_len, best_pat = tf.while_loop(
        lambda depth, active, *_: (depth < self.max_len) & (tf.size(active) > 0), step,
        (tf.constant(1, tf.int64), active, state, best_len, best_pat),
        shape_invariants=(tf.TensorShape([]), tf.TensorShape([None]), tf.TensorShape([None]),
                          tf.TensorShape([None]), tf.TensorShape([None])))
    found = best_len > 0
    return (tf.boolean_mask(pos, found), tf.boolean_mask(best_len, found),
            tf.boolean_mask(best_pat, found))

  def _matches(self, data, row_splits):
    """The leftmost-longest scan: (start int64 [K], end int64 [K], pattern int32 [K])."""
    pos, length, pat = self._longest_at(data, row_splits)
    n = tf.size(pos)
    # next[i]: the first candidate at or after the end of i (n: none); node n is a sink.
    nxt = tf.concat([tf.cast(tf.searchsorted(pos, pos + length, side="left"), tf.int32), [n]], 0)
    chosen = tf.one_hot(0, n + 1, on_value=True, off_value=False, dtype=tf.bool)

    def double(chosen, jump):
      reached = tf.math.unsorted_segment_max(tf.cast(chosen, tf.int32), jump, n + 1) > 0
      return chosen | reached, tf.gather(jump, jump)

    rounds = tf.cast(tf.math.ceil(tf.math.log(tf.cast(n + 1, tf.float32)) / np.log(2.0)),
                     tf.int32) + 1
    chosen, _ = tf.while_loop(lambda chosen, jump: True, double, (chosen, nxt),
                              maximum_iterations=rounds)
    chosen = chosen[:n]
    start = tf.boolean_mask(pos, chosen)
    return start, start + tf.boolean_mask(length, chosen), tf.boolean_mask(pat, chosen)

  def _strip(self, data, row_splits, start, end, kind):
    """Moves lstrip tokens' starts back and rstrip tokens' ends on over whitespace."""
    cls, _ = pretokenize._byte_classes(data, self._class_table)  # pylint: disable=protected-access
    space = tf.equal(cls, pretokenize.CLASS_SPACE)
    row = tf.searchsorted(row_splits, start, side="right") - 1
    row_start, row_end = tf.gather(row_splits, row), tf.gather(row_splits, row + 1)
    nonspace = tf.where(~space)[:, 0]
    # rstrip: up to the first non-space at or after the end, within the text and before the
    # next match.
    after = tf.gather(tf.concat([nonspace, [tf.size(data, out_type=tf.int64)]], 0),
                      tf.searchsorted(nonspace, end, side="left"))
    next_start = tf.concat([start[1:], [tf.size(data, out_type=tf.int64)]], 0)
    stretched = tf.minimum(tf.minimum(after, row_end), next_start)
    end = tf.where(tf.gather(self._rstrip, kind), tf.maximum(stretched, end), end)
    # lstrip: back to just after the last non-space before the start, not before the previous
    # match's (stretched) end nor the text's start.
    before = tf.searchsorted(nonspace, start, side="left")          # non-spaces before start
    run_start = tf.gather(tf.concat([[-1], nonspace], 0), before) + 1
    prev_row = tf.concat([[-1], row[:-1]], 0)
    prev_end = tf.concat([tf.zeros([1], tf.int64), end[:-1]], 0)
    prev_end = tf.where(tf.equal(prev_row, row), prev_end, row_start)
    start = tf.where(tf.gather(self._lstrip, kind),
                     tf.maximum(run_start, tf.maximum(prev_end, row_start)), start)
    return start, end

  def _pieces(self, buffer, row_splits, start, end, kind) -> Pieces:
    batch = tf.size(row_splits, out_type=tf.int64) - 1
    row = tf.searchsorted(row_splits, start, side="right", out_type=tf.int64) - 1
    bounds = tf.RaggedTensor.from_value_rowids(tf.stack([start, end], 1), row, nrows=batch)
    bounds = bounds.merge_dims(1, 2)  # [B, 2k]: s1, e1, s2, e2, ...
    points = tf.concat([row_splits[:-1, None], bounds, row_splits[1:, None]], axis=1)
    values, splits = points.flat_values, points.row_splits
    last = tf.scatter_nd(splits[1:, None] - 1, tf.ones([batch], tf.bool),
                         tf.shape(values, out_type=tf.int64))
    piece_start = tf.boolean_mask(values[:-1], ~last[:-1])
    piece_end = tf.boolean_mask(values[1:], ~last[:-1])
    piece_splits = splits - tf.range(batch + 1)
    strings = tf.strings.substr(buffer, piece_start, piece_end - piece_start)
    # Piece j of a text is a match when j is odd (gap, match, gap, ...).
    j = tf.range(tf.size(piece_start, out_type=tf.int64)) - tf.repeat(
        piece_splits[:-1], piece_splits[1:] - piece_splits[:-1])
    match_ids = tf.gather(self._ids, kind)
    ids = tf.scatter_nd(tf.where(j % 2 == 1), match_ids, tf.shape(piece_start, out_type=tf.int64))
    ids = tf.where(j % 2 == 1, ids, -1)
    return Pieces(tf.RaggedTensor.from_row_splits(strings, piece_splits, validate=False),
                  tf.RaggedTensor.from_row_splits(ids, piece_splits, validate=False))
