"""The unigram baseline: the perplexity of predicting every masked token by its corpus frequency.

A masked LM that has learned nothing about context converges to the unigram distribution of
the tokens it is asked to predict; its perplexity then sits on the "unigram plateau". Printing
that baseline beside the model's perplexity tells a user whether training has left it.

The table is counted from the train split's shards (non-special ids only: masking never
selects a special token), reading at most `max_tokens` tokens spread over all shards, with
add-one smoothing so that a target unseen in the sample has a finite cost.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from roberta_tf.data import dataset_info, example_spec

# 4M tokens count a 50K-entry table well (the frequent ids decide the baseline) and read in
# seconds; at paper scale reading every shard would take hours.
DEFAULT_MAX_TOKENS = 4_000_000


def token_counts(data_dir: str, vocab_size: int, special_ids, split: str = "train",
                 max_tokens: int = DEFAULT_MAX_TOKENS) -> np.ndarray:
  """Occurrences of each id in `split` (special ids count 0), from up to `max_tokens` tokens.

  Shards are read round-robin (one record of each in turn), so a bounded sample still covers
  every shard. Returns int64 [vocab_size].
  """
  info = dataset_info.read(data_dir)
  files = dataset_info.split_files(data_dir, info, split)
  compression = dataset_info.COMPRESSIONS[info.get("compression", "none")]
  ds = tf.data.Dataset.from_tensor_slices(files).interleave(
      lambda f: tf.data.TFRecordDataset(f, compression_type=compression),
      cycle_length=max(len(files), 1), block_length=1)
  counts = np.zeros(vocab_size, np.int64)
  seen = 0
  for records in ds.batch(256):
    ids = example_spec.parse_batch(records).flat_values.numpy()
    ids = ids[(ids >= 0) & (ids < vocab_size)]
    counts += np.bincount(ids, minlength=vocab_size)
    seen += ids.size
    if seen >= max_tokens:
      break
  counts[[i for i in special_ids if 0 <= i < vocab_size]] = 0
  return counts


def log_probs(counts: np.ndarray, special_ids=()) -> np.ndarray:
  """Add-one-smoothed unigram log-probabilities over the non-special ids. float32 [V].

  Special ids get the smallest log-probability (they are never a target).
  """
  smoothed = counts.astype(np.float64) + 1.0
  smoothed[list(special_ids)] = 0.0
  logp = np.log(np.maximum(smoothed, 1e-30) / smoothed.sum())
  return logp.astype(np.float32)


def train_log_probs(data_dir: str, vocab_size: int, special_ids,
                    max_tokens: int = DEFAULT_MAX_TOKENS) -> np.ndarray:
  """`log_probs(token_counts(...))` of the train split of `data_dir`. float32 [vocab_size]."""
  counts = token_counts(data_dir, vocab_size, special_ids, max_tokens=max_tokens)
  return log_probs(counts, special_ids)
