"""MLM masking of a padded batch: dynamic (RoBERTa), static (BERT) and whole-word.

The mask of a sequence is a pure function of its per-sequence stateless seed (`sequence_seed`:
[TF's stateless Philox folded over (seed, epoch or copy, shard index), record index]) and its ids,
never of the batch it lands in, so a resumed run and an uninterrupted one mask alike.

Per sequence with n maskable tokens (not special, not padding):
- select exactly k = floor(mask_prob * n + u) of them, u ~ U[0, 1) per sequence (fairseq's
  unbiased stochastic rounding, as RoBERTa used; the mean rate is mask_prob for any n), at least 1
  when n >= 1. Whole-word mode selects k of the sequence's words instead and then every piece of
  each selected word;
- keep at most P = max_predictions_per_seq of the selected tokens: the excess (only possible with
  whole-word masking or a small P) is dropped, lowest-scoring words first, and those tokens stay
  unchanged and unpredicted;
- of the kept ones, replace each independently with `<mask>` (p = mask_token_prob), with a
  uniformly random non-special id (p = random_token_prob), or leave it (the rest).

Everything is vectorized over [B, S]: TF's stateless ops take a single seed per op, so the
per-token uniforms come from SplitMix64 (a counter-based generator that passes BigCrush) keyed by
each row's Philox-derived seed; selection is a sort per row, not a loop.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import tensorflow as tf

from roberta_tf.data.vocab_info import VocabInfo

# SplitMix64 constants (Steele, Lea & Flood 2014).
_GOLDEN = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB
# Independent uniforms drawn per token: selection score, action, random id, per-row rounding.
_STREAMS = 4


@dataclasses.dataclass(frozen=True)
class MaskingConfig:
  """How to mask.

  Attributes:
    mask_prob: fraction of each sequence's maskable tokens (or words) selected for prediction.
    mask_token_prob: of the selected tokens, the fraction replaced by `<mask>`.
    random_token_prob: of the selected tokens, the fraction replaced by a random non-special id;
      the remaining 1 - mask_token_prob - random_token_prob stay unchanged.
    max_predictions_per_seq: P, the prediction slots per sequence; None →
      `default_max_predictions(max_seq_len, mask_prob)`.
    whole_word: select words (all their byte-level pieces) instead of single pieces.
    static: BERT's static masking: epoch e reuses the mask of copy e % dupe_factor, so each
      sequence has only `dupe_factor` different masks over the whole run.
    dupe_factor: number of static copies (BERT/RoBERTa used 10).
  """
  mask_prob: float = 0.15
  mask_token_prob: float = 0.8
  random_token_prob: float = 0.1
  max_predictions_per_seq: int | None = None
  whole_word: bool = False
  static: bool = False
  dupe_factor: int = 10

  def __post_init__(self):
    if not 0.0 < self.mask_prob <= 1.0:
      raise ValueError(f"mask_prob={self.mask_prob} must be in (0, 1]")
    if (min(self.mask_token_prob, self.random_token_prob) < 0
        or self.mask_token_prob + self.random_token_prob > 1.0):
      raise ValueError(f"mask_token_prob={self.mask_token_prob} and random_token_prob="
                       f"{self.random_token_prob} must be >= 0 and sum to <= 1")
    if self.max_predictions_per_seq is not None and self.max_predictions_per_seq < 1:
      raise ValueError(f"max_predictions_per_seq={self.max_predictions_per_seq} must be >= 1")
    if self.dupe_factor < 1:
      raise ValueError(f"dupe_factor={self.dupe_factor} must be >= 1")

  def resolved_max_predictions(self, max_seq_len: int) -> int:
    """P for sequences padded to `max_seq_len`."""
    p = self.max_predictions_per_seq or default_max_predictions(max_seq_len, self.mask_prob)
    return min(p, max_seq_len)

  def mask_copy(self, epoch):
    """Which mask an epoch uses: the epoch itself (dynamic) or its static copy."""
    return epoch % self.dupe_factor if self.static else epoch


def unmask(batch: dict) -> np.ndarray:
  """The original ids [B, S] of a masked batch (NumPy arrays or eager tensors): every
  prediction slot with weight > 0 puts its `mask_ids` back at its `mask_positions`."""
  ids = np.array(batch["input_ids"])
  weights = np.asarray(batch["mask_weights"]) > 0
  rows, slots = np.nonzero(weights)
  ids[rows, np.asarray(batch["mask_positions"])[rows, slots]] = np.asarray(
      batch["mask_ids"])[rows, slots]
  return ids


def default_max_predictions(max_seq_len: int, mask_prob: float = 0.15) -> int:
  """Slots for mask_prob of S with 1.33x headroom (whole words overshoot), a multiple of 8.

  128 → 32, 512 → 104. Token-level selection never needs more than mask_prob * S + 1.
  """
  p = math.ceil(mask_prob * max_seq_len * 1.33) + 1
  return min(-(-p // 8) * 8, max_seq_len)


def shard_key(seed, copy, shard_index) -> tf.Tensor:
  """int64 scalar: TF's stateless Philox folded over (seed, copy, shard_index).

  Computed once per shard per epoch; a record's seed is [shard_key, record_index].
  """
  s = tf.stack([tf.cast(seed, tf.int64), tf.constant(0x5EED, tf.int64)])
  for data in (copy, shard_index):
    s = tf.random.experimental.stateless_fold_in(s, tf.cast(data, tf.int64))
  # fold_in(s, d) is [philox(s), d]: one more draw so the key depends on the last datum too.
  return tf.random.stateless_uniform([], seed=s, minval=None, maxval=None, dtype=tf.int64)


def sequence_seed(seed, copy, shard_index, record_index) -> tf.Tensor:
  """The stateless seed int64 [2] of one sequence's mask.

  Args:
    seed: the run's data seed (int scalar).
    copy: the epoch (dynamic masking) or `config.mask_copy(epoch)` (static).
    shard_index: the shard's index in the split's shard list (stable across runs).
    record_index: the record's index within its shard.
  """
  return tf.stack([shard_key(seed, copy, shard_index), tf.cast(record_index, tf.int64)])


def _shr(x: tf.Tensor, n: int) -> tf.Tensor:
  return tf.bitwise.right_shift(x, tf.constant(n, x.dtype))


def _xor(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
  return tf.bitwise.bitwise_xor(x, y)


def _splitmix(x: tf.Tensor) -> tf.Tensor:
  """SplitMix64's finalizer on uint64 (wrapping arithmetic)."""
  x = _xor(x, _shr(x, 30)) * tf.constant(_MIX1, tf.uint64)
  x = _xor(x, _shr(x, 27)) * tf.constant(_MIX2, tf.uint64)
  return _xor(x, _shr(x, 31))


def _random_bits(seeds: tf.Tensor, length: int) -> tf.Tensor:
  """uint64 [B, length, _STREAMS]: independent 64-bit draws per (row, position, stream)."""
  s = tf.bitcast(tf.cast(seeds, tf.int64), tf.uint64)
  row_key = _splitmix(_xor(_splitmix(s[:, 0]), s[:, 1]))
  counter = tf.range(1, length * _STREAMS + 1, dtype=tf.int64)
  counter = tf.reshape(tf.bitcast(counter, tf.uint64), [1, length, _STREAMS])
  return _splitmix(row_key[:, None, None] + counter * tf.constant(_GOLDEN, tf.uint64))


def _to_unit(bits: tf.Tensor) -> tf.Tensor:
  """uint64 → float32 uniform in [0, 1) with 24 exact bits."""
  return tf.cast(_shr(bits, 40), tf.float32) * (1.0 / (1 << 24))


def _descending_rank(key: tf.Tensor) -> tf.Tensor:
  """int32 [B, S]: each entry's rank in its row by descending key, ties by position."""
  order = tf.argsort(key, axis=1, direction="DESCENDING", stable=True)
  return tf.argsort(order, axis=1, stable=True)


def _spread_over_words(value: tf.Tensor, word_id: tf.Tensor, is_start: tf.Tensor) -> tf.Tensor:
  """For each token, `value` at the start of its word. value/word_id [B, S] (ids in [0, S])."""
  b, s = tf.shape(value)[0], tf.shape(value)[1]
  segment = word_id + tf.range(b)[:, None] * (s + 1)
  low = tf.reduce_min(value) - 1
  at_start = tf.where(is_start, value, low)
  per_word = tf.math.unsorted_segment_max(at_start, segment, b * (s + 1))
  return tf.gather(per_word, segment)


class Masker:
  """Masks padded id batches; call it in a `Dataset.map` after batching.

  Args:
    vocab: size, special ids and (for whole-word) word-start flags.
    config: the masking options.
    max_seq_len: S, the padded length of every batch.
  """

  def __init__(self, vocab: VocabInfo, config: MaskingConfig, max_seq_len: int):
    if config.whole_word and vocab.word_start is None:
      raise ValueError("whole-word masking needs the vocabulary's word starts: build VocabInfo "
                       "from vocab.json (VocabInfo.from_dir)")
    self.vocab = vocab
    self.config = config
    self.max_seq_len = max_seq_len
    self.num_predictions = config.resolved_max_predictions(max_seq_len)
    special = vocab.special_flags()
    self._special = tf.constant(special)
    self._replacements = tf.constant(np.flatnonzero(~special).astype(np.int32))
    self._word_start = tf.constant(vocab.word_start) if config.whole_word else None
    # A piece after a whitespace-only piece starts a word too ("a\n\nb" -> a, ĊĊ, b).
    space = vocab.space if vocab.space is not None else np.zeros([vocab.vocab_size], bool)
    self._breaks = tf.constant(special | space) if config.whole_word else None

  def __call__(self, input_ids: tf.Tensor, seeds: tf.Tensor) -> dict[str, tf.Tensor]:
    """Masks a batch.

    Args:
      input_ids: int32 [B, S], padded with the pad id.
      seeds: int64 [B, 2], each row's `sequence_seed`.

    Returns:
      The batch contract: `input_ids` int32 [B, S] (masked), `padding_mask` int32 [B, S]
      (1 real, 0 pad), `mask_positions` int32 [B, P] (ascending, 0 in empty slots),
      `mask_ids` int32 [B, P] (original ids, 0 in empty slots), `mask_weights` float32 [B, P]
      (1 filled, 0 empty).
    """
    ids = tf.convert_to_tensor(input_ids, tf.int32)
    s = self.max_seq_len
    ids = tf.ensure_shape(ids, [None, s])
    real = tf.not_equal(ids, self.vocab.pad_id)
    special = tf.gather(self._special, ids)
    candidate = tf.logical_and(real, tf.logical_not(special))
    bits = _random_bits(seeds, s)
    selected = self._select(ids, special, candidate, bits)
    mask_positions, mask_ids, filled = self._prediction_slots(ids, selected)
    return {
        "input_ids": self._replace(ids, selected, bits),
        "padding_mask": tf.cast(real, tf.int32),
        "mask_positions": mask_positions,
        "mask_ids": mask_ids,
        "mask_weights": tf.cast(filled, tf.float32),
    }

  def _select(self, ids, special, candidate, bits) -> tf.Tensor:
    """bool [B, S]: the tokens to predict: k units (tokens, or whole words) per row, then at
    most P of their tokens.

    Args:
      ids: int32 [B, S]; special: bool [B, S], at special ids; candidate: bool [B, S], the
      maskable tokens (real, not special); bits: `_random_bits` [B, S, _STREAMS].
    """
    cfg = self.config
    s = self.max_seq_len
    positions = tf.range(s, dtype=tf.int64)[None, :]
    # Unique int64 keys: 31 random bits, ties impossible because the position is appended.
    key = tf.bitcast(_shr(bits[:, :, 0], 33), tf.int64) * s + positions

    if cfg.whole_word:
      breaks = tf.gather(self._breaks, ids)  # specials and whitespace-only pieces
      after_break = tf.pad(breaks, [[0, 0], [1, 0]], constant_values=True)[:, :-1]
      is_start = tf.logical_and(
          candidate, tf.logical_or(tf.gather(self._word_start, ids), after_break))
      word_id = tf.cumsum(tf.cast(is_start, tf.int32), axis=1)
      units = is_start
    else:
      units = candidate

    # Exactly k units per row: the k with the highest random keys.
    n = tf.reduce_sum(tf.cast(units, tf.float32), axis=1)
    u = _to_unit(bits[:, 0, 3])
    k = tf.clip_by_value(tf.floor(cfg.mask_prob * n + u), tf.minimum(n, 1.0), n)
    unit_key = tf.where(units, key, -1)
    chosen = tf.logical_and(units, _descending_rank(unit_key) < tf.cast(k, tf.int32)[:, None])

    if cfg.whole_word:
      chosen_tok = _spread_over_words(tf.cast(chosen, tf.int32), word_id, is_start) > 0
      selected = tf.logical_and(candidate, chosen_tok)
      # Caps whole words: a word's pieces share its key.
      token_key = _spread_over_words(unit_key, word_id, is_start)
    else:
      selected = chosen
      token_key = unit_key
    # At most P predictions: drop the lowest-keyed excess (restored below by not masking it).
    token_key = tf.where(selected, token_key, -1)
    return tf.logical_and(selected, _descending_rank(token_key) < self.num_predictions)

  def _prediction_slots(self, ids, selected):
    """(mask_positions, mask_ids int32 [B, P], filled bool [B, P]): the selected positions in
    ascending order, then empty slots (position and id 0)."""
    s = self.max_seq_len
    pos32 = tf.range(s, dtype=tf.int32)[None, :]
    order_key = tf.where(selected, pos32, s + pos32)
    slots = -tf.math.top_k(-order_key, k=self.num_predictions, sorted=True).values
    filled = slots < s
    mask_positions = tf.where(filled, slots, 0)
    mask_ids = tf.where(filled, tf.gather(ids, mask_positions, batch_dims=1), 0)
    return mask_positions, mask_ids, filled

  def _replace(self, ids, selected, bits) -> tf.Tensor:
    """int32 [B, S]: `ids` with each selected token replaced by <mask>, by a random
    non-special id, or kept (80/10/10: an independent draw per selected token)."""
    cfg = self.config
    action = _to_unit(bits[:, :, 1])
    to_mask = tf.logical_and(selected, action < cfg.mask_token_prob)
    to_random = tf.logical_and(
        selected, tf.logical_and(action >= cfg.mask_token_prob,
                                 action < cfg.mask_token_prob + cfg.random_token_prob))
    num_replacements = tf.constant(int(self._replacements.shape[0]), tf.uint64)
    # Lemire's multiply-shift: 32 random bits → uniform index in [0, num_replacements).
    random_index = _shr(_shr(bits[:, :, 2], 32) * num_replacements, 32)
    random_ids = tf.gather(self._replacements, tf.cast(random_index, tf.int32))
    return tf.where(to_mask, self.vocab.mask_id, tf.where(to_random, random_ids, ids))
