"""Unicode NFC in core TF ops (an export may use no tensorflow_text op: tests/serving_loaders.py).

The standard algorithm (UAX #15) on code points, vectorized:
1. quick check: a text is left as it is unless it has a character whose NFC_Quick_Check is No
   or Maybe, or two combining marks out of canonical order; real text rarely does;
2. the other texts: full canonical decomposition (a table; Hangul syllables included), the
   combining marks of each starter sorted stably by combining class, then canonical composition:
   each starter absorbs the marks after it that it composes with and that are not blocked (a
   kept mark of the same class between), and a starter composes with the starter right after it
   (Hangul L+V, LV+T, a few Indic vowel signs) when nothing is kept between them.
The rounds run all starters at once: a mark is tried against its starter's composite so far, one
position a step. Where a starter both composes with the starter before it and has marks that
compose with itself (no such sequence in Unicode's data), the marks are tried against it first.

Tables from Python's unicodedata (Unicode 14.0 in 3.11) less what HF `tokenizers`' older tables
(the unicode-normalization-alignments crate) lack, `_HF_UNKNOWN`: the ids then equal HF's.
"""

from __future__ import annotations

import functools
import unicodedata

import numpy as np
import tensorflow as tf

# Marks (combining class > 0) and one composite that Python's Unicode 14.0 has and HF's tables
# lack (they are Unicode 11-14 additions): HF gives them class 0 and composes nothing into
# U+11938. Found by comparing with `tokenizers.normalizers` (the test suite re-checks every
# mark and composing pair). Inclusive ranges.
_HF_UNKNOWN = (
    (0x7FD, 0x7FD), (0x898, 0x89F), (0x8CA, 0x8D3), (0x9FE, 0x9FE), (0xC3C, 0xC3C),
    (0xD3B, 0xD3C), (0xEBA, 0xEBA), (0x1715, 0x1715), (0x1ABF, 0x1ACE), (0x1DF6, 0x1DFA),
    (0xA82C, 0xA82C), (0x10D24, 0x10D27), (0x10EAB, 0x10EAC), (0x10F46, 0x10F50),
    (0x10F82, 0x10F85), (0x11070, 0x11070), (0x1133B, 0x1133B), (0x1145E, 0x1145E),
    (0x11839, 0x1183A), (0x11938, 0x11938), (0x1193D, 0x1193E), (0x11943, 0x11943),
    (0x119E0, 0x119E0), (0x11A34, 0x11A34), (0x11A47, 0x11A47), (0x11A99, 0x11A99),
    (0x11D42, 0x11D42), (0x11D44, 0x11D45), (0x11D97, 0x11D97), (0x16FF0, 0x16FF1),
    (0x1E130, 0x1E136), (0x1E2AE, 0x1E2AE), (0x1E2EC, 0x1E2EF))
_SHIFT = 21  # code points are < 2**21: (first, second) -> first << 21 | second
_HANGUL = (0xAC00, 0x1100, 0x1161, 0x11A7, 19, 21, 28)  # S, L, V, T bases; L, V, T counts


@functools.cache
def tables() -> dict[str, np.ndarray]:
  """Decompositions, combining classes with quick-check flags, and composition pairs."""
  dec_keys, dec_splits, dec_values = [], [0], []
  info_keys, info_values = [], []
  pair_keys, pair_values = [], []
  unknown = {cp for lo, hi in _HF_UNKNOWN for cp in range(lo, hi + 1)}
  for cp in range(0x110000):
    if cp in unknown:
      continue
    ch = chr(cp)
    nfd = unicodedata.normalize("NFD", ch)
    if nfd != ch:
      dec_keys.append(cp)
      dec_values.extend(ord(c) for c in nfd)
      dec_splits.append(len(dec_values))
    d = unicodedata.decomposition(ch).split()
    if len(d) == 2 and not d[0].startswith("<") and unicodedata.normalize(
        "NFC", chr(int(d[0], 16)) + chr(int(d[1], 16))) == ch:
      pair_keys.append(int(d[0], 16) << _SHIFT | int(d[1], 16))
      pair_values.append(cp)
  s_base, l_base, v_base, t_base, l_count, v_count, t_count = _HANGUL
  for i in range(l_count * v_count):
    lv = s_base + i * t_count
    pair_keys.append((l_base + i // v_count) << _SHIFT | (v_base + i % v_count))
    pair_values.append(lv)
    for k in range(1, t_count):
      pair_keys.append(lv << _SHIFT | (t_base + k))
      pair_values.append(lv + k)
  seconds = {k & ((1 << _SHIFT) - 1) for k in pair_keys}
  for cp in range(0x80, 0x110000):
    if cp in unknown:
      continue
    ch = chr(cp)
    flag = unicodedata.normalize("NFC", ch) != ch or cp in seconds
    value = unicodedata.combining(ch) | (flag << 8)
    if value:
      info_keys.append(cp)
      info_values.append(value)
  i32 = lambda x: np.array(x, np.int32)  # noqa: E731
  return {"dec_keys": i32(dec_keys), "dec_splits": np.array(dec_splits, np.int64),
          "dec_values": i32(dec_values), "info_keys": i32(info_keys),
          "info_values": i32(info_values), "pair_keys": np.array(pair_keys, np.int64),
          "pair_values": i32(pair_values)}


def _table(keys, values, default):
  return tf.lookup.StaticHashTable(
      tf.lookup.KeyValueTensorInitializer(tf.constant(keys), tf.constant(values)), default)


def _shift_in_rows(x, row_start, fill):
  """y[i] = x[i - 1], fill at the first element of each row."""
  return tf.where(row_start, tf.cast(fill, x.dtype), tf.concat([x[:1], x[:-1]], 0))


class NFC(tf.Module):
  """texts tf.string [N] (valid UTF-8) -> their NFC, tf.string [N]. A tf.Module: its tables are
  saved with a SavedModel that holds it."""

  def __init__(self, name: str | None = "nfc"):
    super().__init__(name=name)
    t = tables()
    with tf.init_scope():
      self._dec = _table(t["dec_keys"], np.arange(len(t["dec_keys"]), dtype=np.int32), -1)
      self._dec_splits = tf.constant(t["dec_splits"])
      self._dec_values = tf.constant(t["dec_values"])
      self._info = _table(t["info_keys"], t["info_values"], 0)
      self._pairs = _table(t["pair_keys"], t["pair_values"], -1)

  def __call__(self, texts: tf.Tensor) -> tf.Tensor:
    """Only the texts with a byte >= 0x80 are looked at (ASCII is NFC)."""
    splits = tf.concat([[0], tf.cumsum(tf.cast(tf.strings.length(texts), tf.int64))], 0)
    data = tf.io.decode_raw(tf.strings.reduce_join(texts), tf.uint8)
    high = tf.where(data >= 0x80)[:, 0]
    rows, _ = tf.unique(tf.searchsorted(splits, high, side="right", out_type=tf.int64) - 1)
    return tf.cond(tf.size(rows) > 0,
                   lambda: tf.tensor_scatter_nd_update(
                       texts, rows[:, None], self._non_ascii(tf.gather(texts, rows))),
                   lambda: texts)

  def _non_ascii(self, texts: tf.Tensor) -> tf.Tensor:
    cps = tf.strings.unicode_decode(texts, "UTF-8")
    info = self._info.lookup(cps.flat_values)
    ccc = info & 255
    row_start = self._row_starts(cps.row_splits, tf.size(info, out_type=tf.int64))
    prev = _shift_in_rows(ccc, row_start, 0)
    bad = (info > 255) | ((ccc > 0) & (prev > ccc))
    rows = tf.where(tf.math.unsorted_segment_max(tf.cast(bad, tf.int32), cps.value_rowids(),
                                                 tf.shape(texts)[0]) > 0)
    return tf.cond(tf.size(rows) > 0,
                   lambda: tf.tensor_scatter_nd_update(
                       texts, rows, self._normalize(tf.gather(cps, rows[:, 0]))),
                   lambda: texts)

  @staticmethod
  def _row_starts(row_splits, size):
    starts = tf.boolean_mask(row_splits[:-1], row_splits[:-1] < row_splits[1:])
    return tf.scatter_nd(starts[:, None], tf.ones_like(starts, tf.bool), tf.reshape(size, [1]))

  def _normalize(self, cps: tf.RaggedTensor) -> tf.Tensor:
    """ragged int32 code points [R, None] -> NFC strings [R]."""
    cps = self._decompose(cps)
    values, rows = cps.flat_values, cps.value_rowids()
    ccc = self._info.lookup(values) & 255
    row_start = self._row_starts(cps.row_splits, tf.size(values, out_type=tf.int64))
    segment = tf.cumsum(tf.cast(row_start | tf.equal(ccc, 0), tf.int64))
    order = tf.argsort(segment * 256 + tf.cast(ccc, tf.int64), stable=True)
    values, ccc = tf.gather(values, order), tf.gather(ccc, order)
    values, rows = self._compose(values, ccc, rows)
    return tf.strings.unicode_encode(
        tf.RaggedTensor.from_value_rowids(values, rows, nrows=cps.nrows()), "UTF-8")

  def _decompose(self, cps: tf.RaggedTensor) -> tf.RaggedTensor:
    values = cps.flat_values
    row = self._dec.lookup(values)
    found = row >= 0
    safe = tf.cast(tf.maximum(row, 0), tf.int64)
    start = tf.gather(self._dec_splits, safe)
    size = tf.where(found, tf.gather(self._dec_splits, safe + 1) - start, 1)
    n = tf.size(self._dec_values, out_type=tf.int64)
    begin = tf.where(found, start, n + tf.range(tf.size(values, out_type=tf.int64)))
    out = tf.gather(tf.concat([self._dec_values, values], 0),
                    tf.ragged.range(begin, begin + size).flat_values)
    splits = tf.gather(tf.concat([[0], tf.cumsum(size)], 0), cps.row_splits)
    return tf.RaggedTensor.from_row_splits(out, splits, validate=False)

  def _compose(self, values, ccc, rows):
    """Canonical composition of reordered code points (rows: int64 row of each)."""
    def round_(values, ccc, rows, _):
      seg_start = tf.not_equal(tf.concat([[-1], rows[:-1]], 0), rows) | tf.equal(ccc, 0)
      seg = tf.cumsum(tf.cast(seg_start, tf.int64)) - 1
      values, alive = self._absorb_marks(values, ccc, seg_start)
      values, alive, merged = self._join_starters(values, ccc, rows, seg, seg_start, alive)
      keep = tf.where(alive)[:, 0]
      return tf.gather(values, keep), tf.gather(ccc, keep), tf.gather(rows, keep), merged

    values, ccc, rows, _ = tf.while_loop(
        lambda *args: args[3], round_, (values, ccc, rows, tf.constant(True)),
        shape_invariants=(tf.TensorShape([None]),) * 3 + (tf.TensorShape([]),))
    return values, rows

  def _absorb_marks(self, values, ccc, seg_start):
    """Each segment's starter absorbs its composable, unblocked marks: (values, alive)."""
    starts = tf.where(seg_start)[:, 0]
    ends = tf.concat([starts[1:], tf.shape(values, out_type=tf.int64)], 0)
    starter = tf.gather(values, starts)
    has = tf.equal(tf.gather(ccc, starts), 0)
    last_kept = tf.fill(tf.shape(starts), -1)
    alive = tf.ones_like(values, tf.bool)

    def step(t, starter, last_kept, alive):
      at = starts + t
      inside = at < ends
      pos = tf.minimum(at, tf.size(values, out_type=tf.int64) - 1)
      mark, mark_ccc = tf.gather(values, pos), tf.gather(ccc, pos)
      comp = self._pairs.lookup(tf.cast(starter, tf.int64) * 2**_SHIFT + tf.cast(mark, tf.int64))
      ok = inside & has & (last_kept < mark_ccc) & (comp >= 0)
      starter = tf.where(ok, comp, starter)
      last_kept = tf.where(inside & ~ok, mark_ccc, last_kept)
      alive = tf.tensor_scatter_nd_update(alive, tf.boolean_mask(pos, ok)[:, None],
                                          tf.zeros_like(tf.boolean_mask(pos, ok), tf.bool))
      return t + 1, starter, last_kept, alive

    longest = tf.reduce_max(tf.concat([ends - starts, [0]], 0))
    _, starter, _, alive = tf.while_loop(lambda t, *_: t < longest, step,
                                         (tf.constant(1, tf.int64), starter, last_kept, alive))
    return tf.tensor_scatter_nd_update(values, starts[:, None], starter), alive

  def _join_starters(self, values, ccc, rows, seg, seg_start, alive):
    """A starter with no kept mark composes with the next starter of its row: one join per
    pair a round, the leftmost of a chain. Returns (values, alive, whether any joined)."""
    starts = tf.where(seg_start)[:, 0]
    kept = tf.math.unsorted_segment_sum(tf.cast(alive, tf.int32), seg, tf.size(starts))
    first, second = starts[:-1], starts[1:]
    comp = self._pairs.lookup(tf.cast(tf.gather(values, first), tf.int64) * 2**_SHIFT
                              + tf.cast(tf.gather(values, second), tf.int64))
    can = ((comp >= 0) & tf.equal(kept[:-1], 1) & tf.equal(tf.gather(ccc, first), 0)
           & tf.equal(tf.gather(rows, first), tf.gather(rows, second)))
    join = can & ~tf.concat([[False], can[:-1]], 0)
    values = tf.tensor_scatter_nd_update(values, tf.boolean_mask(first, join)[:, None],
                                         tf.boolean_mask(comp, join))
    gone = tf.boolean_mask(second, join)
    alive = tf.tensor_scatter_nd_update(alive, gone[:, None], tf.zeros_like(gone, tf.bool))
    return values, alive, tf.reduce_any(join)
