"""The unigram baseline: the perplexity of predicting every masked token by its corpus frequency.

A masked LM that has learned nothing about context converges to the unigram distribution of
the tokens it is asked to predict; its perplexity then sits on the "unigram plateau". Printing
that baseline beside the model's perplexity tells a user whether training has left it.

The table is counted from the train split's shards (non-special ids only: masking never
selects a special token), reading at most `max_tokens` tokens spread over all shards, with
add-one smoothing so that a target unseen in the sample has a finite cost.

A damaged shard never gives a silently wrong baseline: a read error, or a shard read to its end
with fewer records than dataset_info.json lists (truncated at a record boundary), raises
DamagedShardError naming the shard, or (with `on_damaged`, for --skip_corrupt_shards) is
reported and left out.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from roberta_tf.common import error_text
from roberta_tf.data import dataset_info, example_spec

# 4M tokens count a 50K-entry table well (the frequent ids decide the baseline) and read in
# seconds; at paper scale reading every shard would take hours.
DEFAULT_MAX_TOKENS = 4_000_000


class DamagedShardError(ValueError):
  """A shard cannot be read to the end, or holds fewer records than dataset_info.json lists."""


def token_counts(data_dir: str, vocab_size: int, special_ids, split: str = "train",
                 max_tokens: int = DEFAULT_MAX_TOKENS,
                 on_damaged: Callable[[str], None] | None = None) -> np.ndarray:
  """Occurrences of each id in `split` (special ids count 0), from up to `max_tokens` tokens.

  Every shard gives an equal share of the sample (read from its start, 256 records at a time),
  so a bounded sample still covers every shard. Returns int64 [vocab_size].

  Raises:
    DamagedShardError: a shard is truncated or corrupt (see the module docstring), unless
      `on_damaged` is given: then it is called with the message and the shard is left out.
  """
  info = dataset_info.read(data_dir)
  files = dataset_info.split_files(data_dir, info, split)
  listed = [int(s.get("num_sequences", -1)) for s in info["splits"][split]["shards"]]
  compression = dataset_info.COMPRESSIONS[info.get("compression", "none")]
  share = -(-max_tokens // max(len(files), 1))
  counts = np.zeros(vocab_size, np.int64)
  for path, expected in zip(files, listed, strict=True):
    shard_counts, records, seen, whole = np.zeros(vocab_size, np.int64), 0, 0, True
    try:
      for batch in tf.data.TFRecordDataset(path, compression_type=compression).batch(256):
        ids = example_spec.parse_batch(batch).flat_values.numpy()
        records += int(batch.shape[0])
        ids = ids[(ids >= 0) & (ids < vocab_size)]
        shard_counts += np.bincount(ids, minlength=vocab_size)
        seen += ids.size
        if seen >= share:
          whole = False
          break
      problem = None
      if whole and 0 <= expected != records:
        problem = (f"shard {path} holds {records} records where {dataset_info.FILENAME} lists "
                   f"{expected}: it is truncated or was replaced; rebuild it")
    except tf.errors.OpError as e:
      why = re.sub(r"' failed with .*", "", error_text.tf_message(e))  # "truncated record at N"
      problem = f"shard {path} is truncated or corrupt ({why}); rebuild it"
    if problem is not None:
      if on_damaged is None:
        raise DamagedShardError(problem)
      on_damaged(problem)
      continue
    counts += shard_counts
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
                    max_tokens: int = DEFAULT_MAX_TOKENS,
                    on_damaged: Callable[[str], None] | None = None) -> np.ndarray:
  """`log_probs(token_counts(...))` of the train split of `data_dir`. float32 [vocab_size]."""
  counts = token_counts(data_dir, vocab_size, special_ids, max_tokens=max_tokens,
                        on_damaged=on_damaged)
  return log_probs(counts, special_ids)
